"""Building the canonical events DataFrame (one row per event, :data:`COLUMNS`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.records import COLUMNS, COUNTER_COLUMNS, INT_COLUMNS, STRING_COLUMNS

STRING_DTYPE = pd.StringDtype("pyarrow", na_value=np.nan)


def _object_array(values: Sequence[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


def frame_from_columns(columns: Mapping[str, Any]) -> pd.DataFrame:
    """A canonical frame from per-column sequences or arrays (all the same length).

    Counter columns accept ``pandas.arrays.IntegerArray`` or sequences with
    ``None``; string columns accept sequences with ``None`` or arrow arrays.
    """
    data: dict[str, Any] = {}
    for name in COLUMNS:
        values = columns[name]
        if name in STRING_COLUMNS:
            data[name] = pd.array(values, dtype=STRING_DTYPE, copy=False)
        elif name in INT_COLUMNS:
            data[name] = np.asarray(values, dtype=np.int64)
        elif name in COUNTER_COLUMNS:
            data[name] = pd.array(values, dtype="Int64", copy=False)
        elif name == "metadata":
            data[name] = values if isinstance(values, np.ndarray) else _object_array(values)
        else:
            data[name] = np.asarray(values, dtype=bool)
    return pd.DataFrame(data, copy=False)


def frame_from_rows(rows: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """A canonical frame from rows in :data:`COLUMNS` order."""
    if not rows:
        return empty_frame()
    transposed = list(zip(*rows, strict=True))
    return frame_from_columns(dict(zip(COLUMNS, transposed, strict=True)))


def empty_frame() -> pd.DataFrame:
    return frame_from_columns({name: [] for name in COLUMNS})


def concat_frames(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate canonical frames in order, with a fresh 0..n-1 index."""
    parts = [frame for frame in frames if len(frame)]
    if not parts:
        return empty_frame()
    if len(parts) == 1:
        return parts[0].reset_index(drop=True)
    return pd.concat(parts, ignore_index=True)
