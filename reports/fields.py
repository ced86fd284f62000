"""Defensive readers of fleet.json and alerts.json values (and of telemetry's own: marker metadata).

fleet.json may come from another engine version, be hand-edited or carry hostile
telemetry, so a value of the wrong type reads as "absent" instead of raising. (A job
page reads model.json as a typed :class:`~stormwatch.outputs.document.JobDocument`,
validated when it is read.) Sequences may be lists or tuples/arrays.
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


def as_int(value: Any) -> int | None:
    """``value`` if it is an int (numpy ints included, bools not), else None."""
    if isinstance(value, bool | np.bool_):
        return None
    return int(value) if isinstance(value, int | np.integer) else None

