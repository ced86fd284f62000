"""Observations and the alert state: fingerprints by job name, latest run per name, transitions, storage."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from stormwatch.alerting.alert_file import AlertBook, read_book
from stormwatch.alerting.alert_records import AlertStatus, TargetState, Transition
from stormwatch.alerting.alert_state import advance, merged, recalled, seeded
from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import ChannelOutcome, ChannelStatus, Decision, FindingKey
from stormwatch.alerting.observations import Fingerprint, RunMark, fingerprint_of_key, observe
from stormwatch.history.job_names import JobNamePattern
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import (
    START_NS,
    T0,
    book_of,
    make_fact,
    make_finding,
    make_regression,
    make_suspect,
)

NAMES = JobNamePattern()
CRITICAL = Fingerprint("llama-8r", AlertKind.MOST_SEVERE, "alert:critical")
DAY = timedelta(days=1)


def test_runs_of_a_job_name_share_an_alert_and_the_latest_run_speaks_for_the_name() -> None:
    older = make_finding("llama-8r-0141", started_ns=START_NS)
    newer = make_finding("llama-8r-0142", make_fact(signal="alert:warning", severity=Severity.WARNING),
                         started_ns=START_NS + 10)
    observed = observe([newer, older], names=NAMES, known_runs={}, fleet_evaluated=False)
    assert [item.fingerprint for item in observed.observations] == [
        Fingerprint("llama-8r", AlertKind.MOST_SEVERE, "alert:warning")]
    assert observed.runs == {"llama-8r": RunMark(START_NS + 10, "llama-8r-0142")}
    assert observed.scope.job_names == {"llama-8r"} and not observed.scope.fleet


def test_an_older_run_than_the_state_knows_evaluates_nothing() -> None:
    stale = observe([make_finding("llama-8r-0140")], names=NAMES,
                    known_runs={"llama-8r": RunMark(START_NS + 5, "llama-8r-0142")}, fleet_evaluated=False)
    assert stale.observations == () and stale.scope.job_names == frozenset()
    same = observe([make_finding("llama-8r-0142", started_ns=START_NS + 5)], names=NAMES,
                   known_runs={"llama-8r": RunMark(START_NS + 5, "llama-8r-0142")}, fleet_evaluated=False)
    assert len(same.observations) == 1  # the same run again (a rerun, --force): evaluated


def test_job_level_and_fleet_observations() -> None:
    job = make_finding("vit-3", make_fact("earliest"), make_fact("most_severe"), oom_rank=2, missing=(1,))
    fleet = [make_regression("bert-7", job_name="bert"), make_suspect("node-9", 3)]
    observed = observe([job, *fleet], names=NAMES, known_runs={}, fleet_evaluated=True)
    assert {item.fingerprint.text for item in observed.observations} == {
        "|suspect_host|suspect_host|node-9#3", "bert|regression|regression:peak_reserved_bytes",
        "vit|earliest|alert:critical", "vit|missing_ranks|missing_ranks", "vit|most_severe|alert:critical",
        "vit|oom|oom"}
    missing = next(item for item in observed.observations if item.fingerprint.kind is AlertKind.MISSING_RANKS)
    assert missing.severity is Severity.WARNING and missing.fact.details == "ranks 1 of 4 missing"
    device = next(item for item in observed.observations if item.fingerprint.kind is AlertKind.SUSPECT_HOST)
    assert device.labels.job_id == "" and device.labels.host == "node-9"
    assert observe(fleet, names=NAMES, known_runs={}, fleet_evaluated=False).observations == ()


def test_transitions_new_still_firing_resolved_and_untouched() -> None:
    first = observe([make_finding("llama-8r-01"), make_finding("bert-01")], names=NAMES, known_runs={},
                    fleet_evaluated=False)
    book, moved = advance(AlertBook(), first, now=T0)
    assert set(moved.values()) == {Transition.NEW}
    assert all(record.status is AlertStatus.FIRING for record in book.records.values())
    clean = replace(make_finding("llama-8r-02", started_ns=START_NS + 1), indicators=())
    second = observe([clean], names=NAMES, known_runs=book.runs, fleet_evaluated=False)
    later, moved = advance(book, second, now=T0 + DAY)
    assert moved[CRITICAL] is Transition.RESOLVED and later.records[CRITICAL].resolved_at == (T0 + DAY).isoformat()
    bert = Fingerprint("bert", AlertKind.MOST_SEVERE, "alert:critical")
    assert moved[bert] is Transition.NONE and later.records[bert].status is AlertStatus.FIRING  # bert did not run
    third = observe([make_finding("llama-8r-03", started_ns=START_NS + 2)], names=NAMES, known_runs=later.runs,
                    fleet_evaluated=False)
    again, moved = advance(later, third, now=T0 + 2 * DAY)
    assert moved[CRITICAL] is Transition.NEW and again.records[CRITICAL].started_at == (T0 + 2 * DAY).isoformat()
    fourth = observe([make_finding("llama-8r-04", started_ns=START_NS + 3)], names=NAMES, known_runs=again.runs,
                     fleet_evaluated=False)
    still, moved = advance(again, fourth, now=T0 + 3 * DAY)
    record = still.records[CRITICAL]
    assert moved[CRITICAL] is Transition.STILL_FIRING and record.key.job_id == "llama-8r-04"
    assert (record.started_at, record.last_seen_at) == ((T0 + 2 * DAY).isoformat(), (T0 + 3 * DAY).isoformat())


def test_fleet_alerts_resolve_only_when_the_fleet_was_evaluated() -> None:
    book = book_of(make_suspect("node-9"))
    device = next(iter(book.records))
    post_job = observe([make_finding("x-1")], names=NAMES, known_runs=book.runs, fleet_evaluated=False)
    assert advance(book, post_job, now=T0 + DAY)[0].records[device].status is AlertStatus.FIRING
    audit = observe([], names=NAMES, known_runs=book.runs, fleet_evaluated=True)
    assert advance(book, audit, now=T0 + DAY)[0].records[device].status is AlertStatus.RESOLVED


def test_old_resolutions_are_dropped_unless_a_resolved_message_is_pending() -> None:
    book = book_of(make_finding("llama-8r-01"))
    clean = replace(make_finding("llama-8r-02", started_ns=START_NS + 1), indicators=())
    gone = advance(book, observe([clean], names=NAMES, known_runs=book.runs, fleet_evaluated=False), now=T0)[0]
    assert gone.records[CRITICAL].status is AlertStatus.RESOLVED
    nothing = observe([], names=NAMES, known_runs={}, fleet_evaluated=False)
    assert CRITICAL not in advance(gone, nothing, now=T0 + timedelta(days=31))[0].records
    pending = replace(gone.records[CRITICAL], targets={"slack": TargetState(ChannelStatus.FAILED, T0.isoformat())})
    kept = advance(AlertBook({CRITICAL: pending}), nothing, now=T0 + timedelta(days=31))[0]
    assert CRITICAL in kept.records


def test_the_state_round_trips_and_tolerates_damage() -> None:
    book = book_of(make_finding("vit-3", make_fact("earliest"), oom_rank=2, missing=(1,), hosts=("n0", "n1")),
                   make_suspect("node-<9>"), make_regression("bert-7", job_name="bert"))
    claimed = replace(next(iter(book.records.values())),
                      targets={"team/slack": TargetState(ChannelStatus.IN_FLIGHT, None, None, 2, "x", "tok", "t")})
    book = AlertBook({**book.records, claimed.fingerprint: claimed}, book.runs)
    data = book.to_bytes()
    assert read_book(data) == book and read_book(data).to_bytes() == data
    document = orjson.loads(data)
    document["alerts"][0]["kind"] = "bogus"
    damaged = read_book(orjson.dumps(document))
    assert len(damaged.records) == len(book.records) - 1 and damaged.problems[0].startswith("alerts.json alert 1")
    assert read_book(b"garbage").problems and read_book(None) == AlertBook()


def test_seeding_from_a_ledger_written_before_the_alert_state() -> None:
    key = FindingKey("llama-8r-0141", "most_severe", 0, "alert:critical", 1)
    sent = Decision(key, Severity.CRITICAL, "2026-09-28T02:00:00+00:00",
                    {"slack": ChannelOutcome(ChannelStatus.SENT, 1), "email": ChannelOutcome(ChannelStatus.FAILED)})
    observed = observe([make_finding("llama-8r-0142")], names=NAMES, known_runs={}, fleet_evaluated=False)
    book, moved = advance(AlertBook(), observed, now=T0)
    targets = seeded(book, moved, {key: sent}, NAMES).records[CRITICAL].targets
    assert targets == {"slack": TargetState(ChannelStatus.SENT, "2026-09-28T02:00:00+00:00")}
    assert fingerprint_of_key(FindingKey("host node-1 device 3", "suspect_host", 3, "suspect_host", 0), NAMES) == \
        Fingerprint("", AlertKind.SUSPECT_HOST, "suspect_host", "node-1", 3)
    assert fingerprint_of_key(FindingKey("x", "pager", 0, "s", 0), NAMES) is None


@pytest.mark.parametrize(("claim", "applied"), [("mine", True), ("theirs", False)])
def test_outcomes_merge_only_into_targets_still_holding_this_claim(claim: str, applied: bool) -> None:
    book = book_of(make_finding("llama-8r-01"))
    record = replace(book.records[CRITICAL],
                     targets={"slack": TargetState(ChannelStatus.IN_FLIGHT, None, None, 0, None, claim, "t")})
    theirs = AlertBook({CRITICAL: record}, book.runs).to_bytes()
    outcome = TargetState(ChannelStatus.SENT, T0.isoformat(), None, 1)
    result = read_book(merged(theirs, "mine", {(CRITICAL, "slack"): outcome}))
    assert (result.records[CRITICAL].targets["slack"] == outcome) is applied


def test_an_earlier_attempts_oom_is_the_jobs_oom(tmp_path: Path) -> None:
    """A job restarted after an OOM: its model.json shows the clean restart, its attempts the OOM."""
    from stormwatch.diagnose import DiagnoseOptions
    from stormwatch.diagnose_sessions import diagnose_job
    from tests import builders as b

    root = tmp_path / "llama-8r-0142"
    b.write_attempt(root, job_id="run-1", world_size=2, attempt="1", close_status="interrupted",
                    alerts_of=lambda rank: (b.oom_alert(2.0),) if rank == 1 else ())
    b.write_attempt(root, job_id="run-2", world_size=2, attempt="2", start_ns=START_NS + 60 * 10**9)
    document = diagnose_job([root], job_id=root.name, source_name=root.name,
                            options=DiagnoseOptions(all_sessions=True)).document
    job = JobFinding.from_document(orjson.loads(document.to_json()), report_url=None)
    assert job.oom is not None and job.oom.rank == 1 and "attempt 1 of 2" in job.oom.details
    assert job.attempt is not None and job.attempt.description == "attempt 1 of 2, interrupted, OOM on rank 1"
    observed = observe([job], names=NAMES, known_runs={}, fleet_evaluated=False)
    # the worst attempt's first causes (the OOM's error event on rank 1) and the job's OOM, which inhibits them
    assert [item.fingerprint for item in observed.observations] == [
        Fingerprint("llama-8r", AlertKind.EARLIEST, "alert:error"),
        Fingerprint("llama-8r", AlertKind.MOST_SEVERE, "alert:error"),
        Fingerprint("llama-8r", AlertKind.OOM, "oom"),
    ]


def ledger_line(job_id: str, *, state: str | None, at: str, slack: ChannelStatus = ChannelStatus.SENT) -> Decision:
    return Decision(FindingKey(job_id, "most_severe", 3, "alert:critical", START_NS), Severity.CRITICAL, at,
                    {"slack": ChannelOutcome(slack, 1), "email": ChannelOutcome(ChannelStatus.FAILED, 3, "boom")},
                    alert=CRITICAL.text, state=state)


@pytest.mark.parametrize(("lines", "recalled_from"), [
    ([ledger_line("llama-8r-0141", state="firing", at="2026-01-01")], "llama-8r-0141"),
    ([ledger_line("llama-8r-0141", state="firing", at="2026-01-01"),
      ledger_line("llama-8r-0142", state="still_firing", at="2026-01-02", slack=ChannelStatus.STILL_FIRING)],
     "llama-8r-0142"),
    ([ledger_line("llama-8r-0141", state=None, at="2026-01-01")], None),  # before the alert state: seeded's
], ids=["firing", "still firing on a newer run", "no state member"])
def test_a_lost_state_recalls_what_the_ledger_shows_firing(lines: list[Decision], recalled_from: str | None) -> None:
    book = recalled(AlertBook(), {line.key: line for line in lines}, NAMES)
    if recalled_from is None:
        assert book.records == {}
        return
    record = book.records[CRITICAL]
    assert (record.status, record.key.job_id, record.severity) == (AlertStatus.FIRING, recalled_from, Severity.CRITICAL)
    at = lines[-1].decided_at
    assert record.targets == {"slack": TargetState(status=ChannelStatus.SENT, notified_at=at),
                              "email": TargetState(status=ChannelStatus.FAILED)}
    resolved, transitions = advance(book, observe([make_finding("llama-8r-0143", make_fact(signal="alert:warning",
                                                                                           severity=Severity.WARNING))],
                                                  names=NAMES, known_runs={}, fleet_evaluated=False), now=T0)
    assert transitions[CRITICAL] is Transition.RESOLVED and resolved.records[CRITICAL].status is AlertStatus.RESOLVED


def test_a_resolved_alert_is_recalled_resolved_and_a_failed_resolution_stays_due() -> None:
    lines = [ledger_line("llama-8r-0141", state="firing", at="2026-01-01"),
             ledger_line("llama-8r-0142", state="resolved", at="2026-01-02")]
    record = recalled(AlertBook(), {line.key: line for line in lines}, NAMES).records[CRITICAL]
    assert (record.status, record.resolved_at) == (AlertStatus.RESOLVED, "2026-01-02")
    assert record.targets == {"slack": TargetState(status=ChannelStatus.SENT, notified_at="2026-01-02",
                                                   resolved_at="2026-01-02"),
                              "email": TargetState(status=ChannelStatus.FAILED, notified_at="2026-01-02")}


def test_a_recalled_state_never_replaces_a_record_it_has() -> None:
    book = book_of(make_finding("llama-8r-0141"))
    line = ledger_line("llama-8r-0140", state="firing", at="2026-01-01")
    assert recalled(book, {line.key: line}, NAMES).records == book.records
