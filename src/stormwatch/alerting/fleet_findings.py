"""Regressions and suspect hosts as findings the notifier sends, once each, through the ledger.

A regression is a finding of its run (the job id whose peak regressed), one per metric: kind
``regression``, signal ``regression:<metric>``, at the job's start. A suspect host is a finding
of its own: the ledger's job id is ``host <host> device <id>``, kind ``suspect_host``, so a
device is reported once while it stays suspect, not every night. Both are warnings, and are
sent on every configured channel whatever ``notify_on`` (:data:`~.kinds.FLEET_KINDS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stormwatch.alerting.findings import IndicatorFact, JobFinding
from stormwatch.alerting.kinds import AlertKind
from stormwatch.severity import Severity

GIB = float(1 << 30)


def _gib(value: Any) -> str:
    return "?" if value is None else f"{float(value) / GIB:.2f} GiB"


def regression_finding(item: Mapping[str, Any], *, report_url: str | None) -> JobFinding:
    """One fleet.json ``regressions`` entry as a finding of its run."""
    metric = str(item.get("metric"))
    change = item.get("change_pct")
    above = "?" if change is None else f"{float(change):.0f}%"
    runs, name = item.get("baseline_runs"), item.get("job_name")
    details = (f"{metric.replace('_', ' ')} {_gib(item.get('value_bytes'))} is {above} above the median "
               f"{_gib(item.get('baseline_bytes'))} of the last {runs} runs of {name}")
    fact = IndicatorFact(kind=AlertKind.REGRESSION.value, rank=-1, severity=Severity.WARNING,
                         signal=f"regression:{metric}", timestamp_ns=0, phase_path=None, details=details,
                         since_start_ns=None)
    return JobFinding(job_id=str(item.get("job_id")), verdict="regression", summary=details, indicators=(fact,),
                      missing_ranks=(), expected_ranks=0, started_at_ns=None, report_url=report_url)


def suspect_finding(item: Mapping[str, Any], *, index_url: str | None) -> JobFinding:
    """One fleet.json ``suspect_hosts`` entry as a finding of its own."""
    host, device = str(item.get("host")), int(item.get("device_id") or 0)
    rate, fleet_rate = 100 * float(item.get("rate") or 0), 100 * float(item.get("fleet_rate") or 0)
    details = (f"{item.get('anomalous_jobs')} of {item.get('jobs')} jobs had their first cause on {host} device "
               f"{device} ({rate:.0f}%; fleet {fleet_rate:.0f}%)")
    fact = IndicatorFact(kind=AlertKind.SUSPECT_HOST.value, rank=device, severity=Severity.WARNING,
                         signal=AlertKind.SUSPECT_HOST.value, timestamp_ns=0, phase_path=None, details=details,
                         since_start_ns=None)
    return JobFinding(job_id=f"host {host} device {device}", verdict="suspect host", summary=details,
                      indicators=(fact,), missing_ranks=(), expected_ranks=0, started_at_ns=None, report_url=index_url,
                      host=host)


def fleet_findings(
    sections: Mapping[str, Any], *, index_url: str | None, report_url_of: Callable[[str], str | None]
) -> list[JobFinding]:
    """The regressions and suspect hosts of fleet.json's ``sections`` as findings."""
    regressions: Sequence[Mapping[str, Any]] = sections.get("regressions") or ()
    suspects: Sequence[Mapping[str, Any]] = sections.get("suspect_hosts") or ()
    found = [regression_finding(item, report_url=report_url_of(str(item.get("job_id")))) for item in regressions]
    return found + [suspect_finding(item, index_url=index_url) for item in suspects]
