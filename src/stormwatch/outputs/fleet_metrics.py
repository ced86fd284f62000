"""The fleet as metrics (``reports/metrics.prom``, and the Pushgateway's group): what an audit knows, as gauges.

Built from what an audit already publishes: fleet.json (``summary``, ``latest``, ``suspect_hosts``,
``generated_at``) and fleet.parquet's rank rows. Every metric and its labels are listed in
docs/metrics.md; in short:

- ``stormwatch_jobs{verdict}`` and ``stormwatch_jobs_by_status{status}``: fleet.json's counts;
- per job name (fleet.json's ``latest``: its newest diagnosed run), ``stormwatch_job_verdict`` (the
  verdict as a number: :data:`VERDICT_CODES`), ``stormwatch_job_peak_reserved_bytes``,
  ``stormwatch_job_hidden_gap_peak_bytes`` and ``stormwatch_job_headroom_ratio``, the last three
  from the run's rank rows (none when fleet.parquet does not hold that run: it holds the window's);
  ``stormwatch_job_leaking_ranks`` (fleet.json's row of that run: ``leaks``) and
  ``stormwatch_job_capacity_warning`` (1 when fleet.json's ``capacity`` names the job name, else 0);
- ``stormwatch_fleet_unused_gpu_memory_byte_seconds`` (fleet.json's ``headroom.unused_gib_hours`` in
  base units: promtool refuses a metric named in hours) and ``stormwatch_fleet_jobs_under_half_gpu_memory``:
  fleet.json's ``headroom`` (issue 30);
- ``stormwatch_device_suspect{host,device}``: 1 for each suspect device (``suspect_hosts``);
- ``stormwatch_job_names_omitted``, ``stormwatch_devices_omitted``: what the bounds below left out;
- ``stormwatch_audit_timestamp_seconds``: when the audit ran (its ``--as-of`` time), in Unix seconds.

Cardinality is bounded: a job id is never a label value (one series per run would grow without end);
at most :attr:`MetricsLimits.max_job_names` job names, the most severe verdicts first, then the most
recently diagnosed; at most :attr:`MetricsLimits.max_devices` devices, and only suspect ones. So a
push holds at most 6 × max_job_names + max_devices + 14 series, whatever the fleet's size. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

import pandas as pd

from stormwatch.outputs.fleet import JobStatus
from stormwatch.outputs.openmetrics import Family, Unit, gauge, render
from stormwatch.outputs.verdict import VerdictStatus

#: ``stormwatch_job_verdict``'s values: the verdict's rank, 0 ``empty`` up to 4 ``critical``.
VERDICT_CODES = {status.value: status.rank for status in VerdictStatus}
#: One GiB held for one hour, in byte-seconds (the base units of the fleet's unused GPU memory).
BYTE_SECONDS_PER_GIB_HOUR = float(2**30 * 3_600)
#: fleet.parquet's hidden-gap peak column, by the name of each schema that has been written.
_HIDDEN_GAP_COLUMNS = ("hidden_gap_peak_bytes", "hidden_gap_peak_abs_bytes")


@dataclass(frozen=True)
class MetricsLimits:
    """Label bounds: ``max_job_names`` job names and ``max_devices`` suspect devices at most (both >= 0)."""

    max_job_names: int = 200
    max_devices: int = 100

    def __post_init__(self) -> None:
        if self.max_job_names < 0 or self.max_devices < 0:
            raise ValueError(f"metric label bounds must be >= 0: {self}")


#: The bounds of metrics.prom and of every push (docs/metrics.md).
DEFAULT_LIMITS = MetricsLimits()


@dataclass(frozen=True)
class JobMetrics:
    """A job name's newest diagnosed run, measured: bytes per rank maxed over its rank rows (every
    session diagnosed); ``headroom_ratio`` = 1 − max over ranks of peak device used / device total,
    the tightest rank's free share, None when no rank reports a device total (a CPU tracker)."""

    job_name: str
    verdict: VerdictStatus
    diagnosed_at: str
    peak_reserved_bytes: int | None
    hidden_gap_peak_bytes: int | None
    headroom_ratio: float | None
    leaking_ranks: int | None = None  # ranks of that run that leak (fleet.json row's ``leaks``); None: unknown
    capacity_warning: bool | None = None  # named in fleet.json's ``capacity`` (None: fleet.json has none)


def _max_int(column: pd.Series | None) -> int | None:
    if column is None:
        return None
    values = pd.to_numeric(column, errors="coerce").dropna()
    return None if values.empty else int(values.max())


def _headroom(rows: pd.DataFrame) -> float | None:
    if "device_total_bytes" not in rows or "peak_device_used_bytes" not in rows:
        return None
    total = pd.to_numeric(rows["device_total_bytes"], errors="coerce").astype("float64")
    used = pd.to_numeric(rows["peak_device_used_bytes"], errors="coerce").astype("float64")
    known = total.notna() & used.notna() & (total > 0)
    if not known.any():
        return None
    return float(((total[known] - used[known]) / total[known]).min())  # the tightest rank's


def _leaks_by_job(jobs: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """fleet.json rows' ``leaks`` by job id (rows without it, written before issue 30 or without growth,
    are left out: unknown)."""
    return {str(row.get("job_id")): int(row["leaks"]) for row in jobs
            if isinstance(row, Mapping) and isinstance(row.get("leaks"), int) and not isinstance(row["leaks"], bool)}


def _capacity_names(entries: Sequence[Any]) -> frozenset[str]:
    return frozenset(str(item.get("job_name")) for item in entries
                     if isinstance(item, Mapping) and item.get("job_name") is not None)


def job_metrics(latest: Mapping[str, Mapping[str, Any]], ranks: pd.DataFrame | None, *,
                jobs: Sequence[Mapping[str, Any]] = (), capacity: Sequence[Any] | None = None) -> list[JobMetrics]:
    """One :class:`JobMetrics` per job name of fleet.json's ``latest`` (its newest diagnosed run), measured
    over that run's rows of ``ranks`` (fleet.parquet; None or without the run: no byte values), with its
    leaking ranks from fleet.json's ``jobs`` rows and its capacity warning from fleet.json's ``capacity``
    (None: fleet.json has no such member, so no job name's warning is known)."""
    leaks, warned = _leaks_by_job(jobs), None if capacity is None else _capacity_names(capacity)
    by_job: dict[str, pd.DataFrame] = {}
    if ranks is not None and len(ranks) and "job_id" in ranks:
        wanted = {str(entry.get("job_id")) for entry in latest.values()}
        chosen = ranks[ranks["job_id"].astype("string").isin(wanted)]
        by_job = {str(job_id): rows for job_id, rows in chosen.groupby(chosen["job_id"].astype(str), sort=False)}
    gap_column = next((name for name in _HIDDEN_GAP_COLUMNS if ranks is not None and name in ranks), None)
    out = []
    for name, entry in latest.items():
        rows = by_job.get(str(entry.get("job_id")))
        out.append(JobMetrics(
            job_name=str(name), verdict=VerdictStatus(str(entry.get("verdict"))),
            diagnosed_at=str(entry.get("diagnosed_at") or ""),
            peak_reserved_bytes=None if rows is None else _max_int(rows.get("peak_reserved_bytes")),
            hidden_gap_peak_bytes=None if rows is None or gap_column is None else _max_int(rows[gap_column]),
            headroom_ratio=None if rows is None else _headroom(rows),
            leaking_ranks=leaks.get(str(entry.get("job_id"))),
            capacity_warning=None if warned is None else str(name) in warned))
    return out


def bounded_jobs(jobs: Sequence[JobMetrics], limit: int) -> tuple[list[JobMetrics], int]:
    """The ``limit`` job names shown (most severe verdict first, then most recently diagnosed, then by
    name), sorted by name; and how many were left out."""
    ordered = sorted(jobs, key=lambda job: job.job_name)
    ordered.sort(key=lambda job: job.diagnosed_at, reverse=True)
    ordered.sort(key=lambda job: job.verdict.rank, reverse=True)
    shown = sorted(ordered[:limit], key=lambda job: job.job_name)
    return shown, len(ordered) - len(shown)


def bounded_devices(suspects: Sequence[Mapping[str, Any]], limit: int) -> tuple[list[tuple[str, str]], int]:
    """The ``limit`` suspect devices shown as (host, device) label values (the highest rate lower bound
    first; device ``""``: the host as a whole), sorted; and how many were left out."""
    found: dict[tuple[str, str], float] = {}
    for item in suspects:
        device = item.get("device_id")
        key = (str(item.get("host")), "" if device is None else str(device))
        found[key] = max(found.get(key, 0.0), float(item.get("rate_lower_bound") or 0.0))
    ordered = sorted(found, key=lambda key: (-found[key], key))
    return sorted(ordered[:limit]), len(ordered) - min(limit, len(ordered))


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _timestamp_s(document: Mapping[str, Any]) -> float | None:
    stamp = document.get("generated_at")
    if not stamp:
        return None
    when = datetime.fromisoformat(str(stamp))
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def fleet_families(document: Mapping[str, Any], ranks: pd.DataFrame | None, *,
                   limits: MetricsLimits = DEFAULT_LIMITS) -> list[Family]:
    """The metric families of an audit's fleet.json ``document`` and fleet.parquet ``ranks`` (see the
    module docstring); a family with no value is left out, the counts never are."""
    summary: Mapping[str, Any] = document.get("summary") or {}
    capacity = document.get("capacity")
    measured = job_metrics(document.get("latest") or {}, ranks, jobs=document.get("jobs") or (),
                           capacity=capacity if isinstance(capacity, list | tuple) else None)
    jobs, jobs_left = bounded_jobs(measured, limits.max_job_names)
    headroom: Mapping[str, Any] = document.get("headroom") or {}
    unused, under = headroom.get("unused_gib_hours"), headroom.get("jobs_under_half_count")
    devices, devices_left = bounded_devices(document.get("suspect_hosts") or (), limits.max_devices)
    name = ("job_name",)

    def per_job(attribute: str) -> list[tuple[Sequence[str], float]]:
        return [((job.job_name,), value) for job in jobs if (value := getattr(job, attribute)) is not None]

    families = [
        gauge("stormwatch_jobs", "Current runs (each job id's newest) by verdict, as in fleet.json's summary",
              [((status.value,), int(summary.get(status.value, 0))) for status in VerdictStatus],
              label_names=("verdict",)),
        gauge("stormwatch_jobs_by_status", "Current runs (each job id's newest) by status, as in fleet.json's summary",
              [((status.value,), int(summary.get(status.value, 0))) for status in JobStatus],
              label_names=("status",)),
        gauge("stormwatch_job_verdict", "Verdict of the job name's newest diagnosed run: 0 empty, 1 clean, 2 info, "
              "3 warning, 4 critical", [((job.job_name,), VERDICT_CODES[job.verdict.value]) for job in jobs],
              label_names=name),
        gauge("stormwatch_job_peak_reserved_bytes", "Peak reserved memory of the job name's newest diagnosed run, "
              "in bytes, max over its ranks", per_job("peak_reserved_bytes"), label_names=name, unit=Unit.BYTES),
        gauge("stormwatch_job_hidden_gap_peak_bytes", "Peak hidden gap (device used minus reserved, absolute) of the "
              "job name's newest diagnosed run, in bytes, max over its ranks", per_job("hidden_gap_peak_bytes"),
              label_names=name, unit=Unit.BYTES),
        gauge("stormwatch_job_headroom_ratio", "1 - peak device used / device total of the job name's newest "
              "diagnosed run, on its tightest rank; absent without a device total",
              per_job("headroom_ratio"), label_names=name, unit=Unit.RATIO),
        gauge("stormwatch_job_leaking_ranks", "Ranks of the job name's newest diagnosed run whose memory leaks "
              "(growth after warm-up significant and above the leak threshold); absent when growth was not measured",
              per_job("leaking_ranks"), label_names=name),
        gauge("stormwatch_job_capacity_warning", "1 when the job name's peak rises run after run toward its "
              "device's capacity (fleet.json's capacity), else 0; absent before capacity trends were computed",
              per_job("capacity_warning"), label_names=name),
        gauge("stormwatch_fleet_unused_gpu_memory_byte_seconds", "GPU memory the fleet's current runs left unused, "
              "in byte-seconds (divide by 2^30 * 3600 for GiB-hours): sum over ranks of (device total - peak use) "
              "times the rank's span (fleet.json's headroom)",
              [((), float(unused) * BYTE_SECONDS_PER_GIB_HOUR)] if _is_number(unused) else [],
              unit=Unit.BYTE_SECONDS),
        gauge("stormwatch_fleet_jobs_under_half_gpu_memory", "Current runs whose fullest rank used under 50 % of "
              "its GPU's memory (fleet.json's headroom)",
              [((), int(under))] if _is_number(under) else []),
        gauge("stormwatch_job_names_omitted", "Job names left out of the per-job metrics by the bound on labels",
              [((), jobs_left)]),
        gauge("stormwatch_device_suspect", "1 for a suspect (host, device): first causes land on it more often than "
              "chance explains; device empty for a whole host", [((host, device), 1) for host, device in devices],
              label_names=("host", "device")),
        gauge("stormwatch_devices_omitted", "Suspect devices left out by the bound on labels", [((), devices_left)]),
    ]
    stamp = _timestamp_s(document)
    if stamp is not None:
        families.append(gauge("stormwatch_audit_timestamp_seconds", "When the audit ran (its as-of time), "
                              "in Unix seconds", [((), stamp)], unit=Unit.SECONDS))
    return [family for family in families if family.samples]


def fleet_metrics_text(document: Mapping[str, Any], ranks: pd.DataFrame | None, *,
                       limits: MetricsLimits = DEFAULT_LIMITS) -> str:
    """reports/metrics.prom: the OpenMetrics text of :func:`fleet_families`."""
    return render(fleet_families(document, ranks, limits=limits))
