"""Per-rank chart geometry: SVG paths of memory and hidden gap over time, the device's capacity,
marker lines (OOM, alerts, collector, lifecycle), phase bands and anomaly points.

Everything here is numbers and plain text; the template draws it (and escapes the
text). Pixels are in the SVG's own ``viewBox`` units; times in seconds since job
start; memory in bytes. Timelines are min/max-downsampled to ``buckets`` per chart.

A GPU rank's chart has a memory panel (allocated + reserved, or device used for a rank without
allocator counters) with its device's capacity line and headroom label (:mod:`.capacity` chooses the
range: unbroken up to the capacity, or broken), then a hidden-gap panel. A CPU rank (stormlog's CPU
tracker: no device, no allocator pool) has one panel of the memory it used, and no hidden-gap panel.
Every text lies inside the SVG: ticks near an edge are anchored inward (:func:`.scales.keep_inside`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stormwatch.reports.capacity import (
    BREAK_MARK_OFFSET_PX,
    CAPACITY_LINE_OFFSET_PX,
    capacity_text,
    headroom_label,
    memory_range,
)
from stormwatch.reports.chartmarks import (
    LANE_HEIGHT,
    MAX_LANES,
    Anomaly,
    AnomalyPoint,
    MarkerLine,
    PhaseBand,
    anomaly_points,
    marker_lines,
    phase_bands,
)
from stormwatch.reports.downsample import minmax_points
from stormwatch.reports.markers import MarkerView, PhaseView
from stormwatch.reports.rankplaces import DeviceKind, RankPlace
from stormwatch.reports.scales import LinearScale, Tick, byte_ticks, keep_inside, time_ticks, value_domain
from stormwatch.reports.timelines import RankTimeline, TimeFrame

CHART_WIDTH = 960
PLOT_LEFT, PLOT_RIGHT = 80, 948
MEMORY_HEIGHT, GAP_HEIGHT, TITLE_HEIGHT, AXIS_HEIGHT = 120, 64, 14, 22
EDGE_PX = 2  # no label closer than this to the SVG's left or right edge
MIN_FLAT_SPAN_BYTES = 1 << 20  # a flat line gets at least this much range: its ticks then say something
SERIES_LABELS = {"allocated": "Allocated", "reserved": "Reserved", "gap": "Hidden gap", "device_used": "Device used"}
CPU_SERIES_LABEL = "Memory used (CPU)"
GAP_PANEL_TITLE = "Hidden gap (device used - reserved)"

__all__ = ["Anomaly", "CapacityMark", "Panel", "RankChart", "Series", "chart_buckets", "legend", "rank_chart",
           "svg_path"]


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
    gap: bool = False  # the hidden-gap panel (its title carries the words' meaning on hover)


@dataclass(frozen=True)
class CapacityMark:
    """The device's capacity on the memory panel: a line at ``y`` labelled ``label`` (at ``label_y``,
    inside the plot); ``break_y``: where the y axis is broken (None: unbroken)."""

    y: float
    label: str
    label_y: float
    break_y: float | None


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
    device: DeviceKind
    headroom: str  # "peak 77.4 of 80 GiB, 3 % free"; drawn right-aligned in the memory panel's title row
    capacity: CapacityMark | None

    @property
    def series_count(self) -> int:
        return sum(len(panel.series) for panel in self.panels)

    @property
    def headroom_y(self) -> float:
        return self.panels[0].top - 4


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


def _drawn(names: Sequence[str], timeline: RankTimeline | None, *, time_scale: LinearScale, buckets: int
           ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The downsampled points of each of ``names`` that ``timeline`` has a finite value of."""
    drawn = {}
    for name in names:
        if timeline is None or name not in timeline.series:
            continue
        xs, ys = minmax_points(timeline.times_s, timeline.series[name], start=time_scale.low, end=time_scale.high,
                               buckets=buckets)
        if np.isfinite(ys).any():
            drawn[name] = (xs, ys)
    return drawn


def _domain(drawn: dict[str, tuple[np.ndarray, np.ndarray]], *, include_zero: bool) -> tuple[float, float]:
    """The padded range of the drawn values, at least :data:`MIN_FLAT_SPAN_BYTES` wide."""
    extremes = [float(f(ys[np.isfinite(ys)])) for _, ys in drawn.values() for f in (np.min, np.max)]
    low, high = value_domain(extremes, include_zero=include_zero)
    if high - low < MIN_FLAT_SPAN_BYTES:
        middle = (high + low) / 2
        low, high = middle - MIN_FLAT_SPAN_BYTES / 2, middle + MIN_FLAT_SPAN_BYTES / 2
        if include_zero and min(extremes) >= 0:
            low, high = 0.0, max(high - low, max(extremes) * 1.05)
    return low, high


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
    capacity_bytes: int | None = None,
    labels: dict[str, str] | None = None,
) -> tuple[Panel, LinearScale | None, CapacityMark | None]:
    """A panel of ``names``'s series; with ``capacity_bytes``, the device's capacity drawn on it."""
    drawn = _drawn(names, timeline, time_scale=time_scale, buckets=buckets)
    gap = names == ("gap",)
    if not drawn:
        empty = Panel(title=title, top=top, bottom=top + height, series=(), ticks=(), note=empty_note, gap=gap)
        return empty, None, None
    low, high = _domain(drawn, include_zero=include_zero)
    span = memory_range(low, high, capacity_bytes=capacity_bytes)
    scale = LinearScale(low=span.low, high=span.high, pixel_low=top + height, pixel_high=top + span.band_px)
    names_of = labels or SERIES_LABELS
    series = tuple(Series(name, names_of[name], svg_path(time_scale(xs), scale(ys)))
                   for name, (xs, ys) in drawn.items())
    zero_y = scale.at(0.0) if span.low < 0 < span.high or (include_zero and span.low <= 0 <= span.high) else None
    mark = None
    if capacity_bytes is not None and capacity_bytes > 0:
        line_y = top + CAPACITY_LINE_OFFSET_PX if span.broken else scale.at(capacity_bytes)
        label_y = min(line_y + 11, top + height - 3)  # below the line, inside the plot
        mark = CapacityMark(y=round(line_y, 1), label=capacity_text(capacity_bytes), label_y=round(label_y, 1),
                            break_y=round(top + BREAK_MARK_OFFSET_PX, 1) if span.broken else None)
    panel = Panel(title=title, top=top, bottom=top + height, series=series, ticks=byte_ticks(scale), zero_y=zero_y,
                  gap=gap)
    return panel, scale, mark


def _peak_bytes(place: RankPlace | None, timeline: RankTimeline | None, *, names: Sequence[str]) -> float | None:
    """The rank's peak of memory used: its fleet facts' (device used, else reserved), else the largest
    value the chart draws."""
    if place is not None and place.peak_used_bytes is not None:
        return float(place.peak_used_bytes)
    values = [timeline.series[name] for name in names if timeline is not None and name in timeline.series]
    finite = [float(np.nanmax(array)) for array in values if np.isfinite(array).any()]
    return max(finite) if finite else None


def rank_chart(
    rank: int,
    timeline: RankTimeline | None,
    *,
    frame: TimeFrame,
    place: RankPlace | None = None,
    markers: Sequence[MarkerView] = (),
    phases: Sequence[PhaseView] = (),
    anomalies: Sequence[Anomaly] = (),
    buckets: int = 400,
) -> RankChart:
    """The chart of one rank (panels as the module docstring says); ``place``: its host, device and
    capacity (None: unknown, no capacity line)."""
    lanes = min(max((phase.depth for phase in phases), default=0), MAX_LANES)
    top = 4 + lanes * LANE_HEIGHT + TITLE_HEIGHT
    time_scale = LinearScale(low=0.0, high=frame.duration_s, pixel_low=PLOT_LEFT, pixel_high=PLOT_RIGHT)
    device = place.kind if place is not None else DeviceKind.UNKNOWN
    cpu = device is DeviceKind.CPU
    device_only = timeline is not None and timeline.device_only
    capacity = None if place is None or cpu else place.capacity_bytes
    if cpu:
        memory_names: tuple[str, ...] = ("allocated",) if timeline is None or "allocated" in timeline.series else (
            "device_used",)
        title, labels = "Memory used (CPU: no device, no allocator pool)", dict.fromkeys(memory_names, CPU_SERIES_LABEL)
    else:
        memory_names = ("device_used",) if device_only else ("allocated", "reserved")
        title, labels = ("Device memory used" if device_only else "Allocated / reserved"), None
    memory, memory_scale, mark = _panel(
        title, memory_names, timeline, top=top, height=MEMORY_HEIGHT, time_scale=time_scale, buckets=buckets,
        include_zero=False, empty_note="no memory samples", capacity_bytes=capacity, labels=labels,
    )
    panels, placed = [memory], [(memory_scale, memory_names[0])]
    if not cpu:
        gap, gap_scale, _ = _panel(
            GAP_PANEL_TITLE, ("gap",), timeline, top=memory.bottom + 8 + TITLE_HEIGHT, height=GAP_HEIGHT,
            time_scale=time_scale, buckets=buckets, include_zero=True,
            empty_note="no hidden gap: device memory only" if device_only else "no hidden-gap samples",
        )
        panels.append(gap)
        placed.insert(0, (gap_scale, "gap"))
    axis_y = panels[-1].bottom
    peak = _peak_bytes(place, timeline, names=("device_used",) if device_only else memory_names)
    return RankChart(
        rank=rank,
        width=CHART_WIDTH,
        height=int(axis_y + AXIS_HEIGHT),
        plot_left=PLOT_LEFT,
        plot_right=PLOT_RIGHT,
        panels=tuple(panels),
        x_ticks=keep_inside(time_ticks(time_scale), low_px=EDGE_PX, high_px=CHART_WIDTH - EDGE_PX),
        axis_y=axis_y,
        markers=marker_lines(markers, time_scale),
        phases=phase_bands(phases, time_scale),
        anomalies=anomaly_points(anomalies, timeline, frame=frame, time_scale=time_scale, placed=placed,
                                 fallback_y=axis_y, top_px=memory.top),
        device=device,
        headroom=headroom_label(peak, capacity, cpu=cpu),
        capacity=mark,
    )


#: The legend's keys, in order: (CSS class of the key, label).
LEGEND_KEYS = (("s-allocated", "allocated"), ("s-reserved", "reserved"),
               ("s-device_used", "device used (no allocator counters)"), ("s-gap", "hidden gap"),
               ("capacity", "device capacity"), ("m-oom", "OOM"), ("m-alert", "alert"), ("phase", "phase"),
               ("a-first", "first anomaly"), ("a-earliest", "first cause"))


def legend(charts: Sequence[RankChart]) -> tuple[tuple[str, str], ...]:
    """The legend's keys for what ``charts`` draw (a CPU rank's memory reads "memory used (CPU)")."""
    drawn: set[str] = set()
    for chart in charts:
        for panel in chart.panels:
            drawn.update(f"s-{series.name}" for series in panel.series)
        drawn.update(f"m-{marker.kind}" for marker in chart.markers)
        drawn.update("a-first" if point.role == "first" else "a-earliest" for point in chart.anomalies)
        drawn.update(["capacity"] if chart.capacity else [])
        drawn.update(["phase"] if chart.phases else [])
    cpu_only = bool(charts) and all(chart.device is DeviceKind.CPU for chart in charts)
    return tuple((css, "memory used (CPU)" if cpu_only and css == "s-allocated" else label)
                 for css, label in LEGEND_KEYS if css in drawn)


def chart_buckets(charted_ranks: int) -> int:
    """Buckets per chart: 400 up to 16 ranks, fewer (not under 150) as ranks add up, to bound page size."""
    return max(150, min(400, 6400 // max(charted_ranks, 1)))
