"""What a rank's chart marks on top of its series: marker lines (OOM, alerts, collector, lifecycle),
phase bands and anomaly points, as SVG geometry (viewBox pixels; times in seconds since job start).

Every mark stays inside the plot: a marker's tag ("OOM") is drawn to the left of its line when it
would cross the plot's right edge (it was clipped to "OO" there), and an anomaly's circle is moved in
by at most its radius (7 px, under 1 % of the time axis) when it sits on the plot's edge, as an OOM
at a rank's last sample does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stormwatch.reports.downsample import value_at
from stormwatch.reports.markers import MarkerView, PhaseView
from stormwatch.reports.scales import LinearScale, TextAnchor, label_width_px
from stormwatch.reports.timelines import RankTimeline, TimeFrame

LANE_HEIGHT, MAX_LANES = 7, 3
MAX_MARKER_LINES, MAX_PHASE_BANDS = 160, 240
TAG_GAP_PX = 3  # between a marker line and its tag


@dataclass(frozen=True)
class MarkerLine:
    x: float
    kind: str
    severity: str
    title: str
    tag: str  # short static text drawn beside the line ("OOM"), or ""
    tag_x: float
    tag_anchor: TextAnchor


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
    radius: float


#: Circle radius by anomaly role: a rank's first anomaly small, the job's first causes large.
FIRST_RADIUS_PX, CAUSE_RADIUS_PX = 4.0, 7.0


def _tag_place(x: float, tag: str, *, plot_right: float) -> tuple[float, TextAnchor]:
    """Right of the line, or left of it when the tag would cross the plot's right edge."""
    if x + TAG_GAP_PX + label_width_px(tag) <= plot_right:
        return round(x + TAG_GAP_PX, 1), TextAnchor.START
    return round(x - TAG_GAP_PX, 1), TextAnchor.END


def marker_lines(markers: Sequence[MarkerView], time_scale: LinearScale) -> tuple[MarkerLine, ...]:
    """One line per (kind, severity, pixel); the most important kept first when over the cap."""
    seen: set[tuple[str, str, int]] = set()
    lines = []
    for marker in sorted(markers, key=lambda item: (-item.priority, item.start_s)):
        x = time_scale.at(marker.start_s)
        key = (marker.kind, marker.severity, round(x))
        if key in seen:
            continue
        seen.add(key)
        tag_x, anchor = _tag_place(x, marker.tag, plot_right=time_scale.pixel_high)
        lines.append(MarkerLine(x=round(x, 1), kind=marker.kind, severity=marker.severity, title=marker.title,
                                tag=marker.tag, tag_x=tag_x, tag_anchor=anchor))
        if len(lines) >= MAX_MARKER_LINES:
            break
    return tuple(sorted(lines, key=lambda line: line.x))


def phase_bands(phases: Sequence[PhaseView], time_scale: LinearScale) -> tuple[PhaseBand, ...]:
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


def anomaly_points(
    anomalies: Sequence[Anomaly],
    timeline: RankTimeline | None,
    *,
    frame: TimeFrame,
    time_scale: LinearScale,
    placed: Sequence[tuple[LinearScale | None, str]],
    fallback_y: float,
    top_px: float,
) -> tuple[AnomalyPoint, ...]:
    """Each anomaly on the first of ``placed`` (scale, series name) whose series has a value at its
    time, else at ``fallback_y``; its circle kept inside the plot (x within the time axis, y between
    ``top_px`` and ``fallback_y``, the plot's bottom)."""
    points = []
    low_px, high_px = sorted((time_scale.pixel_low, time_scale.pixel_high))
    for anomaly in anomalies:
        radius = FIRST_RADIUS_PX if anomaly.role == "first" else CAUSE_RADIUS_PX
        when = frame.seconds(anomaly.timestamp_ns)
        x, y = min(max(time_scale.at(when), low_px + radius), high_px - radius), None
        for scale, name in placed:
            if scale is not None and timeline is not None and name in timeline.series:
                value = value_at(timeline.times_s, timeline.series[name], when)
                if math.isfinite(value):
                    y = scale.at(value)
                    break
        y = min(max(fallback_y if y is None else y, top_px + radius), fallback_y - radius)
        points.append(AnomalyPoint(x=round(x, 1), y=round(y, 1), role=anomaly.role, title=anomaly.title,
                                   radius=radius))
    return tuple(points)
