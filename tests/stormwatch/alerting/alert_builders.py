"""Builders for alerting tests: findings as the notify step receives them, and alert records.

Real findings come from documents diagnosed from stormlog-written jobs (:mod:`.servers`); these
builders make the small variations the pure modules' tables need (another job id, a fact on
another rank, a host placement) without writing telemetry for each.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from stormwatch.alerting.alert_file import AlertBook
from stormwatch.alerting.alert_records import AlertRecord, AlertStatus, TargetState
from stormwatch.alerting.alert_state import advance
from stormwatch.alerting.findings import IndicatorFact, JobFinding
from stormwatch.alerting.fleet_findings import regression_finding, suspect_finding
from stormwatch.alerting.ledger import ChannelStatus
from stormwatch.alerting.observations import observe
from stormwatch.history.job_names import JobNamePattern
from stormwatch.severity import Severity

T0 = datetime(2026, 10, 1, 2, tzinfo=UTC)
START_NS = 1_700_000_000_000_000_000


def make_fact(kind: str = "most_severe", *, rank: int = 0, severity: Severity = Severity.CRITICAL,
              signal: str = "alert:critical", timestamp_ns: int = START_NS + 3_500_000_000) -> IndicatorFact:
    return IndicatorFact(kind=kind, rank=rank, severity=severity, signal=signal, timestamp_ns=timestamp_ns,
                         phase_path=None, details="Memory usage above 95%",
                         since_start_ns=timestamp_ns - START_NS)


def make_finding(job_id: str, *facts: IndicatorFact, started_ns: int = START_NS, oom_rank: int | None = None,
                 missing: Sequence[int] = (), hosts: Sequence[str] = (), verdict: str | None = None) -> JobFinding:
    """A job's finding: ``facts`` (default: one critical most-severe alert on rank 0), an OOM on
    ``oom_rank``, ``missing`` ranks, rank r on ``hosts[r]`` device r."""
    chosen = facts if facts else (make_fact(),)
    oom = None if oom_rank is None else make_fact("oom", rank=oom_rank, signal="oom",
                                                 timestamp_ns=START_NS + 4_000_000_000)
    worst = max((fact.severity for fact in chosen), key=lambda item: item.level, default=None)
    return JobFinding(job_id=job_id, verdict=verdict or (worst.value if worst else "clean"), summary="",
                      indicators=tuple(chosen), missing_ranks=tuple(missing), expected_ranks=4,
                      started_at_ns=started_ns, report_url=f"https://r.example/{job_id}/report.html", oom=oom,
                      placements=tuple((rank, host, rank) for rank, host in enumerate(hosts)))


def make_regression(job_id: str, *, job_name: str, metric: str = "peak_reserved_bytes") -> JobFinding:
    return regression_finding({"job_id": job_id, "job_name": job_name, "metric": metric, "value_bytes": 3 << 30,
                               "baseline_bytes": 2 << 30, "change_pct": 50.0, "baseline_runs": 7}, report_url=None)


def make_suspect(host: str, device: int = 1) -> JobFinding:
    return suspect_finding({"host": host, "device_id": device, "jobs": 9, "anomalous_jobs": 7, "rate": 7 / 9,
                            "fleet_rate": 0.05}, index_url="https://r.example/index.html")


def book_of(*findings: JobFinding, now: datetime = T0, fleet: bool = True) -> AlertBook:
    """The alert state after one audit observed ``findings``."""
    observed = observe(findings, names=JobNamePattern(), known_runs={}, fleet_evaluated=fleet)
    return advance(AlertBook(), observed, now=now)[0]


def told(record: AlertRecord, target: str = "slack", *, at: datetime = T0) -> AlertRecord:
    """``record`` with ``target`` told at ``at``."""
    from dataclasses import replace

    return replace(record, targets={**record.targets, target: TargetState(ChannelStatus.SENT, at.isoformat())})


def firing(record: AlertRecord) -> bool:
    return record.status is AlertStatus.FIRING
