"""Verdicts and ``--fail-on``: table-driven over built models."""

from __future__ import annotations

import pytest

from stormwatch.analysis.model import AnomalyIndicator, DiagnosticsModel
from stormwatch.load.tree import Entry
from stormwatch.outputs.model_json import VerdictStatus, decide_verdict, format_ranks, input_fingerprint
from stormwatch.severity import FailOn, Severity


def make_indicator(*, kind: str = "most_severe", severity: str = "warning", rank: int = 0) -> AnomalyIndicator:
    return AnomalyIndicator(kind=kind, rank=rank, severity=severity, timestamp_ns=1, signal="alert:x", details="")


def make_model(*, severity: str | None = None, missing: tuple[int, ...] = ()) -> DiagnosticsModel:
    indicators = () if severity is None else (make_indicator(kind="earliest", severity=severity),
                                              make_indicator(severity=severity))
    expected = tuple(range(4))
    present = tuple(rank for rank in expected if rank not in missing)
    return DiagnosticsModel((), indicators, expected, present, missing, {})


@pytest.mark.parametrize(
    ("severity", "missing", "fail_on", "status", "exit_code"),
    [
        (None, (), FailOn.NEVER, VerdictStatus.CLEAN, 0),
        (None, (), FailOn.WARNING, VerdictStatus.CLEAN, 0),
        ("info", (), FailOn.WARNING, VerdictStatus.INFO, 0),
        ("warning", (), FailOn.WARNING, VerdictStatus.WARNING, 3),
        ("warning", (), FailOn.CRITICAL, VerdictStatus.WARNING, 0),
        ("critical", (), FailOn.CRITICAL, VerdictStatus.CRITICAL, 3),
        ("critical", (), FailOn.NEVER, VerdictStatus.CRITICAL, 0),
        (None, (2,), FailOn.WARNING, VerdictStatus.WARNING, 3),  # a missing rank is a warning
        ("info", (1, 2), FailOn.CRITICAL, VerdictStatus.WARNING, 0),
        ("critical", (3,), FailOn.WARNING, VerdictStatus.CRITICAL, 3),
    ],
)
def test_verdict(severity, missing, fail_on, status, exit_code) -> None:
    verdict = decide_verdict(make_model(severity=severity, missing=missing), events=10, fail_on=fail_on)
    assert (verdict.status, verdict.exit_code) == (status, exit_code)
    assert verdict.summary.startswith(status.value)
    if missing:
        assert f"missing ranks {format_ranks(missing)}" in verdict.summary


def test_empty_job_is_exit_5_whatever_fail_on() -> None:
    for fail_on in FailOn:
        verdict = decide_verdict(make_model(), events=0, fail_on=fail_on)
        assert (verdict.status, verdict.exit_code) == (VerdictStatus.EMPTY, 5)


@pytest.mark.parametrize(("ranks", "text"), [((), ""), ((3,), "3"), ((0, 2, 4, 5, 6, 7), "0,2,4-7"),
                                             ((9, 1, 2), "1-2,9")])
def test_format_ranks(ranks, text) -> None:
    assert format_ranks(ranks) == text


def test_fail_on_thresholds() -> None:
    assert not FailOn.NEVER.reached_by(Severity.CRITICAL)
    assert FailOn.WARNING.reached_by(Severity.WARNING) and not FailOn.WARNING.reached_by(Severity.INFO)
    assert FailOn.CRITICAL.reached_by(Severity.CRITICAL) and not FailOn.CRITICAL.reached_by(Severity.WARNING)
    assert not FailOn.WARNING.reached_by(None)


def test_fingerprint_is_order_independent_and_sensitive() -> None:
    a, b = Entry("a.jsonl", 10, "etag-1"), Entry("b/c.jsonl", 20, "etag-2")
    assert input_fingerprint([a, b]) == input_fingerprint([b, a])
    assert input_fingerprint([a, b]) != input_fingerprint([a, Entry("b/c.jsonl", 20, "etag-3")])
    assert input_fingerprint([a]) != input_fingerprint([a, b])
