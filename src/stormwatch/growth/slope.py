"""Theil–Sen slopes of many short series at once, with Sen's confidence interval and a one-sided
Mann–Kendall confidence that the slope is above zero.

The series are the rows of two ``(series, points)`` float arrays ``x`` and ``y``; NaN marks a
missing point (a series may have fewer points than the width). Every pairwise slope of a row is
formed at once (``points²/2`` per row), so the width must stay small: a few dozen window minima,
never events.

An optional ``block`` array (same shape, integers) splits a series into blocks whose points are
compared only with each other (Hirsch, Slack & Smith 1982's seasonal Kendall form: a process
restart resets what a leak held, so slopes across a restart say nothing about growth). ``S``
and its variance are then sums over blocks, the slope the median of the within-block pair
slopes, and the intercept that of the last block (the line the series is on at its end).

Method (Sen 1968; Gilbert 1987, ch. 16):

* slope: the median of ``(y_j - y_i) / (x_j - x_i)`` over pairs ``i < j`` with ``x_i != x_j``;
* interval: with ``N`` such pairs and ``C = z · sqrt(var S)``, the ordered slopes at
  ``(N - C) / 2`` (rounded down, so the bound is never tighter than Sen's) and ``(N + C) / 2 + 1``
  (rounded up), ``z`` the normal quantile of ``1 - significance / 2``;
* confidence: ``Φ(Z)`` of the Mann–Kendall statistic ``S = Σ sign(y_j - y_i)`` (ordered by x),
  continuity corrected, ``Z = (S - sign S) / sqrt(var S)``.

``var S = Σ over blocks n(n-1)(2n+5)/18`` without the correction for ties: ties only lower the true variance, so
the interval and the confidence are conservative (wider, nearer 0.5) where values repeat.
Units are those of the inputs: the slope is y-units per x-unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

_NORMAL = NormalDist()


@dataclass(frozen=True, kw_only=True, slots=True)
class Slopes:
    """Per series (one entry per input row): ``slope``, ``low`` / ``high`` (the interval),
    ``intercept`` (the median of ``y - slope · x``), ``confidence`` (that the slope is above zero,
    in [0, 1]) and ``points`` (the series' points with both x and y). NaN where a series has fewer
    than 2 points at distinct x."""

    slope: np.ndarray
    low: np.ndarray
    high: np.ndarray
    intercept: np.ndarray
    confidence: np.ndarray
    points: np.ndarray

    def reshaped(self, shape: tuple[int, ...]) -> Slopes:
        """The same results with every array reshaped to ``shape`` (series laid out by the caller)."""
        return Slopes(slope=self.slope.reshape(shape), low=self.low.reshape(shape), high=self.high.reshape(shape),
                      intercept=self.intercept.reshape(shape), confidence=self.confidence.reshape(shape),
                      points=self.points.reshape(shape))


def normal_quantile(probability: float) -> float:
    """The standard normal quantile of ``probability`` in (0, 1)."""
    return _NORMAL.inv_cdf(probability)


def _pick(ordered: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``ordered[row, index[row]]`` with NaN where the index is negative."""
    safe = np.clip(index, 0, ordered.shape[1] - 1 if ordered.shape[1] else 0)
    picked = np.take_along_axis(ordered, safe[:, None], axis=1)[:, 0] if ordered.shape[1] else \
        np.full(len(index), np.nan)
    return np.where(index >= 0, picked, np.nan)


def _block_variance(present: np.ndarray, block: np.ndarray) -> np.ndarray:
    """Σ over each row's blocks of n(n-1)(2n+5)/18, n the block's present points."""
    series, width = present.shape
    if not series or not width:
        return np.zeros(series)
    codes = np.where(present, block - block.min(), -1)
    blocks = int(codes.max()) + 1 if present.any() else 1
    rows = np.repeat(np.arange(series), width)
    flat = codes.ravel()
    counts = np.bincount(rows[flat >= 0] * blocks + flat[flat >= 0], minlength=series * blocks)
    n = counts.reshape(series, blocks).astype(np.float64)
    return (n * (n - 1) * (2 * n + 5) / 18).sum(axis=1)


def theil_sen(x: np.ndarray, y: np.ndarray, *, block: np.ndarray | None = None,
              significance: float = 0.05) -> Slopes:
    """The Theil–Sen slope of every row of ``(x, y)`` (same shape ``(series, points)``, NaN:
    missing), its ``1 - significance`` interval and the confidence that it is above zero;
    ``block`` (same shape, integers, ascending along a row): pairs only within a block."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2:
        raise ValueError(f"x and y must be 2-D of one shape, not {x.shape} and {y.shape}")
    blocks = np.zeros(x.shape, dtype=np.int64) if block is None else np.asarray(block, dtype=np.int64)
    if blocks.shape != x.shape:
        raise ValueError(f"block must have the shape of x, {x.shape}, not {blocks.shape}")
    if not 0.0 < significance < 1.0:
        raise ValueError(f"significance {significance} is outside (0, 1)")
    series, width = x.shape
    present = np.isfinite(x) & np.isfinite(y)
    first, second = np.triu_indices(width, k=1)
    dx = x[:, second] - x[:, first]
    dy = y[:, second] - y[:, first]
    usable = present[:, first] & present[:, second] & (dx != 0) & (blocks[:, first] == blocks[:, second])
    with np.errstate(divide="ignore", invalid="ignore"):
        pair_slopes = np.where(usable, dy / dx, np.nan)
    pairs = usable.sum(axis=1)
    ordered = np.sort(pair_slopes, axis=1)  # NaN last: row r's usable slopes are ordered[r, :pairs[r]]
    middle_low, middle_high = (pairs - 1) // 2, pairs // 2
    slope = np.where(pairs > 0, (_pick(ordered, np.where(pairs > 0, middle_low, -1))
                                 + _pick(ordered, np.where(pairs > 0, middle_high, -1))) / 2, np.nan)

    points = present.sum(axis=1)
    sd = np.sqrt(_block_variance(present, blocks))
    spread = normal_quantile(1 - significance / 2) * sd
    low_index = np.floor((pairs - spread) / 2).astype(np.int64) - 1       # 1-based M1 -> 0-based
    high_index = np.ceil((pairs + spread) / 2).astype(np.int64)           # 1-based M2 + 1 -> 0-based
    low = np.where(pairs > 0, _pick(ordered, np.where(pairs > 0, np.maximum(low_index, 0), -1)), np.nan)
    high = np.where(pairs > 0, _pick(ordered, np.where(pairs > 0, np.minimum(high_index, pairs - 1), -1)), np.nan)
    # Sen's bound runs off the ordered slopes when C > N: the interval is then unbounded on that side.
    low = np.where((pairs > 0) & (low_index < 0), -np.inf, low)
    high = np.where((pairs > 0) & (high_index > pairs - 1), np.inf, high)

    # Mann-Kendall S over the same pairs, ordered by x (sign of the slope is sign(dy) * sign(dx)).
    signs = np.where(usable, np.sign(dy) * np.sign(dx), 0.0)
    statistic = signs.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, (statistic - np.sign(statistic)) / sd, 0.0)
    confidence = np.array([_NORMAL.cdf(float(value)) for value in z]) if series else np.empty(0)
    confidence = np.where(pairs > 0, confidence, np.nan)

    last = np.where(present, blocks, np.iinfo(np.int64).min).max(axis=1) if width else np.zeros(series, np.int64)
    with np.errstate(invalid="ignore"):
        residuals = np.where(present & (blocks == last[:, None]), y - slope[:, None] * x, np.nan)
    has_residual = np.isfinite(residuals).any(axis=1)
    intercept = np.full(series, np.nan)
    if has_residual.any():
        intercept[has_residual] = np.nanmedian(residuals[has_residual], axis=1)
    intercept = np.where(pairs > 0, intercept, np.nan)
    return Slopes(slope=slope, low=low, high=high, intercept=intercept, confidence=confidence, points=points)
