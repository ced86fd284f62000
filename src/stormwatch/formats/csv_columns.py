"""The cell rules of CSV exports, one cell at a time and over whole Arrow columns of cell texts.

Today's reader (:mod:`stormwatch.formats.csv_export`) strips every cell and reads
a blank one as None; integers by :func:`parse_int_cell` (exact for integer text,
else truncated through ``float``), metadata by :func:`parse_metadata_cell`. The
column functions give the same values for a whole column at once, and name the
rows whose cell they cannot give (a cell that is no number, or one outside
int64): those rows take the row-by-row path, which reports them as today.

Arrow's casts stand in for Python's parsers where they agree: a string to
``int64`` cast reads exactly the decimal integers ``int`` reads (and ``0x``
hexadecimal, which ``int`` refuses: such columns are checked), a string to
``float64`` cast reads a subset of what ``float`` reads, correctly rounded as
``float`` is (``nan(...)`` aside, which is no integer either way). Everything
else is left to the Python rules, once per distinct text.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stormwatch.events.collective_tokens import has_collective_token_in_values
from stormwatch.events.schema import INT64_MAX, INT64_MIN
from stormwatch.formats.column_checks import collective_mask

_MAX_LITERAL_CHARS = 1 << 20
#: A number read through ``float`` as less than this (in magnitude) is one that ``int`` would
#: read the same (integers from 2**53 up round to 2**53 or more).
_EXACT_IN_FLOAT = float(2**53)
_DECIMAL = re.compile("-?[0-9]+")
#: What may stand between the strings of such a literal (possessive: no backtracking).
_OUTSIDE = re.compile(r"(?:[ \t\r\n{}\[\],:]|None|True|False|-?[0-9]++(?:\.[0-9]++)?+(?:[eE][+-]?[0-9]++)?+)*+")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
_WORDS = {"None": "null", "True": "true", "False": "false"}
_UNREAD = object()
#: Arrow's work on a struct grows with the square of its depth: deeper metadata is read row by row.
_MAX_DEPTH = 32
_ARROW_ERRORS = (pa.ArrowException, ValueError, TypeError, OverflowError, RecursionError)


def parse_metadata_cell(text: str) -> dict[str, Any]:
    """A metadata cell as a dict: JSON, else a Python literal, else empty."""
    return read_metadata_cell(text)[0]


def read_metadata_cell(text: str) -> tuple[dict[str, Any], bool]:
    """:func:`parse_metadata_cell`'s dict, and whether stormlog reads the cell as that same
    object: stormlog (0.3.5 and 0.4.3) tries JSON only and reads anything else as ``{}``,
    so it loses the Python literals its own exporters write."""
    for parse in (json.loads, ast.literal_eval):
        if parse is ast.literal_eval and len(text) > _MAX_LITERAL_CHARS:
            break
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if not isinstance(value, dict):
            return {}, True
        return value, parse is json.loads
    return {}, True


# Trackers write Python literals; read as JSON they skip ast (see bench/README.md, tricks_bench.py literal-json).
def metadata_dict(text: str) -> dict[str, Any]:
    """:func:`parse_metadata_cell`'s dict, the Python literals trackers write read as JSON."""
    value = _literal_as_json(text)
    if value is _UNREAD:
        return parse_metadata_cell(text)
    return value if isinstance(value, dict) else {}


def _literal_as_json(text: str) -> Any:
    """A Python literal of JSON's shape (single-quoted strings without quotes, backslashes or
    control characters; ``None``/``True``/``False``; JSON's numbers) read by ``json.loads`` after
    the quotes and words are swapped: tokens that mean the same in both, so when ``json``
    reads the result it is ``ast.literal_eval``'s. Anything else: :data:`_UNREAD`."""
    if '"' in text or "\\" in text or len(text) > _MAX_LITERAL_CHARS:
        return _UNREAD
    parts = text.split("'")
    outside = " ".join(parts[0::2])  # between the strings
    if not len(parts) % 2 or not _OUTSIDE.fullmatch(outside) or _CONTROL.search(text):
        return _UNREAD
    if any(text.count(word) != outside.count(word) for word in _WORDS):  # a word inside a string
        return _UNREAD
    swapped = text.replace("'", '"')
    for word, value in _WORDS.items():
        swapped = swapped.replace(word, value)
    try:
        return json.loads(swapped)
    except (ValueError, RecursionError):
        return _UNREAD


def parse_int_cell(text: str) -> int:
    """Exact for integer text; other numbers truncate toward zero as stormlog does."""
    try:
        return int(text)
    except ValueError:
        return int(float(text))


def string_column(texts: pa.ChunkedArray) -> pa.ChunkedArray:
    """Cell texts stripped (``str.strip``, which ``utf8_trim_whitespace`` matches); blank ones null."""
    if texts.null_count == len(texts):
        return texts
    trimmed = pc.utf8_trim_whitespace(texts)
    blank = pc.equal(pc.binary_length(trimmed), 0)
    if pc.any(blank).as_py():
        trimmed = pc.if_else(blank, pa.scalar(None, trimmed.type), trimmed)
    return trimmed


def _python_ints(texts: pa.Array, rows: np.ndarray, values: np.ndarray, valid: np.ndarray, bad: np.ndarray) -> None:
    """:func:`parse_int_cell` on the stripped texts of ``rows``, once per distinct text: the
    value, or null for a blank text, or ``bad`` for one that is no number or outside int64."""
    chosen = texts.take(pa.array(rows))
    distinct = pc.unique(chosen)
    numbers = np.zeros(len(distinct), dtype=np.int64)
    blank = np.zeros(len(distinct), dtype=bool)
    broken = np.zeros(len(distinct), dtype=bool)
    for index, text in enumerate(distinct.to_pylist()):
        stripped = text.strip()
        if not stripped:
            blank[index] = True
            continue
        try:
            number = parse_int_cell(stripped)
        except (ValueError, OverflowError):
            broken[index] = True
            continue
        if INT64_MIN <= number <= INT64_MAX:
            numbers[index] = number
        else:
            broken[index] = True
    codes = np.asarray(pc.index_in(chosen, value_set=distinct))
    values[rows] = numbers[codes]
    valid[rows] = ~blank[codes]
    bad[rows] = broken[codes]


def int_column(texts: pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """A column of cell texts as ``int64`` (null where blank), and a mask of the rows whose cell
    is no number or lies outside int64 (their value is left null)."""
    size = len(texts)
    bad = np.zeros(size, dtype=bool)
    if texts.null_count == size:
        return pa.nulls(size, pa.int64()), bad
    texts = texts.combine_chunks()
    # Cast at once only a column whose first cell is decimal: a failed cast costs more than the float
    # path (see bench/README.md, shapes_bench.py).
    if _DECIMAL.fullmatch(pc.first(texts).as_py()):
        try:
            cast = pc.cast(texts, pa.int64())
        except pa.ArrowInvalid:
            pass
        else:
            if not any(pc.any(pc.starts_with(texts, prefix)).as_py() for prefix in ("0x", "0X")):
                return cast, bad
    valid = np.asarray(texts.is_valid())
    values = np.zeros(size, dtype=np.int64)
    try:
        floats = pc.cast(texts, pa.float64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:
        leftover = valid.copy()
    else:
        with np.errstate(invalid="ignore"):
            exact = np.abs(floats) < _EXACT_IN_FLOAT  # false where null (NaN) or not finite
        values[exact] = floats[exact].astype(np.int64)  # truncates toward zero, as int() does
        leftover = valid & ~exact
    if leftover.any():
        _python_ints(texts, np.flatnonzero(leftover), values, valid, bad)
    return pa.array(values, mask=~valid | bad), bad


def _not_json(text: str) -> bool:
    """Whether ``text`` is no JSON. Of a cell :func:`metadata_dict` read as a non-empty dict, that is
    what stormlog loses: it parses JSON only, so a Python literal (what its exporters write) is ``{}``
    to it (:func:`read_metadata_cell`, without parsing the literal a second time)."""
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def _struct_of(dicts: list[dict[str, Any] | None]) -> pa.Array | None:
    """The distinct metadata as one struct array, when Arrow can hold them all in one type and
    :func:`collective_mask` finds in it exactly the collective tokens the row-by-row rule finds
    (Arrow's lower-casing differs from Python's beyond ASCII, so the two are compared); else None."""
    try:
        array = pa.array(dicts) if any(d is not None for d in dicts) else pa.nulls(len(dicts), pa.struct([]))
    except _ARROW_ERRORS:
        return None
    if not pa.types.is_struct(array.type) or _depth(array.type) > _MAX_DEPTH:
        return None
    expected = np.array([d is not None and has_collective_token_in_values(d) for d in dicts], dtype=bool)
    return array if np.array_equal(collective_mask(array), expected) else None


def _depth(kind: pa.DataType) -> int:
    """How deeply a type nests (a flat struct: 1)."""
    deepest, pending = 0, [(kind, 0)]
    while pending:
        kind, depth = pending.pop()
        deepest = max(deepest, depth)
        pending.extend((kind.field(index).type, depth + 1) for index in range(kind.num_fields))
    return deepest


class MetadataColumn:
    """A metadata column parsed once per distinct cell text: ``dicts`` (None for a blank cell),
    ``codes`` (each row's entry of ``dicts``, -1 for an empty cell), ``struct``, the
    column as table_events reads it (dictionary-encoded: each distinct struct once), and
    ``unread``, per row, whether stormlog reads its cell as ``{}`` (a Python literal)."""

    def __init__(self, dicts: list[dict[str, Any] | None], codes: np.ndarray, struct: pa.Array,
                 unread: np.ndarray) -> None:
        self.dicts, self.codes, self.struct, self.unread = dicts, codes, struct, unread

    @classmethod
    def parse(cls, texts: pa.ChunkedArray) -> MetadataColumn | None:
        encoded = pc.dictionary_encode(texts.combine_chunks())
        dicts: list[dict[str, Any] | None] = []
        lost: list[bool] = []
        for text in encoded.dictionary.to_pylist():
            stripped = text.strip()
            found = metadata_dict(stripped) if stripped else None
            dicts.append(found)
            lost.append(bool(found) and _not_json(stripped))
        distinct = _struct_of(dicts)
        if distinct is None:
            return None
        indices = encoded.indices
        codes = (indices.fill_null(-1) if indices.null_count else indices).to_numpy().astype(np.int64)
        unread = np.append(np.array(lost, dtype=bool), False)[codes]  # code -1 (empty cell): read as empty
        # Dictionary-encoded: table_events scans each distinct struct once (see bench/README.md, shapes_bench.py).
        return cls(dicts, codes, pa.DictionaryArray.from_arrays(indices, distinct), unread)

    def filter(self, keep: np.ndarray) -> MetadataColumn:
        return MetadataColumn(self.dicts, self.codes[keep], self.struct.filter(pa.array(keep)), self.unread[keep])
