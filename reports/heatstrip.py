"""The rank x time heat strip of the hidden gap: one row per expected rank, one
column per time bucket on the job-wide axis, so the rank that diverged first
stands out. Colour shows divergence: a cell is the bucket's hidden gap farthest
from the job's baseline (the median gap sample over all ranks; spikes survive),
on a square-root scale of the largest divergence; red above the baseline, blue
below, near-white on it; no cell where a rank has no gap sample. Missing ranks
are hatched (lightly, so their label stays readable on them).

The strip is drawn only where it carries information: two or more ranks whose rows differ.
:func:`skip_reason` says, in one sentence, why it is not drawn otherwise (one rank, no hidden-gap
samples, or every rank alike).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stormwatch.reports.charts import CHART_WIDTH, PLOT_LEFT, PLOT_RIGHT
from stormwatch.reports.downsample import signed_extremes
from stormwatch.reports.formatting import format_bytes
from stormwatch.reports.scales import LinearScale, Tick, keep_inside, time_ticks
from stormwatch.reports.timelines import RankTimeline, TimeFrame

HEAT_COLUMNS = 240
LEVELS = 5
_NO_DATA = 99


@dataclass(frozen=True)
class HeatCell:
    x: float
    width: float
    level: str  # CSS class: p1..p5 above zero, n1..n5 below, z for exactly zero


@dataclass(frozen=True)
class FirstAnomaly:
    """A rank's first anomaly, to tick on its row."""

    timestamp_ns: int
    title: str


@dataclass(frozen=True)
class HeatRow:
    rank: int
    y: float
    status: str  # "present", "missing" or "nodata" (present without hidden-gap samples)
    cells: tuple[HeatCell, ...]
    show_label: bool
    title: str
    anomaly_x: float | None
    anomaly_title: str
    first_cause: bool  # this rank holds the job's earliest first-cause indicator


@dataclass(frozen=True)
class Swatch:
    level: str
    label: str


@dataclass(frozen=True)
class HeatStrip:
    width: int
    height: int
    left: int
    right: int
    row_height: int
    rows: tuple[HeatRow, ...]
    x_ticks: tuple[Tick, ...]
    axis_y: float
    legend: tuple[Swatch, ...]
    baseline_bytes: float = 0.0


def _row_key(row: HeatRow) -> tuple[object, ...]:
    return row.status, tuple((cell.x, cell.width, cell.level) for cell in row.cells)


def skip_reason(strip: HeatStrip, *, cpu_ranks: int = 0) -> str | None:
    """Why the strip is not worth drawing, in one sentence, or None when it is: it needs two or more
    ranks whose rows differ (``cpu_ranks``: how many of its ranks ran on the CPU, which has no gap)."""
    rows = strip.rows
    if rows and cpu_ranks == len(rows):
        return "Not shown: the job's ranks ran on the CPU, which has no device memory, so there is no hidden gap."
    if len(rows) < 2:
        return ("Not shown: the job has one rank, so there is no other rank to compare it with; "
                "its chart below shows its hidden gap over time.")
    if not any(row.status == "present" for row in rows):
        return "Not shown: no rank has hidden-gap samples."
    if len({_row_key(row) for row in rows}) == 1:
        if all(cell.level == "z" for cell in rows[0].cells):
            return (f"Not shown: all {len(rows)} ranks had the same hidden gap throughout "
                    f"({format_bytes(strip.baseline_bytes)}), so a rank-by-time view would be one colour.")
        return (f"Not shown: the hidden gap of all {len(rows)} ranks moved together, the same on every rank at "
                "every moment, so a rank-by-time view would add nothing to the charts below.")
    return None


def _hold(values: np.ndarray) -> np.ndarray:
    """Empty buckets between a rank's first and last sample hold the previous bucket's value
    (sparse sampling draws as steps, not as stripes)."""
    finite = np.isfinite(values)
    if not finite.any():
        return values
    last_seen = np.maximum.accumulate(np.where(finite, np.arange(len(values)), 0))
    held = values[last_seen]
    held[: int(np.argmax(finite))] = np.nan
    return held


def _levels(extremes: np.ndarray, max_abs: float) -> np.ndarray:
    """Signed levels -LEVELS..LEVELS (0 within 1 % of ``max_abs`` of the baseline: noise stays
    neutral), ``_NO_DATA`` for empty buckets."""
    out = np.full(len(extremes), _NO_DATA, dtype=np.int64)
    finite = np.isfinite(extremes)
    if max_abs > 0:
        magnitude = np.rint(np.sqrt(np.abs(extremes[finite]) / max_abs) * LEVELS).clip(0, LEVELS)
        out[finite] = (np.sign(extremes[finite]) * magnitude).astype(np.int64)
    else:
        out[finite] = 0
    return out


def _cells(levels: np.ndarray, column_px: float, left: float) -> tuple[HeatCell, ...]:
    """Runs of equal level as one cell each."""
    changes = np.flatnonzero(np.diff(levels)) + 1
    starts = np.concatenate(([0], changes))
    stops = np.concatenate((changes, [len(levels)]))
    cells = []
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        level = int(levels[start])
        if level == _NO_DATA:
            continue
        css = "z" if level == 0 else f"p{level}" if level > 0 else f"n{-level}"
        cells.append(HeatCell(round(left + start * column_px, 1), round((stop - start) * column_px + 0.3, 1), css))
    return tuple(cells)


def _legend(max_abs: float, baseline: float) -> tuple[Swatch, ...]:
    """Swatches labelled with each level's upper edge, as divergence from the baseline."""
    if max_abs <= 0:
        return (Swatch("z", f"baseline {format_bytes(baseline)}"),)
    centre = Swatch("z", f"baseline {format_bytes(baseline)} ± {format_bytes(max_abs * (0.5 / LEVELS) ** 2)}")
    bound = [max_abs * min(1.0, (level + 0.5) / LEVELS) ** 2 for level in range(1, LEVELS + 1)]
    negative = tuple(Swatch(f"n{level}", f"≥ {format_bytes(-bound[level - 1], signed=True)}")
                     for level in range(LEVELS, 0, -1))
    positive = tuple(Swatch(f"p{level}", f"≤ {format_bytes(bound[level - 1], signed=True)}")
                     for level in range(1, LEVELS + 1))
    return (*negative, centre, *positive)


def heat_strip(
    ranks: Sequence[int],
    timelines: Mapping[int, RankTimeline],
    *,
    missing: set[int],
    frame: TimeFrame,
    first_anomalies: Mapping[int, FirstAnomaly],
    first_cause_rank: int | None,
) -> HeatStrip:
    """Rows for ``ranks`` (expected ranks, in order); present ranks' cells from their gap series."""
    duration = frame.duration_s
    gaps = {rank: timeline for rank, timeline in timelines.items() if "gap" in timeline.series}
    samples = np.concatenate([timeline.series["gap"] for timeline in gaps.values()]) if gaps else np.array([])
    baseline = float(np.nanmedian(samples)) if np.isfinite(samples).any() else 0.0
    extremes = {
        rank: _hold(signed_extremes(timeline.times_s, timeline.series["gap"] - baseline, start=0.0, end=duration,
                                    buckets=HEAT_COLUMNS))
        for rank, timeline in gaps.items()
    }
    finite = [np.nanmax(np.abs(values)) for values in extremes.values() if np.isfinite(values).any()]
    max_abs = float(max(finite)) if finite else 0.0
    row_height = int(np.clip(360 // max(len(ranks), 1), 4, 16))
    label_every = int(np.ceil(10 / row_height))
    column_px = (PLOT_RIGHT - PLOT_LEFT) / HEAT_COLUMNS
    time_scale = LinearScale(low=0.0, high=duration, pixel_low=PLOT_LEFT, pixel_high=PLOT_RIGHT)
    rows = []
    for index, rank in enumerate(ranks):
        y = 4 + index * row_height
        values = extremes.get(rank)
        cells: tuple[HeatCell, ...] = ()
        if rank in missing:
            status, title = "missing", f"rank {rank}: missing (no telemetry)"
        elif values is None or not np.isfinite(values).any():
            status, title = "nodata", f"rank {rank}: no hidden-gap samples"
        else:
            peak = float(values[np.nanargmax(np.abs(values))])
            status, cells = "present", _cells(_levels(values, max_abs), column_px, PLOT_LEFT)
            title = (f"rank {rank}: hidden gap up to {format_bytes(peak + baseline)} "
                     f"({format_bytes(peak, signed=True)} from the baseline {format_bytes(baseline)})")
        anomaly = first_anomalies.get(rank)
        anomaly_x = round(time_scale.at(frame.seconds(anomaly.timestamp_ns)), 1) if anomaly else None
        rows.append(HeatRow(rank=rank, y=y, status=status, cells=cells,
                            show_label=index % label_every == 0 or rank == first_cause_rank, title=title,
                            anomaly_x=anomaly_x, anomaly_title=anomaly.title if anomaly else "",
                            first_cause=rank == first_cause_rank))
    axis_y = 4 + len(ranks) * row_height
    return HeatStrip(
        width=CHART_WIDTH,
        height=axis_y + 22,
        left=PLOT_LEFT,
        right=PLOT_RIGHT,
        row_height=row_height,
        rows=tuple(rows),
        x_ticks=keep_inside(time_ticks(time_scale), low_px=2, high_px=CHART_WIDTH - 2),
        axis_y=axis_y,
        legend=_legend(max_abs, baseline) if finite else (),
        baseline_bytes=baseline,
    )
