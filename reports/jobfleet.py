"""A job against its fleet (issue 16), from model.json's optional ``fleet`` member: per-rank host,
device and peaks, the ranks that stand out from their peers (robust z-score against the job's
median), the job's coverage, and the comparison with earlier runs of the same job name and world
size (a sparkline per metric of the earlier runs' values, then this run, against the baseline).

Absent or malformed members give an empty view (the page says "no history yet"). Memory values
are bytes (shown in GiB/MiB); ``change_pct`` is in percent; ``audit_time`` is ISO 8601. Hosts,
devices and names are hostile telemetry: plain text here, escaped by the template.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.history.regressions import RegressionStatus
from stormwatch.reports.fields import as_int, as_list, as_mapping, is_sequence
from stormwatch.reports.fleetintel import METRIC_LABELS, Coverage, coverage_view, format_percent
from stormwatch.reports.formatting import NOT_AVAILABLE, format_bytes, format_count, format_iso
from stormwatch.reports.minicharts import MiniChart, sparkline

MAX_EARLIER_RUNS = 60  # points per sparkline: the latest earlier runs
MAX_OUTLIER_ROWS = 500
STATUSES = tuple(status.value for status in RegressionStatus)
STATUS_LABELS: dict[str, str] = {RegressionStatus.REGRESSION: "regression", RegressionStatus.OK: "within baseline",
                                  RegressionStatus.NO_BASELINE: "no baseline yet"}


@dataclass(frozen=True)
class RankFleet:
    """One rank's place in the fleet: where it ran and its peaks (formatted)."""

    host: str
    device: str
    peak_reserved: str
    outlier: bool
    outlier_metrics: str  # "Peak reserved, Hidden gap peak" or ""


@dataclass(frozen=True)
class OutlierRow:
    rank: int | None
    host: str
    device: str
    metric: str
    value: str
    median: str
    robust_z: str


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    status: str  # one of STATUSES or "other" (a CSS class)
    status_label: str
    value: str
    baseline: str
    change: str
    note: str  # "baseline: median of 5 earlier runs" or "no baseline yet (2 earlier runs)"
    spark: MiniChart | None


@dataclass(frozen=True)
class Comparison:
    status: str  # one of STATUSES or "other" (a CSS class)
    status_label: str
    job_name: str
    world_size: str
    metrics: tuple[MetricComparison, ...]


@dataclass(frozen=True)
class JobFleet:
    present: bool  # the document has a ``fleet`` member at all
    has_ranks: bool  # ``fleet.ranks`` lists at least one rank: the rank table shows host, device, peak
    ranks: dict[int, RankFleet]  # per rank with a ``fleet.ranks`` entry or an outlier
    outliers: tuple[OutlierRow, ...]
    outlier_ranks: str  # "3,5"
    coverage: Coverage | None
    comparison: Comparison | None


def _text(value: Any) -> str:
    return NOT_AVAILABLE if value is None or value == "" else str(value)


def _bytes_value(value: Any) -> int | None:
    return as_int(value)


def _metric(value: Any) -> str:
    return METRIC_LABELS.get(value, str(value)) if isinstance(value, str) and value else NOT_AVAILABLE


def _status(value: Any) -> str:
    return value if isinstance(value, str) and value in STATUSES else "other"


def _z(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return NOT_AVAILABLE
    return f"{value:+.1f}"


def _outlier(item: Mapping[str, Any], ranks: Mapping[int, Mapping[str, Any]]) -> OutlierRow:
    rank = as_int(item.get("rank"))
    where = ranks.get(rank, {}) if rank is not None else {}
    return OutlierRow(rank=rank, host=_text(where.get("host")), device=_text(where.get("device_id")),
                      metric=_metric(item.get("metric")), value=format_bytes(as_int(item.get("value_bytes"))),
                      median=format_bytes(as_int(item.get("median_bytes"))), robust_z=_z(item.get("robust_z")))


def _moment(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return moment if moment is None or moment.tzinfo is not None else None


def _earlier(item: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The earlier runs' ``(time label, bytes)``, oldest first when every time parses, at most the latest
    :data:`MAX_EARLIER_RUNS`: from ``earlier`` (``[{audit_time, value_bytes}]``) or, without it,
    ``earlier_bytes`` (bytes, oldest first)."""
    if "earlier" not in item and is_sequence(item.get("earlier_bytes")):
        sizes = [size for size in (as_int(size) for size in as_list(item.get("earlier_bytes"))) if size is not None]
        return [(f"earlier run {index + 1}", size) for index, size in enumerate(sizes)][-MAX_EARLIER_RUNS:]
    runs: list[tuple[Any, int]] = []
    for run in as_list(item.get("earlier")):
        size = as_int(run.get("value_bytes")) if isinstance(run, Mapping) else None
        if size is not None:
            runs.append((run.get("audit_time"), size))
    moments = [_moment(when) for when, _ in runs]
    if all(moment is not None for moment in moments):
        order = sorted(range(len(runs)), key=lambda index: moments[index] or datetime.min)
        runs = [runs[index] for index in order]
    return [(format_iso(when) if isinstance(when, str) else "earlier run", size)
            for when, size in runs[-MAX_EARLIER_RUNS:]]


def _comparison_metric(item: Mapping[str, Any]) -> MetricComparison:
    status = _status(item.get("status"))
    metric = _metric(item.get("metric"))
    earlier = _earlier(item)
    value, baseline = _bytes_value(item.get("value_bytes")), _bytes_value(item.get("baseline_bytes"))
    count = len(earlier) or as_int(item.get("baseline_runs")) or 0
    runs = as_int(item.get("baseline_runs"))
    if status == RegressionStatus.NO_BASELINE or baseline is None:
        note = f"no baseline yet ({format_count(count)} earlier run{'' if count == 1 else 's'})"
    else:
        note = f"baseline: {format_count(runs) if runs is not None else 'earlier'} runs"
    spark = sparkline(earlier, value, baseline, label=f"{metric}: earlier runs, then this run") \
        if earlier or value is not None else None
    return MetricComparison(
        metric=metric, status=status, status_label=STATUS_LABELS.get(status, _text(item.get("status"))),
        value=format_bytes(value), baseline=format_bytes(baseline),
        change=format_percent(item.get("change_pct"), signed=True), note=note, spark=spark,
    )


def _comparison(value: Any) -> Comparison | None:
    if not isinstance(value, Mapping):
        return None
    status = _status(value.get("status"))
    return Comparison(
        status=status, status_label=STATUS_LABELS.get(status, _text(value.get("status"))),
        job_name=_text(value.get("job_name")), world_size=_text(value.get("world_size")),
        metrics=tuple(_comparison_metric(item) for item in as_list(value.get("metrics")) if isinstance(item, Mapping)),
    )


def job_fleet(document: Mapping[str, Any]) -> JobFleet:
    """The fleet sections of one job's report, from its model.json's ``fleet`` member."""
    fleet = as_mapping(document.get("fleet"))
    by_rank: dict[int, Mapping[str, Any]] = {}
    for item in as_list(fleet.get("ranks")):
        if isinstance(item, Mapping) and as_int(item.get("rank")) is not None:
            by_rank.setdefault(int(item["rank"]), item)
    outlier_items = [item for item in as_list(fleet.get("outlier_ranks")) if isinstance(item, Mapping)]
    metrics: dict[int, list[str]] = {}
    for item in outlier_items:
        rank = as_int(item.get("rank"))
        if rank is not None:
            metrics.setdefault(rank, []).append(_metric(item.get("metric")))
    ranks = {
        rank: RankFleet(host=_text(item.get("host")), device=_text(item.get("device_id")),
                        peak_reserved=format_bytes(as_int(item.get("peak_reserved_bytes"))),
                        outlier=rank in metrics, outlier_metrics=", ".join(dict.fromkeys(metrics.get(rank, []))))
        for rank, item in by_rank.items()
    }
    for rank, names in metrics.items():  # an outlier rank without a fleet.ranks entry is still marked
        ranks.setdefault(rank, RankFleet(host=NOT_AVAILABLE, device=NOT_AVAILABLE, peak_reserved=NOT_AVAILABLE,
                                         outlier=True,
                                         outlier_metrics=", ".join(dict.fromkeys(names))))
    return JobFleet(
        present=isinstance(document.get("fleet"), Mapping),
        has_ranks=bool(by_rank),
        ranks=ranks,
        outliers=tuple(_outlier(item, by_rank) for item in outlier_items[:MAX_OUTLIER_ROWS]),
        outlier_ranks=format_ranks(metrics),
        coverage=coverage_view(fleet.get("coverage")),
        comparison=_comparison(fleet.get("regression")),
    )
