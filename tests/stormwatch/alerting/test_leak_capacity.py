"""Leaks (one alert per leaking rank) and capacity warnings (one per job name) as alerts: built from their
records, routed and silenced by kind, sent whatever notify_on, told once while they persist."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from stormwatch.alerting.alert_file import AlertBook, read_book
from stormwatch.alerting.alert_records import AlertStatus, Transition
from stormwatch.alerting.alert_state import advance
from stormwatch.alerting.decisions import Action, Circumstances, plan_alert
from stormwatch.alerting.findings import JobFinding, finding_from_json, finding_to_json
from stormwatch.alerting.fleet_findings import fleet_findings
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.leak_findings import leak_text
from stormwatch.alerting.ledger import ChannelStatus
from stormwatch.alerting.observations import Fingerprint, observe
from stormwatch.alerting.policy import AlertPolicy
from stormwatch.alerting.routes import Receiver, parse_routes
from stormwatch.alerting.secret_names import SecretName
from stormwatch.alerting.silences import Silence, SilenceBook, SilenceMatcher, silence_id
from stormwatch.growth.figures import GrowthCounter, GrowthGap, RankGrowth
from stormwatch.history.job_names import JobNamePattern
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import T0, make_fact, make_finding
from tests.stormwatch.alerting.documents import document

GIB = float(1 << 30)
TOTAL = 80 * (1 << 30)


def growth(rank: int, *, gib_per_hour: float = 1.2, hours: float | None = 3.4, leak: bool = True,
           counter: GrowthCounter = GrowthCounter.ALLOCATED) -> RankGrowth:
    slope = gib_per_hour * GIB
    return RankGrowth(rank=rank, duration_ns=7_200_000_000_000,
                      allocated_bytes_per_hour=slope if counter is GrowthCounter.ALLOCATED else 0.0,
                      reserved_bytes_per_hour=slope if counter is GrowthCounter.RESERVED else 0.0,
                      judged_counter=counter, low_bytes_per_hour=slope * 0.9, high_bytes_per_hour=slope * 1.1,
                      confidence=0.99 if leak else 0.4, leak=leak, leak_min_bytes_per_hour=256 * 2**20,
                      device_total_bytes=TOTAL, capacity_after_start_s=None if hours is None else hours * 3600,
                      gap=None)


def gap(rank: int) -> RankGrowth:
    return RankGrowth(rank=rank, duration_ns=None, allocated_bytes_per_hour=None, reserved_bytes_per_hour=None,
                      judged_counter=None, low_bytes_per_hour=None, high_bytes_per_hour=None, confidence=None,
                      leak=False, leak_min_bytes_per_hour=None, device_total_bytes=None, capacity_after_start_s=None,
                      gap=GrowthGap.NO_DEVICE_TOTAL)


TEXTS = [
    ("the issue's example", growth(3), {}, "rank 3 grows 1.2 GiB/h; at this rate it would run out of the 80 GiB "
                                           "device 3.4 h after start"),
    ("placed", growth(3), {"host": "node-07", "device_id": 3},
     "rank 3 on node-07 GPU 3 grows 1.2 GiB/h; at this rate it would run out of the 80 GiB device 3.4 h after start"),
    ("reserved, slow", growth(0, gib_per_hour=0.25, hours=300.0, counter=GrowthCounter.RESERVED), {},
     "rank 0 grows 0.25 GiB/h; at this rate it would run out of the 80 GiB device 300 h after start"),
]


@pytest.mark.parametrize(("case", "figure", "place", "expected"), TEXTS, ids=[c[0] for c in TEXTS])
def test_leak_text(case: str, figure: RankGrowth, place: dict[str, Any], expected: str) -> None:
    assert leak_text(figure, **place) == expected, case


def leaking_document(job_id: str = "llama-7b-0042", *figures: RankGrowth) -> dict[str, Any]:
    """A real diagnosed job (clean) whose fleet member says ``figures`` (default: rank 1 leaks)."""
    found = document("clean", job_id=job_id)
    found["fleet"]["growth"] = [item.as_json() for item in (figures or (growth(0, leak=False), growth(1)))]
    return found


def test_a_leaking_rank_is_a_finding_of_its_job_and_other_ranks_are_not() -> None:
    job = JobFinding.from_document(leaking_document("llama-7b-0042", growth(0, leak=False), growth(1), gap(2),
                                                    growth(3, gib_per_hour=2.0, hours=1.5)), report_url=None)
    assert [(fact.kind, fact.rank, fact.signal, fact.severity) for fact in job.leaks] == [
        ("leak", 1, "leak:rank-1", Severity.WARNING), ("leak", 3, "leak:rank-3", Severity.WARNING)]
    host, device = job.rank_at(1) or ("?", None)
    assert job.leaks[0].details == (f"rank 1 on {host} GPU {device} grows 1.2 GiB/h; at this rate it would run out "
                                    "of the 80 GiB device 3.4 h after start")
    assert job.leaks[0].when == "over the run" and job.leaks[0].label == "Leak"
    assert finding_from_json(finding_to_json(job)) == job
    assert "leaks" not in finding_to_json(JobFinding.from_document(document("clean"), report_url=None))


@pytest.mark.parametrize("growth_member", [None, "not a list", [{"rank": "one"}], [{"rank": 1, "leak": True}]])
def test_missing_or_unreadable_growth_is_no_finding(growth_member: Any) -> None:
    found = document("clean")
    found["fleet"]["growth"] = growth_member
    assert JobFinding.from_document(found, report_url=None).leaks == ()


def observed_book(*findings: JobFinding, book: AlertBook | None = None, nights: int = 0,
                  fleet: bool = True) -> tuple[AlertBook, dict[Fingerprint, Transition]]:
    seen = observe(findings, names=JobNamePattern(), known_runs=(book or AlertBook()).runs, fleet_evaluated=fleet)
    return advance(book or AlertBook(), seen, now=T0 + timedelta(days=nights))


def test_each_leaking_rank_is_an_alert_of_the_job_name() -> None:
    job = JobFinding.from_document(leaking_document("llama-7b-0042", growth(1), growth(3)), report_url=None)
    book, _ = observed_book(job)
    assert sorted(key.signal for key in book.records if key.kind is AlertKind.LEAK) == ["leak:rank-1", "leak:rank-3"]
    assert {key.job_name for key in book.records} == {"llama-7b"}
    assert read_book(book.to_bytes()).records == book.records  # the alert state keeps them


ROUTES = """\
[receivers.memory-team]
slack_webhook_env = "MEMORY_HOOK"

[receivers.capacity-planning]
slack_webhook_env = "CAPACITY_HOOK"

[[routes]]
kind = "leak"
receiver = "memory-team"

[[routes]]
kind = "capacity"
receiver = "capacity-planning"
"""
DEFAULT = Receiver(name="default", slack_webhook=SecretName(env="DEFAULT_HOOK"))


def capacity_sections(job_id: str = "llama-7b-0042") -> dict[str, Any]:
    return {"capacity": [{"job_name": "llama-7b", "world_size": 8, "runs": 5, "growth_pct_per_run": 6.2,
                          "latest_peak_bytes": 69 << 30, "device_total_bytes": TOTAL, "runs_to_capacity": 3,
                          "job_id": job_id, "peaks_bytes": [55 << 30, 69 << 30], "rank": 2, "host": "node-3",
                          "device_id": 2}]}


def test_routes_and_silences_match_the_new_kinds() -> None:
    table = parse_routes(ROUTES, file="routes.toml", default=DEFAULT)
    job = JobFinding.from_document(leaking_document(), report_url=None)
    (capacity,) = fleet_findings(capacity_sections(), index_url=None, report_url_of=lambda job_id: None)
    seen = observe([job, capacity, make_finding("bert-0001", make_fact())], names=JobNamePattern(),
                   known_runs={}, fleet_evaluated=True)
    receivers = {item.fingerprint.kind: [r.name for r in table.receivers_for(item.labels)]
                 for item in seen.observations}
    assert receivers == {AlertKind.LEAK: ["memory-team"], AlertKind.CAPACITY: ["capacity-planning"],
                         AlertKind.MOST_SEVERE: ["default"]}
    labels = {item.fingerprint.kind: item.labels for item in seen.observations}
    assert labels[AlertKind.CAPACITY].job_id == "llama-7b-0042"  # job globs match it like any run
    for kind in ("leak", "capacity"):
        matchers = (SilenceMatcher.parse(f"kind={kind}"),)
        until = T0 + timedelta(days=7)
        book, _ = SilenceBook().add(Silence(silence_id(matchers, until, "known"), matchers, until, "known", T0, "ana"))
        silenced = {key for key, value in labels.items() if book.silencing(value, T0) is not None}
        assert silenced == {AlertKind(kind)}


@pytest.mark.parametrize(("kind", "sent"), [(AlertKind.LEAK, True), (AlertKind.CAPACITY, True),
                                            (AlertKind.EARLIEST, False)])
def test_leaks_and_capacity_are_sent_whatever_notify_on(kind: AlertKind, sent: bool) -> None:
    job = JobFinding.from_document(leaking_document(), report_url=None)
    warning = make_finding("bert-0001", make_fact("earliest", severity=Severity.WARNING, signal="alert:warning"))
    findings = [job, warning, *fleet_findings(capacity_sections(), index_url=None, report_url_of=lambda _: None)]
    book, transitions = observed_book(*findings)
    (record,) = [record for key, record in book.records.items() if key.kind is kind]
    assert record.severity is Severity.WARNING
    team = Receiver(name="team", slack_webhook=SecretName(env="TEAM_HOOK"))
    (plan,) = plan_alert(record, (team,), Circumstances(transitions[record.fingerprint], None, None),
                         policy=AlertPolicy(), notify_on=Severity.CRITICAL, now=T0)
    assert (plan.action is Action.SEND_NEW) is sent
    assert plan.status is (ChannelStatus.SENT if sent else ChannelStatus.SKIPPED_BELOW_THRESHOLD)


def test_a_capacity_warning_is_one_alert_while_its_name_stays_in_warning() -> None:
    first = fleet_findings(capacity_sections("llama-7b-0042"), index_url=None, report_url_of=lambda _: None)
    assert first[0].indicators[0].details.startswith(
        "llama-7b: peak up 6 % a run over 5 runs; at this trend it needs more than 80 GiB within 3 runs")
    assert "on rank 2 on node-3 GPU 2" in first[0].indicators[0].details
    book, transitions = observed_book(*first)
    (key,) = book.records
    assert key == Fingerprint("llama-7b", AlertKind.CAPACITY, "capacity") and transitions[key] is Transition.NEW
    nextnight = fleet_findings(capacity_sections("llama-7b-0043"), index_url=None, report_url_of=lambda _: None)
    book, transitions = observed_book(*nextnight, book=book, nights=1)
    assert transitions[key] is Transition.STILL_FIRING and book.records[key].key.job_id == "llama-7b-0043"
    book, transitions = observed_book(book=book, nights=2)  # no longer in warning
    assert transitions[key] is Transition.RESOLVED and book.records[key].status is AlertStatus.RESOLVED
    _, transitions = observed_book(*nextnight, book=book, nights=3, fleet=False)  # post-job: not evaluated
    assert transitions[key] is Transition.NONE


def test_an_unreadable_capacity_entry_is_left_out() -> None:
    sections = {"capacity": [{"job_name": "x"}, *capacity_sections()["capacity"]]}
    assert [job.job_id for job in fleet_findings(sections, index_url=None, report_url_of=lambda _: None)] == [
        "llama-7b-0042"]
