"""round_like_python against Python's round, value for value, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stormwatch.analysis.rounding import round_like_python


def _halves(places: int) -> list[float]:
    """Decimals that sit exactly on, or one float away from, a rounding half."""
    out = []
    for k in range(-300, 300, 7):
        half = (k + 0.5) / 10**places
        out += [half, math.nextafter(half, math.inf), math.nextafter(half, -math.inf)]
    return out


CASES = {
    "halves at 3 places": (_halves(3), 3),
    "halves at 4 places": (_halves(4), 4),
    "simple decimals": ([0.0, -0.0, 0.1, 0.15, 0.25, 0.35, 1.0005, 2.675, 0.6745, 1e-12], 3),
    "large magnitudes": ([1e15, 4.5e11 + 0.12345, 2.0**53, -(2.0**60) + 0.5, 1e300], 4),
    "non-finite": ([math.nan, math.inf, -math.inf, 1.23456], 4),
}


def _same(expected: list[float], got: np.ndarray) -> bool:
    return all(
        (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
        for a, b in zip(expected, got.tolist(), strict=True)
    )


@pytest.mark.parametrize("name", list(CASES))
def test_matches_round_on_chosen_values(name: str) -> None:
    values, places = CASES[name]
    expected = [v if not math.isfinite(v) else round(v, places) for v in values]
    assert _same(expected, round_like_python(np.array(values), places))


@pytest.mark.parametrize("places", [3, 4])
@pytest.mark.parametrize("seed", range(3))
def test_matches_round_on_random_values(places: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = np.concatenate([
        rng.uniform(0, 1, 20_000),
        rng.normal(0, 50, 20_000),
        np.round(rng.uniform(0, 10, 20_000), places + 1),  # many exact-looking halves
    ])
    expected = [round(v, places) for v in values.tolist()]
    assert _same(expected, round_like_python(values, places))
