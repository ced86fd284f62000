"""Column-wise building blocks of the columnar fast path: nulls, blanks, ints, tokens, errors.

Every function takes an Arrow column (an ``Array`` or a ``ChunkedArray``, as
``pyarrow.json`` returns it) and answers with numpy: row positions (sorted
``int64``) for rare conditions, boolean masks for whole-column ones.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stormwatch.events.collective_tokens import COLLAPSED_PATTERN, has_collective_token
from stormwatch.events.frame import sole_string

Column: TypeAlias = pa.Array | pa.ChunkedArray
#: String columns with at most this many distinct values are checked value by value.
FEW_DISTINCT = 256
_NO_ROWS = np.zeros(0, dtype=np.int64)


class Errors:
    """The first broken rule of each row, in the order the rules are added."""

    def __init__(self, size: int) -> None:
        self.codes = np.zeros(size, dtype=np.int32)
        self.texts: list[str] = [""]

    def add(self, rows: np.ndarray, message: str) -> None:
        """Mark ``rows`` (a boolean mask, or row positions) as breaking the rule ``message``."""
        if rows.dtype == np.bool_:
            rows = np.flatnonzero(rows)
        if rows.size == 0:
            return
        fresh = rows[self.codes[rows] == 0]
        if fresh.size:
            self.texts.append(message)
            self.codes[fresh] = len(self.texts) - 1

    def bad_rows(self) -> np.ndarray:
        return np.flatnonzero(self.codes)

    def message(self, row: int) -> str:
        return self.texts[int(self.codes[row])]


def rows_mask(rows: np.ndarray, size: int) -> np.ndarray:
    """A boolean mask of ``size`` rows, true at ``rows``."""
    mask = np.zeros(size, dtype=bool)
    mask[rows] = True
    return mask


def null_rows(column: Column) -> np.ndarray:
    """Positions of the null rows."""
    if column.null_count == 0:
        return _NO_ROWS
    return np.flatnonzero(np.asarray(column.is_null()))


def int_values(column: Column, *, fill: int) -> np.ndarray:
    """An int64 column as a writable numpy array (a copy), nulls replaced by ``fill``."""
    if column.null_count:
        column = column.fill_null(fill)
    return column.to_numpy().astype(np.int64, copy=True)


def _matching_rows(column: Column, values: list[str]) -> np.ndarray:
    if not values:
        return _NO_ROWS
    return np.flatnonzero(np.asarray(pc.fill_null(pc.is_in(column, value_set=pa.array(values, column.type)), False)))


def blank_rows(column: Column) -> np.ndarray:
    """Positions of the rows holding an empty or all-whitespace string (null is not blank).

    Whitespace is Python's (``str.strip``), which Arrow's ``utf8_trim_whitespace`` matches.
    """
    distinct = pc.unique(column)
    if len(distinct) <= FEW_DISTINCT:
        return _matching_rows(column, [text for text in distinct.to_pylist() if text is not None and not text.strip()])
    trimmed = pc.utf8_trim_whitespace(column)
    return np.flatnonzero(np.asarray(pc.fill_null(pc.equal(pc.binary_length(trimmed), 0), False)))


def _string_mask(column: Column, size: int) -> np.ndarray:
    sole = sole_string(column)
    if sole is not None:
        return np.full(size, has_collective_token(sole), dtype=bool)
    distinct = pc.unique(column)
    if len(distinct) <= FEW_DISTINCT:
        hits = [text for text in distinct.to_pylist() if text is not None and has_collective_token(text)]
        return rows_mask(_matching_rows(column, hits), size)
    lowered = pc.utf8_lower(column)
    collapsed = pc.replace_substring(pc.replace_substring(lowered, "-", ""), "_", "")
    return np.asarray(pc.fill_null(pc.match_substring_regex(collapsed, COLLAPSED_PATTERN), False))


def _chunks(column: Column) -> list[pa.Array]:
    """The column's arrays (Arrow cannot combine chunks of a dictionary of structs)."""
    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]


def decoded(column: Column) -> Column:
    """A dictionary-encoded column as plain values (other columns as they are)."""
    if not pa.types.is_dictionary(column.type):
        return column
    return pa.chunked_array([chunk.dictionary.take(chunk.indices) for chunk in _chunks(column)],
                            type=column.type.value_type)


def value_type(column: Column) -> pa.DataType:
    """The type of a column's values (a dictionary-encoded column: its dictionary's)."""
    return column.type.value_type if pa.types.is_dictionary(column.type) else column.type


def collective_mask(column: Column) -> np.ndarray:
    """Rows with a collective token in any string value of a (nested) column.

    ``has_collective_token`` strips and lower-cases, so the regex on the
    collapsed lower-case text (whitespace kept) finds exactly the same rows.
    Nested types are walked with a stack (any depth), each nested array carrying
    the top-level row of each of its values.
    """
    if pa.types.is_dictionary(column.type):  # each distinct value once, then by index
        parts = [np.zeros(0, dtype=bool)]
        for chunk in _chunks(column):
            per_value = collective_mask(chunk.dictionary) if len(chunk.dictionary) else np.zeros(1, dtype=bool)
            indices = chunk.indices
            parts.append(per_value[int_values(indices, fill=0)] & ~rows_mask(null_rows(indices), len(chunk)))
        return np.concatenate(parts)
    found = np.zeros(len(column), dtype=bool)
    pending: list[tuple[Column, np.ndarray | None]] = [(column, None)]  # None: rows are top-level rows
    while pending:
        array, rows = pending.pop()
        array_type = array.type
        if pa.types.is_string(array_type) or pa.types.is_large_string(array_type):
            hits = np.flatnonzero(_string_mask(array, len(array)))
            found[hits if rows is None else rows[hits]] = True
        elif pa.types.is_struct(array_type):
            pending.extend((child, rows) for child in array.flatten())
        elif pa.types.is_list(array_type) or pa.types.is_large_list(array_type):
            parents = np.asarray(pc.list_parent_indices(array))
            pending.append((pc.list_flatten(array), parents if rows is None else rows[parents]))
    return found
