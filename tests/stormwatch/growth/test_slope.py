"""Theil–Sen with Sen's interval and the Mann–Kendall confidence, against scipy and known cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from stormwatch.growth.slope import theil_sen


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_slope_and_interval_match_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, 24))
    y = 3.0 * x + rng.normal(0, 4, 24)
    fit = theil_sen(x[None], y[None])
    expected = stats.theilslopes(y, x, 0.95)

    assert fit.slope[0] == pytest.approx(expected.slope)
    assert fit.low[0] == pytest.approx(expected.low_slope) and fit.high[0] == pytest.approx(expected.high_slope)
    assert fit.points[0] == 24


def test_rows_are_independent_series_and_nan_points_are_left_out() -> None:
    x = np.tile(np.arange(10.0), (3, 1))
    y = np.stack([2 * x[0] + 1, -x[1], np.full(10, 5.0)])
    y[0, [2, 7]] = np.nan
    fit = theil_sen(x, y)

    assert fit.slope.tolist() == [2.0, -1.0, 0.0]
    assert fit.intercept.tolist() == [1.0, 0.0, 5.0]
    assert fit.points.tolist() == [8, 10, 10]


@pytest.mark.parametrize(("trend", "low", "high"), [(1.0, 0.99, 1.0), (0.0, 0.0, 0.9), (-1.0, 0.0, 0.01)])
def test_confidence_that_the_slope_is_above_zero(trend: float, low: float, high: float) -> None:
    rng = np.random.default_rng(4)
    x = np.arange(24.0)
    y = trend * x + rng.normal(0, 2, 24)
    confidence = float(theil_sen(x[None], y[None]).confidence[0])
    assert low <= confidence <= high


def test_confidence_grows_with_the_evidence() -> None:
    rng = np.random.default_rng(5)
    x = np.arange(30.0)
    noise = rng.normal(0, 3, 30)
    confidences = [float(theil_sen(x[None], (slope * x + noise)[None]).confidence[0]) for slope in (0.02, 0.1, 0.5)]
    assert confidences == sorted(confidences) and confidences[-1] > 0.999


def test_blocks_compare_points_only_within_a_block() -> None:
    x = np.arange(24.0)[None]
    y = (x % 8) * 2.0  # a sawtooth at large scale: each block rises, the series as a whole barely
    fit = theil_sen(x, y, block=(x // 8).astype(np.int64))
    assert fit.slope[0] == 2.0 and fit.low[0] == 2.0 and fit.intercept[0] == -32.0  # the last block's line
    assert theil_sen(x, y).slope[0] < 0.5


def test_too_few_points_give_nan_not_an_error() -> None:
    fit = theil_sen(np.array([[1.0, np.nan], [2.0, 2.0]]), np.array([[1.0, 2.0], [1.0, 3.0]]))
    assert np.isnan(fit.slope).all() and np.isnan(fit.confidence).all() and fit.points.tolist() == [1, 2]


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="2-D"):
        theil_sen(np.arange(3.0), np.arange(3.0))
    with pytest.raises(ValueError, match="significance"):
        theil_sen(np.zeros((1, 3)), np.zeros((1, 3)), significance=1.5)
