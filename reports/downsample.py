"""Min/max bucket downsampling of timelines for drawing, vectorised with numpy.

A timeline is ``times`` (any monotonic unit; the charts use seconds since job
start) and ``values`` (float64, NaN where model.json holds null). Time is cut
into equal buckets; each bucket keeps its minimum and its maximum, so a single
spike sample survives however many samples share its pixel. Output size is
O(buckets), work O(samples); nothing is quadratic.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_float(values: Any) -> np.ndarray:
    """A model.json number list as float64, ``None`` (a missing v4 counter) as NaN."""
    return np.asarray(values, dtype=np.float64)


def as_ns(values: Any) -> np.ndarray:
    """A model.json timestamp list (ns since the epoch) as int64."""
    return np.asarray(values, dtype=np.int64)


def _bucket_index(times: np.ndarray, *, start: float, end: float, buckets: int) -> np.ndarray:
    span = end - start if end > start else 1.0
    index = np.floor((times - start) / span * buckets).astype(np.int64)
    return np.clip(index, 0, buckets - 1)


def _runs(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) positions of runs of equal bucket index (index is non-decreasing)."""
    starts = np.flatnonzero(np.concatenate(([True], index[1:] != index[:-1])))
    ends = np.concatenate((starts[1:], [len(index)]))
    return starts, ends


def _sorted(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(times) > 1 and bool((np.diff(times) < 0).any()):
        order = np.argsort(times, kind="stable")
        return times[order], values[order]
    return times, values


def minmax_points(
    times: np.ndarray, values: np.ndarray, *, start: float, end: float, buckets: int
) -> tuple[np.ndarray, np.ndarray]:
    """Points ``(x, y)`` that draw the timeline at ``buckets`` resolution, spikes included.

    With at most ``2 * buckets`` samples the timeline is returned as is. Otherwise
    every non-empty bucket gives two points at its centre: its minimum and maximum,
    in the order the bucket moves (falling buckets draw max then min), so the line
    stays continuous. A bucket whose values are all NaN gives NaN: a break in the line.
    """
    times, values = _sorted(np.asarray(times, dtype=np.float64), np.asarray(values, dtype=np.float64))
    if len(times) <= 2 * buckets:
        return times, values
    index = _bucket_index(times, start=start, end=end, buckets=buckets)
    starts, ends = _runs(index)
    with np.errstate(invalid="ignore"):
        low = np.fmin.reduceat(values, starts)
        high = np.fmax.reduceat(values, starts)
    falling = values[starts] > values[ends - 1]
    width = (end - start if end > start else 1.0) / buckets
    centres = start + (index[starts] + 0.5) * width
    y = np.empty(2 * len(starts), dtype=np.float64)
    y[0::2] = np.where(falling, high, low)
    y[1::2] = np.where(falling, low, high)
    return np.repeat(centres, 2), y


def signed_extremes(times: np.ndarray, values: np.ndarray, *, start: float, end: float, buckets: int) -> np.ndarray:
    """Per bucket, the value farthest from zero (sign kept); NaN for buckets without data.

    Used by the heat strip: a bucket holding one 8 GiB spike among 256 MiB samples shows 8 GiB.
    """
    times, values = _sorted(np.asarray(times, dtype=np.float64), np.asarray(values, dtype=np.float64))
    out = np.full(buckets, np.nan)
    valid = ~np.isnan(values)
    times, values = times[valid], values[valid]
    if not len(values):
        return out
    index = _bucket_index(times, start=start, end=end, buckets=buckets)
    starts, _ = _runs(index)
    high = np.maximum.reduceat(values, starts)
    low = np.minimum.reduceat(values, starts)
    out[index[starts]] = np.where(high >= -low, high, low)
    return out


def value_at(times: np.ndarray, values: np.ndarray, when: float) -> float:
    """The value of the sample nearest to ``when`` (NaN if there is none or it is null)."""
    if not len(times):
        return float("nan")
    position = int(np.searchsorted(times, when))
    candidates = [p for p in (position - 1, position) if 0 <= p < len(times)]
    best = min(candidates, key=lambda p: abs(float(times[p]) - when))
    return float(values[best])
