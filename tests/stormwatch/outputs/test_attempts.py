"""Attempts (model.json ``attempts``), the job's verdict over them, and where a session's outputs go."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from stormwatch.analysis.model import IndicatorKind
from stormwatch.events.sessions import SessionStatus
from stormwatch.outputs.attempts import Attempt, AttemptStatus, FirstCause, attempt_status, worst_attempt
from stormwatch.outputs.job_document import job_verdict
from stormwatch.outputs.json_members import MemberError, Members
from stormwatch.outputs.session_paths import UnsafeSessionIdError, folder_href, session_folder
from stormwatch.outputs.verdict import ExitCode, Verdict, VerdictStatus
from stormwatch.severity import FailOn

OOM = FirstCause(kind=IndicatorKind.MOST_SEVERE, rank=3, signal="alert:error", severity="critical",
                 timestamp_ns=1_700_000_003_000_000_000, oom=True)


def attempt(number: int, verdict: VerdictStatus | None, **changes: object) -> Attempt:
    base = Attempt(number=number, of=2, session_id=f"s-{number}", status=AttemptStatus.COMPLETED,
                   session_status=SessionStatus.COMPLETED, started_at_ns=number * 10**12, ended_at_ns=None,
                   ranks_present=4, ranks_expected=4, verdict=verdict)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(("changes", "text"), [
    ({"status": AttemptStatus.INTERRUPTED, "most_severe": OOM, "oom_ranks": (3,)},
     "attempt 1 of 2, interrupted, OOM on rank 3"),
    ({"oom_ranks": (1, 2, 3)}, "attempt 1 of 2, completed, OOM on ranks 1-3"),
    ({"most_severe": dataclasses.replace(OOM, signal="gap:persistent_drift", oom=False, rank=1)},
     "attempt 1 of 2, completed, gap:persistent_drift on rank 1"),
    ({"ranks_present": 3}, "attempt 1 of 2, completed, 1 of 4 ranks missing"),
    ({}, "attempt 1 of 2, completed, no anomaly"),
    ({"verdict": VerdictStatus.EMPTY}, "attempt 1 of 2, completed, nothing loaded"),
    ({"verdict": None, "status": AttemptStatus.RUNNING}, "attempt 1 of 2, running, not diagnosed"),
])
def test_describe_names_the_attempt_its_end_and_what_it_found(changes: dict[str, object], text: str) -> None:
    changes = dict(changes)
    verdict = changes.pop("verdict", VerdictStatus.CLEAN)
    assert attempt(1, verdict, **changes).describe() == text  # type: ignore[arg-type]


def test_an_attempt_survives_model_json() -> None:
    original = attempt(1, VerdictStatus.CRITICAL, most_severe=OOM,
                       earliest=dataclasses.replace(OOM, kind=IndicatorKind.EARLIEST), oom_ranks=(3,),
                       report="sessions/s-1/report.html", model="sessions/s-1/model.json",
                       default=True, error="its outputs were not written: OSError: disk full", ended_at_ns=5)
    data = orjson.loads(orjson.dumps(original.as_json()))
    assert data["description"] == original.describe() and data["verdict"] == "critical"
    assert Attempt.from_json(Members(data)) == original
    with pytest.raises(MemberError, match='member "attempts.2.status": "exploded" is not an attempt status'):
        Attempt.from_json(Members({**data, "status": "exploded"}, "attempts.2"))
    without_rank = {name: value for name, value in data["most_severe"].items() if name != "rank"}
    with pytest.raises(MemberError, match='member "most_severe.rank": missing'):
        Attempt.from_json(Members({**data, "most_severe": without_rank}))


@pytest.mark.parametrize(("statuses", "restarted", "expected"), [
    ([SessionStatus.COMPLETED] * 4, True, AttemptStatus.COMPLETED),
    ([SessionStatus.COMPLETED, SessionStatus.INTERRUPTED], False, AttemptStatus.INTERRUPTED),
    ([SessionStatus.COMPLETED, SessionStatus.INCOMPLETE], True, AttemptStatus.INTERRUPTED),
    ([SessionStatus.RUNNING], False, AttemptStatus.RUNNING),
    ([SessionStatus.RUNNING], True, AttemptStatus.INTERRUPTED),
    ([SessionStatus.INCOMPLETE], False, AttemptStatus.INCOMPLETE),
])
def test_status_puts_a_session_in_a_restarts_terms(statuses: list[SessionStatus], restarted: bool,
                                                   expected: AttemptStatus) -> None:
    assert attempt_status(statuses, restarted=restarted) is expected


def test_the_worst_attempt_wins_then_the_default_then_the_earliest() -> None:
    first, second = attempt(1, VerdictStatus.CRITICAL), attempt(2, VerdictStatus.CLEAN, default=True)
    assert worst_attempt([first, second]) == first
    both = [attempt(1, VerdictStatus.WARNING), attempt(2, VerdictStatus.WARNING, default=True)]
    assert worst_attempt(both) == both[1]
    assert worst_attempt([attempt(1, VerdictStatus.WARNING), attempt(2, VerdictStatus.WARNING)]).number == 1  # type: ignore[union-attr]
    assert worst_attempt([attempt(1, None), attempt(2, VerdictStatus.EMPTY)]).number == 2  # type: ignore[union-attr]
    assert worst_attempt([attempt(1, None)]) is None


def test_the_job_verdict_is_the_worst_sessions_and_names_it() -> None:
    first = attempt(1, VerdictStatus.CRITICAL, status=AttemptStatus.INTERRUPTED, oom_ranks=(3,), most_severe=OOM)
    second = attempt(2, VerdictStatus.CLEAN, default=True)
    verdicts = {"s-1": Verdict(VerdictStatus.CRITICAL, ExitCode.CLEAN, "critical: 4/4 ranks present; most severe: "
                                                                         "alert:error on rank 3 (critical)"),
                "s-2": Verdict(VerdictStatus.CLEAN, ExitCode.CLEAN, "clean: 4/4 ranks present; no anomalies")}
    verdict = job_verdict([first, second], verdicts, fail_on=FailOn.CRITICAL)
    assert verdict == Verdict(VerdictStatus.CRITICAL, ExitCode.FINDINGS,
                              "critical: from attempt 1 of 2, interrupted, OOM on rank 3 (session s-1); "
                              "4/4 ranks present; most severe: alert:error on rank 3 (critical)")
    alone = job_verdict([second, attempt(1, None)], verdicts, fail_on=FailOn.CRITICAL)
    assert alone == verdicts["s-2"]  # one diagnosed session: its verdict unchanged
    assert job_verdict([attempt(1, None)], verdicts, fail_on=FailOn.NEVER) is None


@pytest.mark.parametrize(("session_id", "folder", "href"), [
    ("train-run1-rank0", "sessions/train-run1-rank0", "sessions/train-run1-rank0/report.html"),
    ("run 1 <b>", "sessions/run%201%20%3Cb%3E", "sessions/run%25201%2520%253Cb%253E/report.html"),
    ("légacy:1?#", "sessions/l%C3%A9gacy%3A1%3F%23", "sessions/l%25C3%25A9gacy%253A1%253F%2523/report.html"),
    ("v1.2~x", "sessions/v1.2~x", "sessions/v1.2~x/report.html"),
])
def test_a_session_folder_is_its_id_percent_encoded(session_id: str, folder: str, href: str) -> None:
    assert session_folder(session_id) == folder
    assert folder_href(folder, "report.html") == href


@pytest.mark.parametrize(("session_id", "reason"), [
    ("..", "relative path segment"), (".", "relative path segment"), ("", "empty"),
    ("../../etc", "path separator"), ("a/b", "path separator"), ("a\\b", "path separator"),
    ("a%2Fb", "percent-encoded separator"), ("x%252e%252e", "percent-encoded separator"),
    ("x" * 201, "at most 200"), ("é" * 40, "at most 200"), ("bad\ud800", "lone surrogate"),
])
def test_ids_that_could_name_another_place_are_refused(session_id: str, reason: str) -> None:
    with pytest.raises(UnsafeSessionIdError, match=reason):
        session_folder(session_id)
