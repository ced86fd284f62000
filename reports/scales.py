"""Linear scales and "nice" axis ticks for the SVG charts (pixels from data units)."""

from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Tick:
    """An axis tick at ``position`` pixels, labelled ``label`` (plain text)."""

    position: float
    label: str


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


def byte_ticks(scale: LinearScale, count: int = 4) -> tuple[Tick, ...]:
    """Ticks at nice values of the IEC unit that fits the domain (``1.5 GiB`` steps, not 1.6e9)."""
    _, unit_bytes = byte_unit(max(abs(scale.low), abs(scale.high)))
    values = tick_values(scale.low / unit_bytes, scale.high / unit_bytes, count)
    return tuple(Tick(scale.at(value * unit_bytes), format_bytes(value * unit_bytes)) for value in values)


def time_ticks(scale: LinearScale, count: int = 8) -> tuple[Tick, ...]:
    """Ticks in seconds since job start, at nice steps of seconds, minutes or hours (``0 s``, ``2.5 s``,
    ``10 min``, ``1.5 h``) depending on the span."""
    span = scale.high - scale.low
    unit_s, suffix = (3600.0, "h") if span > 3 * 3600 else (60.0, "min") if span > 180 else (1.0, "s")
    values = tick_values(scale.low / unit_s, scale.high / unit_s, count)
    return tuple(Tick(scale.at(v * unit_s), f"{v:g} {suffix}") for v in values)
