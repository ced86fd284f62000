"""Per-rank chart geometry: SVG paths of allocated, reserved and hidden gap over time,
marker lines (OOM, alerts, collector, lifecycle), phase bands and anomaly points.

Everything here is numbers and plain text; the template draws it (and escapes the
text). Pixels are in the SVG's own ``viewBox`` units; times in seconds since job
start; memory in bytes. Timelines are min/max-downsampled to ``buckets`` per chart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stormwatch.reports.downsample import minmax_points, value_at
from stormwatch.reports.markers import MarkerView, PhaseView
from stormwatch.reports.scales import LinearScale, Tick, byte_ticks, time_ticks, value_domain
from stormwatch.reports.timelines import RankTimeline, TimeFrame

CHART_WIDTH = 960
PLOT_LEFT, PLOT_RIGHT = 80, 948
LANE_HEIGHT, MAX_LANES = 7, 3
MEMORY_HEIGHT, GAP_HEIGHT, TITLE_HEIGHT, AXIS_HEIGHT = 120, 64, 14, 22
MAX_MARKER_LINES, MAX_PHASE_BANDS = 160, 240
SERIES_LABELS = {"allocated": "Allocated", "reserved": "Reserved", "gap": "Hidden gap", "device_used": "Device used"}


@dataclass(frozen=True)
class Series:
    name: str  # a key of SERIES_LABELS; the template's data-series attribute
    label: str
    path: str  # SVG path data


@dataclass(frozen=True)
class Panel:
    title: str
    top: float
    bottom: float
    series: tuple[Series, ...]
    ticks: tuple[Tick, ...]
    zero_y: float | None = None
    note: str | None = None  # shown instead of lines when the panel has no data


@dataclass(frozen=True)
class MarkerLine:
    x: float
    kind: str
    severity: str
    title: str
    tag: str  # short static text drawn above the line ("OOM"), or ""


@dataclass(frozen=True)
class PhaseBand:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True)
class Anomaly:
    """A finding to mark on a rank's chart: its time (ns since the epoch), role and hover text."""

    timestamp_ns: int
    role: str  # "first" (the row's first anomaly), or the IndicatorKind of one of the job's first causes
    title: str


@dataclass(frozen=True)
class AnomalyPoint:
    x: float
    y: float
    role: str
    title: str


@dataclass(frozen=True)
class RankChart:
    rank: int
    width: int
    height: int
    plot_left: int
    plot_right: int
    panels: tuple[Panel, ...]
    x_ticks: tuple[Tick, ...]
    axis_y: float
    markers: tuple[MarkerLine, ...]
    phases: tuple[PhaseBand, ...]
    anomalies: tuple[AnomalyPoint, ...]

    @property
    def series_count(self) -> int:
        return sum(len(panel.series) for panel in self.panels)


def svg_path(x: np.ndarray, y: np.ndarray) -> str:
    """``M x y x y …`` (implicit line-to) per run of finite ``y``; NaN breaks the line.

    Coordinates are rounded to 0.1 px and the inner points of flat runs are dropped.
    """
    x, y = np.round(np.asarray(x, dtype=np.float64), 1), np.round(np.asarray(y, dtype=np.float64), 1)
    finite = np.isfinite(y) & np.isfinite(x)
    edges = np.flatnonzero(np.diff(np.concatenate(([False], finite, [False])).astype(np.int8)))
    parts = []
    for start, stop in zip(edges[0::2], edges[1::2], strict=True):
        xs, ys = x[start:stop], y[start:stop]
        if len(ys) > 2:
            inner = (ys[1:-1] == ys[:-2]) & (ys[1:-1] == ys[2:])
            keep = np.concatenate(([True], ~inner, [True]))
            xs, ys = xs[keep], ys[keep]
        coords = " ".join(f"{a:g} {b:g}" for a, b in zip(xs.tolist(), ys.tolist(), strict=True))
        parts.append(f"M{coords}" + (" h0.5" if len(xs) == 1 else ""))
    return "".join(parts)


def _panel(
    title: str,
    names: Sequence[str],
    timeline: RankTimeline | None,
    *,
    top: float,
    height: float,
    time_scale: LinearScale,
    buckets: int,
    include_zero: bool,
    empty_note: str,
) -> tuple[Panel, LinearScale | None]:
    present = [name for name in names if timeline is not None and name in timeline.series]
    drawn = {}
    for name in present:
        assert timeline is not None
        xs, ys = minmax_points(
            timeline.times_s, timeline.series[name], start=time_scale.low, end=time_scale.high, buckets=buckets
        )
        if np.isfinite(ys).any():
            drawn[name] = (xs, ys)
    if not drawn:
        return Panel(title=title, top=top, bottom=top + height, series=(), ticks=(), note=empty_note), None
    extremes = [float(f(ys[np.isfinite(ys)])) for _, ys in drawn.values() for f in (np.min, np.max)]
    low, high = value_domain(extremes, include_zero=include_zero)
    scale = LinearScale(low=low, high=high, pixel_low=top + height, pixel_high=top)
    series = tuple(
        Series(name, SERIES_LABELS[name], svg_path(time_scale(xs), scale(ys))) for name, (xs, ys) in drawn.items()
    )
    zero_y = scale.at(0.0) if low < 0 < high or (include_zero and low <= 0 <= high) else None
    panel = Panel(title=title, top=top, bottom=top + height, series=series, ticks=byte_ticks(scale), zero_y=zero_y)
    return panel, scale


def _marker_lines(markers: Sequence[MarkerView], time_scale: LinearScale) -> tuple[MarkerLine, ...]:
    """One line per (kind, severity, pixel); the most important kept first when over the cap."""
    seen: set[tuple[str, str, int]] = set()
    lines = []
    for marker in sorted(markers, key=lambda item: (-item.priority, item.start_s)):
        x = time_scale.at(marker.start_s)
        key = (marker.kind, marker.severity, round(x))
        if key in seen:
            continue
        seen.add(key)
        lines.append(MarkerLine(x=round(x, 1), kind=marker.kind, severity=marker.severity, title=marker.title,
                                tag=marker.tag))
        if len(lines) >= MAX_MARKER_LINES:
            break
    return tuple(sorted(lines, key=lambda line: line.x))


def _phase_bands(phases: Sequence[PhaseView], time_scale: LinearScale) -> tuple[PhaseBand, ...]:
    """Phases as bands in lanes by nesting depth; over the cap, bands touching on screen merge."""
    lanes: dict[int, list[list[Any]]] = {}
    for phase in sorted(phases, key=lambda item: item.start_s):
        lane = min(phase.depth, MAX_LANES) - 1
        x0, x1 = time_scale.at(phase.start_s), time_scale.at(phase.end_s)
        lanes.setdefault(lane, []).append([x0, max(x1, x0 + 0.8), phase.title, 1])
    total = sum(len(items) for items in lanes.values())
    bands = []
    for lane, items in sorted(lanes.items()):
        if total > MAX_PHASE_BANDS:
            merged: list[list[Any]] = []
            for item in items:
                if merged and item[0] <= merged[-1][1] + 1.0:
                    merged[-1][1] = max(merged[-1][1], item[1])
                    merged[-1][3] += 1
                else:
                    merged.append(item)
            items = merged
        for x0, x1, title, count in items:
            label = title if count == 1 else f"{title} (and {count - 1} more phases)"
            bands.append(PhaseBand(x=round(x0, 1), y=4 + lane * LANE_HEIGHT, width=round(x1 - x0, 1),
                                   height=LANE_HEIGHT - 1, title=label))
    return tuple(bands)


def _anomaly_points(
    anomalies: Sequence[Anomaly],
    timeline: RankTimeline | None,
    frame: TimeFrame,
    time_scale: LinearScale,
    placed: Sequence[tuple[Panel, LinearScale | None, str]],
) -> tuple[AnomalyPoint, ...]:
    points = []
    for anomaly in anomalies:
        when = frame.seconds(anomaly.timestamp_ns)
        x, y = time_scale.at(when), None
        for _panel, scale, name in placed:
            if scale is not None and timeline is not None and name in timeline.series:
                value = value_at(timeline.times_s, timeline.series[name], when)
                if math.isfinite(value):
                    y = scale.at(value)
                    break
        if y is None:
            y = placed[0][0].bottom
        points.append(AnomalyPoint(x=round(x, 1), y=round(y, 1), role=anomaly.role, title=anomaly.title))
    return tuple(points)


def rank_chart(
    rank: int,
    timeline: RankTimeline | None,
    *,
    frame: TimeFrame,
    markers: Sequence[MarkerView] = (),
    phases: Sequence[PhaseView] = (),
    anomalies: Sequence[Anomaly] = (),
    buckets: int = 400,
) -> RankChart:
    """The chart of one rank: memory panel (allocated + reserved, or device used), hidden-gap panel."""
    lanes = min(max((phase.depth for phase in phases), default=0), MAX_LANES)
    top = 4 + lanes * LANE_HEIGHT + TITLE_HEIGHT
    time_scale = LinearScale(low=0.0, high=frame.duration_s, pixel_low=PLOT_LEFT, pixel_high=PLOT_RIGHT)
    device_only = timeline is not None and timeline.device_only
    memory_names = ("device_used",) if device_only else ("allocated", "reserved")
    memory, memory_scale = _panel(
        "Device memory used" if device_only else "Allocated / reserved",
        memory_names, timeline, top=top, height=MEMORY_HEIGHT, time_scale=time_scale, buckets=buckets,
        include_zero=False, empty_note="no memory samples",
    )
    gap_top = memory.bottom + 8 + TITLE_HEIGHT
    gap, gap_scale = _panel(
        "Hidden gap (device used - reserved)", ("gap",), timeline, top=gap_top, height=GAP_HEIGHT,
        time_scale=time_scale, buckets=buckets, include_zero=True,
        empty_note="no hidden gap: device memory only" if device_only else "no hidden-gap samples",
    )
    placed = [(gap, gap_scale, "gap"), (memory, memory_scale, memory_names[0])]
    return RankChart(
        rank=rank,
        width=CHART_WIDTH,
        height=int(gap.bottom + AXIS_HEIGHT),
        plot_left=PLOT_LEFT,
        plot_right=PLOT_RIGHT,
        panels=(memory, gap),
        x_ticks=time_ticks(time_scale),
        axis_y=gap.bottom,
        markers=_marker_lines(markers, time_scale),
        phases=_phase_bands(phases, time_scale),
        anomalies=_anomaly_points(anomalies, timeline, frame, time_scale, placed),
    )


def chart_buckets(charted_ranks: int) -> int:
    """Buckets per chart: 400 up to 16 ranks, fewer (not under 150) as ranks add up, to bound page size."""
    return max(150, min(400, 6400 // max(charted_ranks, 1)))

