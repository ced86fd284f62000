"""Regressions, suspect hosts and capacity warnings as findings the notifier sends, once each, through the ledger.

A regression is a finding of its run (the job id whose peak regressed), one per metric: kind
``regression``, signal ``regression:<metric>``, at the job's start; its fact's rank is the rank that
set the value (-1 when unknown) and its placement is where that rank ran, so a regression set on a
suspect device is inhibited by the device's alert and told inside the device's message
(:mod:`.inhibition`; fleet.json marks it ``explained_by_suspect``), never to the job's team. A
suspect host is a finding of its own: the ledger's job id is ``host <host> device <id>``, kind
``suspect_host``, so a device is reported once while it stays suspect, not every night. A capacity
warning (fleet.json ``capacity``) is a finding of the job name's latest run, kind ``capacity``,
signal ``capacity``: its alert is the job name's (the fingerprint holds the name, not the run), so
it is sent once while the name stays in warning, whichever run showed it last, and resolves when
it no longer warns; its ledger key is the latest run's, so routes and silences match its job id
like any job's. All are warnings, and are sent on every configured channel whatever ``notify_on``
(:data:`~.kinds.FLEET_KINDS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stormwatch.alerting.findings import IndicatorFact, JobFinding
from stormwatch.alerting.kinds import AlertKind
from stormwatch.history.capacity_trend import CapacityWarning
from stormwatch.outputs.json_members import MemberError, Members
from stormwatch.severity import Severity

GIB = float(1 << 30)
CAPACITY_SIGNAL = AlertKind.CAPACITY.value


def _gib(value: Any) -> str:
    return "?" if value is None else f"{float(value) / GIB:.2f} GiB"


def _carrier(item: Mapping[str, Any]) -> str:
    """``; explained by suspect device node-bad/2`` or ``; set by rank 2 on node-bad GPU 2`` ("" unknown)."""
    host, device, rank = item.get("host"), item.get("device_id"), item.get("rank")
    shown = "?" if device is None else str(device)
    if item.get("explained_by_suspect") is True:
        return f"; explained by suspect device {host}/{shown}"
    if rank is None:
        return ""
    if item.get("explained_by_leak") is True:
        return f"; explained by the leak on rank {rank}"
    return f"; set by rank {rank}" + ("" if host is None else f" on {host} GPU {shown}")


def regression_finding(item: Mapping[str, Any], *, report_url: str | None) -> JobFinding:
    """One fleet.json ``regressions`` entry as a finding of its run."""
    metric = str(item.get("metric"))
    change = item.get("change_pct")
    above = "?" if change is None else f"{float(change):.0f}%"
    runs, name = item.get("baseline_runs"), item.get("job_name")
    details = (f"{metric.replace('_', ' ')} {_gib(item.get('value_bytes'))} is {above} above the median "
               f"{_gib(item.get('baseline_bytes'))} of the last {runs} runs of {name}{_carrier(item)}")
    rank, host, device = item.get("rank"), item.get("host"), item.get("device_id")
    placements: tuple[tuple[int, str, int | None], ...] = ()
    if isinstance(rank, int) and isinstance(host, str):
        # a suspect device's alert is keyed by device id 0 when the id is unknown (suspect_finding): so is this
        placements = ((rank, host, device if isinstance(device, int) else 0),)
    fact = IndicatorFact(kind=AlertKind.REGRESSION.value, rank=rank if isinstance(rank, int) else -1,
                         severity=Severity.WARNING, signal=f"regression:{metric}", timestamp_ns=0, phase_path=None,
                         details=details, since_start_ns=None)
    return JobFinding(job_id=str(item.get("job_id")), verdict="regression", summary=details, indicators=(fact,),
                      missing_ranks=(), expected_ranks=0, started_at_ns=None, report_url=report_url,
                      placements=placements)


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


def capacity_finding(warning: CapacityWarning, *, report_url: str | None) -> JobFinding:
    """One fleet.json ``capacity`` entry as a finding of the job name's latest run."""
    details = warning.text
    if warning.rank is not None:
        place = "" if warning.host is None else \
            f" on {warning.host} GPU {'?' if warning.device_id is None else warning.device_id}"
        details += f" (latest peak {_gib(warning.latest_peak_bytes)} on rank {warning.rank}{place})"
    fact = IndicatorFact(kind=AlertKind.CAPACITY.value, rank=-1 if warning.rank is None else warning.rank,
                         severity=Severity.WARNING, signal=CAPACITY_SIGNAL, timestamp_ns=0, phase_path=None,
                         details=details, since_start_ns=None)
    placements = () if warning.rank is None or warning.host is None else (
        (warning.rank, warning.host, warning.device_id),)
    return JobFinding(job_id=warning.job_id, verdict="capacity", summary=details, indicators=(fact,),
                      missing_ranks=(), expected_ranks=0, started_at_ns=None, report_url=report_url,
                      placements=placements)


def _capacity_warnings(items: Sequence[Any]) -> list[CapacityWarning]:
    """The readable entries of fleet.json's ``capacity`` (one written by another version may not be)."""
    found = []
    for index, item in enumerate(items):
        try:
            found.append(CapacityWarning.from_json(Members.of(item, f"capacity[{index}]")))
        except MemberError:
            continue
    return found


def fleet_findings(
    sections: Mapping[str, Any], *, index_url: str | None, report_url_of: Callable[[str], str | None]
) -> list[JobFinding]:
    """The regressions, suspect hosts and capacity warnings of fleet.json's ``sections`` as findings."""
    regressions: Sequence[Mapping[str, Any]] = sections.get("regressions") or ()
    suspects: Sequence[Mapping[str, Any]] = sections.get("suspect_hosts") or ()
    capacity: Sequence[Any] = sections.get("capacity") or ()
    found = [regression_finding(item, report_url=report_url_of(str(item.get("job_id")))) for item in regressions]
    found += [suspect_finding(item, index_url=index_url) for item in suspects]
    return found + [capacity_finding(item, report_url=report_url_of(item.job_id))
                    for item in _capacity_warnings(capacity)]
