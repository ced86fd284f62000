"""Defensive readers of model.json / fleet.json values.

The documents may come from another engine version, be hand-edited or carry
hostile telemetry, so a value of the wrong type reads as "absent" instead of
raising. Sequences may be lists (parsed JSON) or tuples/arrays (an in-memory
document that has not been through JSON yet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` as a list if it is a list, tuple or 1-d array, else an empty list."""
    if isinstance(value, list):
        return value
    if isinstance(value, tuple) or (isinstance(value, np.ndarray) and value.ndim == 1):
        return list(value)
    return []


def is_sequence(value: Any) -> bool:
    return isinstance(value, list | tuple) or (isinstance(value, np.ndarray) and value.ndim == 1)


def as_int(value: Any) -> int | None:
    """``value`` if it is an int (numpy ints included, bools not), else None."""
    if isinstance(value, bool | np.bool_):
        return None
    return int(value) if isinstance(value, int | np.integer) else None


def rank_key(key: Any) -> int | None:
    """A rank-keyed map's key (``"3"`` after JSON, ``3`` before) as an int; None for anything else."""
    if isinstance(key, str) and key.strip().lstrip("-").isdigit():
        return int(key)
    return as_int(key)
