"""Building the canonical events DataFrame (one row per event, :data:`COLUMNS`).

String columns are pandas ``Categorical``: a job repeats a handful of hosts,
job ids, collectors, session ids and event types across hundreds of thousands
of events, so each column holds small integer codes plus its distinct strings
(``str`` categories, missing values ``NaN``). Frames are combined with
:func:`concat_strings`, which unions the categories; a plain ``pandas.concat``
of frames whose categories differ would fall back to object columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from stormwatch.events.schema import COLUMNS, COUNTER_COLUMNS, INT_COLUMNS, STRING_COLUMNS

STRING_DTYPE = pd.StringDtype("pyarrow", na_value=np.nan)


def _object_array(values: Sequence[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


def _categories(values: Any) -> pd.Index:
    return pd.Index(values, dtype=STRING_DTYPE)


def sole_string(column: pa.Array | pa.ChunkedArray) -> str | None:
    """The string every row of an Arrow string column holds, when it has no nulls and
    one value throughout (the usual case for hosts, job ids, session ids); else None.

    One comparison per row against the first: no row is hashed.
    """
    textual = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
    if not textual or len(column) == 0 or column.null_count:
        return None
    first = column[0]
    return str(first.as_py()) if pc.all(pc.equal(column, first)).as_py() else None


def categorical(values: Any) -> pd.Categorical:
    """A string column as a ``Categorical`` with ``str`` categories (missing: NaN).

    Takes an Arrow string array (its dictionary encoding, no per-value Python
    object), a ``Categorical``, or any sequence of ``str`` and ``None``.
    """
    if isinstance(values, pd.Categorical) and isinstance(values.categories.dtype, pd.StringDtype):
        return values
    if isinstance(values, pd.api.extensions.ExtensionArray) and not isinstance(values, pd.Categorical):
        values = pa.array(values)
    if isinstance(values, pa.Array | pa.ChunkedArray):
        sole = sole_string(values)
        if sole is not None:
            return repeated_string(sole, len(values))
        encoded = pc.dictionary_encode(values)
        if isinstance(encoded, pa.ChunkedArray):
            if encoded.num_chunks == 0:
                return pd.Categorical.from_codes(np.zeros(0, dtype=np.int32), categories=_categories([]))
            dictionary = encoded.chunk(encoded.num_chunks - 1).dictionary  # every chunk holds the whole dictionary
            indices = pa.chunked_array([chunk.indices for chunk in encoded.chunks]).combine_chunks()
        else:
            dictionary, indices = encoded.dictionary, encoded.indices
        codes = (indices.fill_null(-1) if indices.null_count else indices).to_numpy()
        return pd.Categorical.from_codes(codes, categories=_categories(dictionary), validate=False)
    objects = _object_array(values)
    present = pd.notna(objects)
    codes = np.full(len(objects), -1, dtype=np.int64)
    distinct: list[str] = []
    if present.any():
        found, codes[present] = np.unique(objects[present].astype(str), return_inverse=True)
        distinct = found.tolist()
    return pd.Categorical.from_codes(codes, categories=_categories(distinct), validate=False)


def blank_positions(values: pd.Categorical) -> np.ndarray:
    """Rows holding an empty or all-whitespace string (``str.strip``; missing is not blank),
    found on the categories, so once per distinct value."""
    blank_codes = [code for code, value in enumerate(values.categories.tolist()) if not value.strip()]
    if not blank_codes:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.isin(values.codes, blank_codes))


def repeated_string(value: str, size: int) -> pd.Categorical:
    """``size`` rows all holding ``value`` (one category, codes all zero)."""
    return pd.Categorical.from_codes(np.zeros(size, dtype=np.int8), categories=_categories([value]), validate=False)


def _recode(codes: np.ndarray, lookup: list[int], code_type: type[np.signedinteger[Any]]) -> np.ndarray:
    """Codes into a part's categories as codes into the union's (``lookup[i]`` for category ``i``)."""
    if len(lookup) == 1 and (not len(codes) or int(codes.min()) == 0):  # one value, none missing: the usual part
        return np.full(len(codes), lookup[0], dtype=code_type)
    return np.array([*lookup, -1], dtype=code_type)[codes]  # code -1 (missing) picks the trailing -1


# Two array lookups per row, however many parts (see bench/README.md, tricks_bench.py recode-merge).
def concat_strings(arrays: Sequence[Any], order: np.ndarray | None = None) -> pd.Categorical:
    """String columns one after another, as one ``Categorical`` over the union of their
    values (in order of first appearance), then taken in ``order`` (None: as they are).

    Each part is recoded through a small table from its categories to the union's,
    so the work per row is two array lookups, whatever the number of parts.
    """
    parts = [categorical(array) for array in arrays]
    if len(parts) == 1 and order is None:
        return parts[0]
    union: dict[str, int] = {}
    lookups = [[union.setdefault(value, len(union)) for value in part.categories.tolist()] for part in parts]
    code_type = np.int8 if len(union) < 1 << 7 else np.int16 if len(union) < 1 << 15 else np.int32
    pairs = list(zip(lookups, parts, strict=True))
    codes = np.concatenate([_recode(part.codes, lookup, code_type) for lookup, part in pairs])
    if order is not None:
        codes = codes[order]
    # A part whose categories are the whole union, in its order, lends its dtype (cheaper than a new one).
    identity = list(range(len(union)))
    whole = next((part.dtype for lookup, part in pairs if lookup == identity), None)
    if whole is not None:
        return pd.Categorical.from_codes(codes, dtype=whole, validate=False)
    return pd.Categorical.from_codes(codes, categories=_categories(list(union)), validate=False)


def frame_from_columns(columns: Mapping[str, Any]) -> pd.DataFrame:
    """A canonical frame from per-column sequences or arrays (all the same length).

    Counter columns accept ``pandas.arrays.IntegerArray`` or sequences with
    ``None``; string columns accept sequences with ``None``, Arrow arrays or
    ``Categorical`` (see :func:`categorical`).
    """
    data: dict[str, Any] = {}
    for name in COLUMNS:
        values = columns[name]
        if name in STRING_COLUMNS:
            data[name] = categorical(values)
        elif name in INT_COLUMNS:
            data[name] = np.asarray(values, dtype=np.int64)
        elif name in COUNTER_COLUMNS:
            data[name] = pd.array(values, dtype="Int64", copy=False)
        elif name == "metadata":
            if isinstance(values, pd.api.extensions.ExtensionArray):
                values = values.to_numpy(dtype=object)
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
    columns: dict[str, Any] = {}
    for name in COLUMNS:
        if name in STRING_COLUMNS:
            columns[name] = concat_strings([frame[name].array for frame in parts])
        else:
            columns[name] = pd.concat([frame[name] for frame in parts], ignore_index=True).array
    return frame_from_columns(columns)
