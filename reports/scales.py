"""Linear scales and "nice" axis ticks for the SVG charts (pixels from data units).

Tick labels are distinct (a flat line's axis never reads ``0 B, 0 B, 0 B``) and each says how it is
anchored, so that a label near the edge of its SVG is drawn inward rather than clipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from stormwatch.reports.formatting import byte_unit, format_bytes


@dataclass(frozen=True)
class LinearScale:
    """Maps ``[low, high]`` (data units) onto ``[pixel_low, pixel_high]`` (pixels; may be reversed)."""

    low: float
    high: float
    pixel_low: float
    pixel_high: float

    def __call__(self, values: np.ndarray) -> np.ndarray:
        span = self.high - self.low or 1.0
        return self.pixel_low + (np.asarray(values, dtype=np.float64) - self.low) / span * (
            self.pixel_high - self.pixel_low
        )

    def at(self, value: float) -> float:
        return float(self(np.array([value]))[0])


class TextAnchor(StrEnum):
    """SVG ``text-anchor`` of a label (a CSS class of the job page's charts)."""

    START = "start"
    MIDDLE = "middle"
    END = "end"


@dataclass(frozen=True)
class Tick:
    """An axis tick at ``position`` pixels, labelled ``label`` (plain text), drawn ``anchor``-ed."""

    position: float
    label: str
    anchor: TextAnchor = TextAnchor.MIDDLE


#: Width of one label character in viewBox pixels at the charts' 10 px font (a generous average, so
#: an estimate errs towards anchoring inward).
CHAR_PX = 6.2


def label_width_px(label: str) -> float:
    """The estimated width of ``label`` at the charts' font size."""
    return len(label) * CHAR_PX


def keep_inside(ticks: Sequence[Tick], *, low_px: float, high_px: float) -> tuple[Tick, ...]:
    """``ticks`` (centred labels) anchored so each stays within ``low_px``..``high_px``: a label that
    would cross the right edge ends at its tick, one that would cross the left edge starts there."""
    out = []
    for tick in ticks:
        half = label_width_px(tick.label) / 2
        if tick.position + half > high_px:
            tick = replace(tick, anchor=TextAnchor.END)
        elif tick.position - half < low_px:
            tick = replace(tick, anchor=TextAnchor.START)
        out.append(tick)
    return tuple(out)


def nice_step(span: float, count: int) -> float:
    """A 1, 2 or 5 x 10^k step that cuts ``span`` into about ``count`` parts."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * power >= raw:
            return factor * power
    return 10 * power


def tick_values(low: float, high: float, count: int) -> list[float]:
    """Multiples of a nice step inside ``[low, high]``."""
    step = nice_step(high - low, count)
    first = math.ceil(low / step - 1e-9) * step
    values: list[float] = []
    value = first
    while value <= high + step * 1e-9 and len(values) <= 4 * count:
        values.append(0.0 if abs(value) < step * 1e-9 else value)
        value += step
    return values


def value_domain(values: list[float], *, include_zero: bool = False) -> tuple[float, float]:
    """``[min, max]`` of the finite ``values``, padded 5 % (a flat line gets a band around it)."""
    finite = [v for v in values if math.isfinite(v)]
    if include_zero:
        finite.append(0.0)
    if not finite:
        return 0.0, 1.0
    low, high = min(finite), max(finite)
    if high == low:
        pad = abs(high) * 0.05 or 1.0
        return low - pad, high + pad
    pad = (high - low) * 0.05
    return (low if include_zero and low == 0 else low - pad), (high if include_zero and high == 0 else high + pad)


def _byte_labels(values: Sequence[float], *, unit: str, unit_bytes: int) -> list[str]:
    """``values`` (in ``unit``) as labels, with as many decimals as it takes for them to differ."""
    labels = [format_bytes(value * unit_bytes) for value in values]
    digits = 0
    while len(set(labels)) < len(labels) and digits < 4:
        digits += 1
        labels = [f"{value:.{digits}f} {unit}" for value in values]
    return labels


def byte_ticks(scale: LinearScale, count: int = 4) -> tuple[Tick, ...]:
    """Ticks at nice values of the IEC unit that fits the domain (``1.5 GiB`` steps, not 1.6e9), with
    distinct labels: whole bytes below 1 KiB (no ``0.5 B``), more decimals where rounding would repeat one."""
    unit, unit_bytes = byte_unit(max(abs(scale.low), abs(scale.high)))
    low, high = scale.low / unit_bytes, scale.high / unit_bytes
    values = tick_values(low, high, count)
    if unit_bytes == 1 and nice_step(high - low, count) < 1:  # no fractions of a byte
        values = [float(value) for value in range(math.ceil(low), math.floor(high) + 1)]
    labels = _byte_labels(values, unit=unit, unit_bytes=unit_bytes)
    return tuple(Tick(scale.at(value * unit_bytes), label) for value, label in zip(values, labels, strict=True))


def time_ticks(scale: LinearScale, count: int = 8) -> tuple[Tick, ...]:
    """Ticks in seconds since job start, at nice steps of seconds, minutes or hours (``0 s``, ``2.5 s``,
    ``10 min``, ``1.5 h``) depending on the span."""
    span = scale.high - scale.low
    unit_s, suffix = (3600.0, "h") if span > 3 * 3600 else (60.0, "min") if span > 180 else (1.0, "s")
    values = tick_values(scale.low / unit_s, scale.high / unit_s, count)
    return tuple(Tick(scale.at(v * unit_s), f"{v:g} {suffix}") for v in values)
