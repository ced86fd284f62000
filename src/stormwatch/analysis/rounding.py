"""Python's ``round(value, places)`` over whole float64 arrays, with the same results.

``round`` rounds the exact binary value of a float to ``places`` decimals, half to
even, and returns the float nearest that decimal. Scaling by ``10**places`` and
rounding to an integer agrees wherever the scaled value is not within a few
units in the last place of a half (the scaling's own error cannot then change
the direction), and dividing that integer by ``10**places`` is then the nearest
float to the decimal, as ``round`` gives. The few values near a half, and values
too large for the scaled integer to be exact, are rounded by ``round`` itself.
"""

from __future__ import annotations

import numpy as np

#: Scaled values this close (relative) to a half are left to ``round``: far wider than
#: the scaling's error of one unit in the last place (~1.1e-16 relative).
_NEAR_HALF = 1e-9
#: Above this magnitude a scaled float64 has no fractional bits to round.
_EXACT_LIMIT = 2.0**52


def round_like_python(values: np.ndarray, places: int) -> np.ndarray:
    """``[round(v, places) for v in values]`` as a float64 array (NaN and infinities pass through)."""
    values = np.asarray(values, dtype=np.float64)
    scale = 10.0**places
    scaled = values * scale
    rounded = np.rint(scaled) / scale
    with np.errstate(invalid="ignore"):  # inf - inf for infinities, which pass through below
        distance = np.abs(np.abs(scaled - np.floor(scaled)) - 0.5)
    doubtful = np.flatnonzero(
        np.isfinite(scaled)
        & ((distance <= _NEAR_HALF * np.maximum(1.0, np.abs(scaled))) | (np.abs(scaled) >= _EXACT_LIMIT))
    )
    if doubtful.size:
        rounded[doubtful] = [round(value, places) for value in values[doubtful].tolist()]
    passthrough = ~np.isfinite(values)
    if passthrough.any():
        rounded[passthrough] = values[passthrough]
    return rounded
