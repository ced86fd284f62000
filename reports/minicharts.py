"""Small inline SVG charts for the fleet pages: per-night bars (stacked or not), a per-night line
with gaps, and a sparkline of a job's earlier runs against its baseline.

Geometry only (numbers and plain text, like :mod:`stormwatch.reports.charts`); the template
``_minichart.html.j2`` draws it and escapes every title. Pixels are the SVG's ``viewBox``
units; values are counts (jobs) or bytes (memory, labelled in IEC units via
:func:`~stormwatch.reports.scales.byte_ticks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stormwatch.reports.charts import svg_path
from stormwatch.reports.formatting import format_bytes, format_count
from stormwatch.reports.scales import LinearScale, Tick, byte_ticks, tick_values, value_domain

MINI_WIDTH, MINI_HEIGHT = 320, 120
MINI_LEFT, MINI_RIGHT, MINI_TOP, MINI_BOTTOM = 52, 312, 8, 96
SPARK_WIDTH, SPARK_HEIGHT = 180, 36
SPARK_LEFT, SPARK_RIGHT, SPARK_TOP, SPARK_BOTTOM = 4, 170, 5, 31


@dataclass(frozen=True)
class Segment:
    """One stacked part of a bar: ``css`` is a fixed class name (``v-critical``), never telemetry."""

    y: float
    height: float
    css: str


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    segments: tuple[Segment, ...]
    title: str


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    css: str
    title: str


@dataclass(frozen=True)
class MiniChart:
    """A small chart: bars and/or one line (``path``), y ticks, first/last x labels, a dashed
    reference line at ``baseline_y`` (sparklines), dots (the latest value)."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    label: str  # aria-label
    bars: tuple[Bar, ...] = ()
    path: str = ""
    dots: tuple[Dot, ...] = ()
    y_ticks: tuple[Tick, ...] = ()
    x_labels: tuple[Tick, ...] = ()
    baseline_y: float | None = None
    baseline_title: str = ""


def _x_positions(count: int, left: float, right: float) -> tuple[list[float], float]:
    """Band centres and band width for ``count`` equal bands across ``[left, right]``."""
    band = (right - left) / max(count, 1)
    return [left + band * (index + 0.5) for index in range(count)], band


def _first_last(labels: Sequence[str], centres: Sequence[float]) -> tuple[Tick, ...]:
    if not labels:
        return ()
    if len(labels) == 1:
        return (Tick(round(centres[0], 1), labels[0]),)
    return Tick(round(centres[0], 1), labels[0]), Tick(round(centres[-1], 1), labels[-1])


def count_ticks(scale: LinearScale, count: int = 3) -> tuple[Tick, ...]:
    """Integer ticks (``0``, ``500``, ``1,000``) for a count axis."""
    values = [v for v in tick_values(scale.low, scale.high, count) if float(v).is_integer()]
    return tuple(Tick(round(scale.at(v), 1), format_count(int(v))) for v in values)


def stacked_bars(labels: Sequence[str], stacks: Sequence[Sequence[tuple[str, int]]], *, label: str,
                 unit: str = "jobs") -> MiniChart:
    """One bar per label (a night), stacked from ``(css class, count)`` parts, bottom first; the
    bar's title lists every part (``2026-11-30: 12 jobs · critical 2 · …``)."""
    centres, band = _x_positions(len(labels), MINI_LEFT, MINI_RIGHT)
    totals = [sum(max(count, 0) for _, count in stack) for stack in stacks]
    scale = LinearScale(low=0.0, high=float(max([*totals, 1])), pixel_low=MINI_BOTTOM, pixel_high=MINI_TOP)
    width = max(band * 0.8, 0.6)
    bars = []
    for centre, night, stack, total in zip(centres, labels, stacks, totals, strict=True):
        segments, running = [], 0.0
        for css, count in stack:
            if count <= 0:
                continue
            low, high = scale.at(running), scale.at(running + count)
            segments.append(Segment(round(high, 1), round(low - high, 1), css))
            running += count
        parts = " · ".join(f"{css.split('-', 1)[-1]} {format_count(count)}" for css, count in stack if count > 0)
        title = f"{night}: {format_count(total)} {unit}" + (f" · {parts}" if len(stack) > 1 and parts else "")
        bars.append(Bar(x=round(centre - width / 2, 1), width=round(width, 1), segments=tuple(segments), title=title))
    return MiniChart(width=MINI_WIDTH, height=MINI_HEIGHT, left=MINI_LEFT, right=MINI_RIGHT, top=MINI_TOP,
                     bottom=MINI_BOTTOM, label=label, bars=tuple(bars), y_ticks=count_ticks(scale),
                     x_labels=_first_last(labels, centres))


def bytes_line(labels: Sequence[str], values: Sequence[int | None], *, label: str) -> MiniChart:
    """One point per label (a night) joined by a line, in bytes (ticks in GiB/MiB); a None value
    breaks the line. Each point has a dot whose title gives the night and the value."""
    centres, _ = _x_positions(len(labels), MINI_LEFT, MINI_RIGHT)
    finite = [float(v) for v in values if v is not None]
    low, high = value_domain(finite, include_zero=True)
    scale = LinearScale(low=low, high=high, pixel_low=MINI_BOTTOM, pixel_high=MINI_TOP)
    ys = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    dots = tuple(Dot(x=round(x, 1), y=round(scale.at(v), 1), css="point", title=f"{night}: {format_bytes(v)}")
                 for x, v, night in zip(centres, values, labels, strict=True) if v is not None)
    return MiniChart(width=MINI_WIDTH, height=MINI_HEIGHT, left=MINI_LEFT, right=MINI_RIGHT, top=MINI_TOP,
                     bottom=MINI_BOTTOM, label=label, path=svg_path(np.array(centres), scale(ys)) if finite else "",
                     dots=dots,
                     y_ticks=byte_ticks(scale, count=3) if finite else (), x_labels=_first_last(labels, centres))


def sparkline(earlier: Sequence[tuple[str, int]], current: int | None, baseline: int | None, *,
              label: str) -> MiniChart:
    """Earlier runs' values (``(time label, bytes)``, oldest first), then this run as the last,
    highlighted point; the baseline as a dashed line. No axes: the table beside it has the numbers."""
    points = [*earlier, *([("this run", current)] if current is not None else [])]
    values = [float(value) for _, value in points]
    low, high = value_domain([*values, *([float(baseline)] if baseline is not None else [])])
    scale = LinearScale(low=low, high=high, pixel_low=SPARK_BOTTOM, pixel_high=SPARK_TOP)
    if len(points) == 1:
        xs = [float(SPARK_RIGHT)]
    else:
        step = (SPARK_RIGHT - SPARK_LEFT) / (len(points) - 1)
        xs = [SPARK_LEFT + step * index for index in range(len(points))]
    last = len(points) - 1 if current is not None else -1
    dots = tuple(
        Dot(x=round(x, 1), y=round(scale.at(float(value)), 1), css="current" if index == last else "earlier",
            title=f"{when}: {format_bytes(value)}")
        for index, (x, (when, value)) in enumerate(zip(xs, points, strict=True))
    )
    path = svg_path(np.array(xs), scale(np.array(values))) if len(points) > 1 else ""
    baseline_y = round(scale.at(float(baseline)), 1) if baseline is not None else None
    return MiniChart(width=SPARK_WIDTH, height=SPARK_HEIGHT, left=SPARK_LEFT, right=SPARK_RIGHT, top=SPARK_TOP,
                     bottom=SPARK_BOTTOM, label=label, path=path, dots=dots, baseline_y=baseline_y,
                     baseline_title=f"baseline {format_bytes(baseline)}" if baseline is not None else "")
