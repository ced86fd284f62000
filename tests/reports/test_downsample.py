"""Min/max bucket downsampling keeps spikes and bounds the output; SVG paths break on nulls."""

from __future__ import annotations

import numpy as np
import pytest

from stormwatch.reports.charts import svg_path
from stormwatch.reports.downsample import as_float, minmax_points, signed_extremes, value_at


@pytest.mark.parametrize("spike_at", [0, 1, 31_337, 99_998, 99_999])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_single_spike_survives_among_100k_samples(spike_at: int, sign: float) -> None:
    rng = np.random.default_rng(spike_at)
    times = np.arange(100_000, dtype=np.float64) * 0.01
    values = 256.0 + rng.normal(0, 2, 100_000)
    values[spike_at] = 256.0 + sign * 9000.0
    x, y = minmax_points(times, values, start=0.0, end=times[-1], buckets=400)
    assert len(x) == len(y) <= 800
    assert (y.max() if sign > 0 else y.min()) == values[spike_at]
    assert y.min() == values.min() and y.max() == values.max()
    spike_x = x[np.argmax(y) if sign > 0 else np.argmin(y)]
    assert abs(spike_x - times[spike_at]) <= (times[-1] / 400)


def test_short_timelines_are_drawn_as_they_are() -> None:
    times, values = np.array([0.0, 1.0, 2.0]), np.array([1.0, np.nan, 3.0])
    x, y = minmax_points(times, values, start=0.0, end=2.0, buckets=400)
    assert x.tolist() == [0.0, 1.0, 2.0]
    assert np.isnan(y[1]) and y[0] == 1.0 and y[2] == 3.0


def test_buckets_of_nulls_break_the_line_and_order_follows_the_bucket() -> None:
    times = np.arange(1000, dtype=np.float64)
    values = np.where(times < 500, 1000.0 - times, np.nan)  # falling, then null (a v4 counter that stopped)
    x, y = minmax_points(times, values, start=0.0, end=999.0, buckets=10)
    finite = y[np.isfinite(y)]
    assert np.isnan(y[-1]) and len(finite) == 10
    assert (finite[0::2] >= finite[1::2]).all()  # falling buckets draw max then min
    assert np.all(np.diff(x) >= 0)


def test_unsorted_input_is_sorted_first() -> None:
    times = np.array([3.0, 1.0, 2.0, 0.0])
    x, y = minmax_points(times, times * 10, start=0.0, end=3.0, buckets=400)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0] and y.tolist() == [0.0, 10.0, 20.0, 30.0]


def test_signed_extremes_keep_the_value_farthest_from_zero() -> None:
    times = np.arange(8, dtype=np.float64)
    values = np.array([1.0, -5.0, 2.0, 3.0, np.nan, np.nan, 0.0, 0.0])
    out = signed_extremes(times, values, start=0.0, end=8.0, buckets=4)
    assert out[0] == -5.0 and out[1] == 3.0 and np.isnan(out[2]) and out[3] == 0.0


def test_nulls_from_json_become_nan_and_nearest_value() -> None:
    values = as_float([1, None, 3])
    assert np.isnan(values[1])
    assert value_at(np.array([0.0, 1.0, 2.0]), values, 1.9) == 3.0
    assert np.isnan(value_at(np.array([]), np.array([]), 1.0))


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        ([0, 1, 2], [5, 6, 7], "M0 5 1 6 2 7"),
        ([0, 1, 2, 3], [5, 5, 5, 6], "M0 5 2 5 3 6"),  # inner points of a flat run dropped
        ([0, 1, 2, 3], [5, np.nan, 7, 8], "M0 5 h0.5M2 7 3 8"),  # a null breaks the line
        ([0.04, 1.26], [1.0, 2.0], "M0 1 1.3 2"),
        ([0], [np.nan], ""),
    ],
)
def test_svg_path(x: list[float], y: list[float], expected: str) -> None:
    assert svg_path(np.array(x, dtype=float), np.array(y, dtype=float)) == expected
