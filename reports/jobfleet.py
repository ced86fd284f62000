"""A job against its fleet (issue 16), from model.json's optional ``fleet`` member: per-rank host,
device and peaks, the ranks that stand out from their peers (robust z-score against the job's
median), the job's coverage, and the comparison with earlier runs of the same job name and world
size (a sparkline per metric of the earlier runs' values, then this run, against the baseline).

An absent member gives an empty view (the page says "no history yet"). Peer outliers are only looked
for among :data:`~stormwatch.peers.outliers.OutlierThresholds.min_ranks` (4) or more ranks; with
fewer the view says they were not checked, and why, rather than that no rank stands out. Memory values
are bytes (shown in GiB/MiB); ``change_pct`` is in percent. Hosts, devices and names are hostile
telemetry: plain text here, escaped by the template.

A job page that details another attempt than its document's own (see
:mod:`stormwatch.reports.jobdetail`) takes the ranks, outliers and coverage from that attempt's
document and the comparison with earlier runs (the job's) from the job's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.history.job_regression import RegressionSummary
from stormwatch.history.regressions import Regression, RegressionMetric, RegressionStatus
from stormwatch.outputs.document import JobDocument
from stormwatch.peers.outliers import DEFAULT_THRESHOLDS, OutlierMetric, OutlierRank
from stormwatch.peers.rank_facts import RankFacts
from stormwatch.reports.fleetintel import METRIC_LABELS, Coverage, coverage_view, format_percent
from stormwatch.reports.formatting import NOT_AVAILABLE, format_bytes, format_count
from stormwatch.reports.minicharts import MiniChart, sparkline

MAX_EARLIER_RUNS = 60  # points per sparkline: the latest earlier runs
MAX_OUTLIER_ROWS = 500
STATUS_LABELS: dict[str, str] = {RegressionStatus.REGRESSION: "regression", RegressionStatus.OK: "within baseline",
                                  RegressionStatus.NO_BASELINE: "no baseline yet"}


@dataclass(frozen=True)
class RankFleet:
    """One rank's place in the fleet: where it ran and its peaks (formatted)."""

    host: str
    device: str  # "GPU 3", "CPU" or "—"
    peak_reserved: str
    outlier: bool
    outlier_metrics: str  # "Peak reserved, Hidden gap peak" or ""
    cpu: bool = False  # ran on stormlog's CPU tracker: no device, no allocator pool, no hidden gap


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
    status: str  # a regression status (a CSS class)
    status_label: str
    value: str
    baseline: str
    change: str
    note: str  # "baseline: median of 5 earlier runs" or "no baseline yet (2 earlier runs)"
    spark: MiniChart | None


@dataclass(frozen=True)
class Comparison:
    status: str  # a regression status (a CSS class)
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
    outliers_checked: bool = True  # some metric had enough ranks for outliers to be looked for
    outliers_note: str = ""  # why they were not looked for ("... not checked: outliers need 4 or more ranks ...")


def _text(value: Any) -> str:
    return NOT_AVAILABLE if value is None or value == "" else str(value)


def _metric(value: OutlierMetric | RegressionMetric) -> str:
    return METRIC_LABELS.get(value.value, value.value)


def device_label(device_id: int | None) -> str:
    """``GPU 3``; ``CPU`` for a negative device id (stormlog's CPU tracker); ``—`` when unknown."""
    if device_id is None:
        return NOT_AVAILABLE
    return "CPU" if device_id < 0 else f"GPU {device_id}"


def _outlier_check(ranks: Mapping[int, RankFacts]) -> tuple[bool, str]:
    """Whether outliers were looked for on some metric, and the sentence saying why not when they were not."""
    needed = DEFAULT_THRESHOLDS.min_ranks
    counts = [sum(getattr(fact, metric.value) is not None for fact in ranks.values()) for metric in OutlierMetric]
    if max(counts, default=0) >= needed:
        return True, ""
    have = len(ranks)
    return False, (f"Peer outliers were not checked: outliers need {needed} or more ranks to compare, and this "
                   f"job has {have} rank{'' if have == 1 else 's'} with memory figures.")


def _z(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return NOT_AVAILABLE
    return f"{value:+.1f}"


def _outlier(item: OutlierRank, ranks: Mapping[int, RankFacts]) -> OutlierRow:
    where = ranks.get(item.rank)
    return OutlierRow(rank=item.rank, host=_text(None if where is None else where.host),
                      device=device_label(None if where is None else where.device_id), metric=_metric(item.metric),
                      value=format_bytes(item.value_bytes), median=format_bytes(item.median_bytes),
                      robust_z=_z(item.robust_z))


def _comparison_metric(item: Regression) -> MetricComparison:
    """One metric against its baseline: a sparkline of the earlier runs' values (oldest first, at most
    the latest :data:`MAX_EARLIER_RUNS`), then this run."""
    status = item.status.value
    metric = _metric(item.metric)
    earlier = [(f"earlier run {index + 1}", size) for index, size in enumerate(item.earlier_bytes)][-MAX_EARLIER_RUNS:]
    count = len(earlier) or item.baseline_runs
    if item.status is RegressionStatus.NO_BASELINE or item.baseline_bytes is None:
        note = f"no baseline yet ({format_count(count)} earlier run{'' if count == 1 else 's'})"
    else:
        note = f"baseline: {format_count(item.baseline_runs)} runs"
    spark = sparkline(earlier, item.value_bytes, item.baseline_bytes, label=f"{metric}: earlier runs, then this run")
    return MetricComparison(
        metric=metric, status=status, status_label=STATUS_LABELS[item.status], value=format_bytes(item.value_bytes),
        baseline=format_bytes(item.baseline_bytes), change=format_percent(item.change_pct, signed=True), note=note,
        spark=spark,
    )


def _comparison(summary: RegressionSummary | None) -> Comparison | None:
    if summary is None:
        return None
    return Comparison(
        status=summary.status.value, status_label=STATUS_LABELS[summary.status], job_name=_text(summary.job_name),
        world_size=_text(summary.world_size), metrics=tuple(_comparison_metric(item) for item in summary.metrics),
    )


def job_fleet(document: JobDocument, *, detailed: JobDocument | None = None) -> JobFleet:
    """The fleet sections of one job's report, from its model.json's ``fleet`` member; ``detailed``:
    the document of the attempt the page details, whose facts (ranks, outliers, coverage) it shows."""
    fleet = document.fleet
    facts_member = fleet if detailed is None else detailed.fleet
    facts = None if facts_member is None else facts_member.facts
    by_rank: dict[int, RankFacts] = {}
    for item in () if facts is None else facts.ranks:
        by_rank.setdefault(item.rank, item)
    outlier_items = () if facts is None else facts.outlier_ranks
    metrics: dict[int, list[str]] = {}
    for outlier in outlier_items:
        metrics.setdefault(outlier.rank, []).append(_metric(outlier.metric))
    ranks = {
        rank: RankFleet(host=_text(item.host), device=device_label(item.device_id),
                        peak_reserved=format_bytes(item.peak_reserved_bytes),
                        outlier=rank in metrics, outlier_metrics=", ".join(dict.fromkeys(metrics.get(rank, []))),
                        cpu=item.device_id is not None and item.device_id < 0)
        for rank, item in by_rank.items()
    }
    for rank, names in metrics.items():  # an outlier rank without a fleet.ranks entry is still marked
        ranks.setdefault(rank, RankFleet(host=NOT_AVAILABLE, device=NOT_AVAILABLE, peak_reserved=NOT_AVAILABLE,
                                         outlier=True,
                                         outlier_metrics=", ".join(dict.fromkeys(names))))
    checked, note = _outlier_check(by_rank)
    return JobFleet(
        present=facts_member is not None,
        has_ranks=bool(by_rank),
        ranks=ranks,
        outliers=tuple(_outlier(item, by_rank) for item in outlier_items[:MAX_OUTLIER_ROWS]),
        outlier_ranks=format_ranks(metrics),
        coverage=None if facts is None else coverage_view(facts.coverage.as_dict()),
        comparison=None if fleet is None else _comparison(fleet.regression),
        outliers_checked=checked or bool(outlier_items),
        outliers_note="" if checked or outlier_items else note,
    )
