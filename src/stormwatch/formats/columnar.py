"""The columnar fast path of JSON Lines: schema v2/v3/v4 lines parsed by Arrow, validated per column.

:mod:`stormwatch.formats.arrow_reader` parses the whole buffer into typed columns;
:mod:`stormwatch.formats.table_events` applies stormlog's rules to whole columns.
This module answers, from the raw lines, what the table cannot (see ``_RawLines``).

Arrow cannot tell an absent key from an explicit ``null``; where stormlog's
rules tell them apart (nullable required fields, ``rank`` and friends, unknown
fields), the raw lines of the null rows are searched, all at once, for the key as
a key: ``{`` or ``,``, the quoted name, ``:``. Inside a JSON string every quote is
escaped, so only a real key matches; only when the same name is also a key nested
in the file's metadata are the matching lines parsed to tell the two apart.

Rows that keep their metadata ``dict`` (every v4 row) share one per distinct
metadata text (see ``_SharedMetadata``): one line is parsed, and every other line
holding the same ``"metadata": ...`` text, byte for byte, gets the same ``dict``.

Returns ``None`` when Arrow refuses the buffer (a malformed line, a value of the
wrong JSON type, metadata that is not an object or whose shape changes between
lines, bytes that are not UTF-8, lines it would crash on) or yields a row count
other than the number of non-blank lines (two records on one line): the caller
then parses every line on its own, which finds and names the culprits.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from stormwatch.formats.arrow_reader import nested_names, read_table
from stormwatch.formats.column_checks import int_values
from stormwatch.formats.json_value import parse_json_value
from stormwatch.formats.lines import Buffer, LineIndex
from stormwatch.formats.table_events import table_events

#: Names a key regex can hold verbatim (JSON writes them unescaped); others take the parsing path.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")
_SPACE = "[ \t\r\n]*"
#: The top-level metadata key of a line (when "metadata" names no nested key): the ``{`` or ``,``
#: before it (grouped with the name), then the colon.
_METADATA_KEY = re.compile(f'([{{,]{_SPACE}"metadata"){_SPACE}:{_SPACE}')
_DECODER = json.JSONDecoder()
#: Fewer rows than this are parsed one by one: cheaper than a search over their lines.
_SHARE_MIN_ROWS = 8
#: Searches in a row that find no other line with the same metadata before sharing gives up.
_SHARE_MISSES = 3


@dataclass(frozen=True)
class ColumnarResult:
    """Valid fast rows, where they sit, and the lines left for one-by-one parsing.

    ``positions`` and ``rest_positions`` index the caller's :class:`LineIndex`.
    """

    frame: pd.DataFrame
    positions: np.ndarray
    rest_positions: np.ndarray
    problems: tuple[tuple[int, str], ...]


class _RawLines:
    """The raw text of chosen lines: ``positions`` map table rows to line positions."""

    def __init__(self, data: Buffer, lines: LineIndex, positions: np.ndarray, nested: frozenset[str]) -> None:
        self.data, self.lines, self.positions, self.nested = data, lines, positions, nested
        self._array: pa.Array | None = None

    def has_key(self, rows: np.ndarray, key: str) -> np.ndarray:
        """For the given table rows, whether the line's top-level object holds ``key`` (see the
        module doc: one regex over the rows' lines; parsing only where ``key`` is also nested)."""
        if rows.size == 0:
            return np.zeros(0, dtype=bool)
        if self._array is None:
            offsets = np.concatenate([self.lines.starts, [len(self.data)]]).astype(np.int64)
            buffers = [None, pa.py_buffer(offsets), pa.py_buffer(self.data)]
            self._array = pa.LargeBinaryArray.from_buffers(pa.large_binary(), self.lines.count, buffers)
        taken = self._array.take(pa.array(self.positions[rows]))
        if _PLAIN_NAME.fullmatch(key):
            found = np.asarray(pc.match_substring_regex(taken, f'[{{,]{_SPACE}"{key}"{_SPACE}:'), dtype=bool)
            if key not in self.nested:
                return found
        else:
            found = np.asarray(pc.match_substring(taken, f'"{key}"'), dtype=bool)
        starts, ends = self.lines.starts, self.lines.ends
        for index in np.flatnonzero(found).tolist():
            line = self.positions[rows[index]]
            try:
                record = parse_json_value(self.data[starts[line] : ends[line]])
            except (ValueError, UnicodeDecodeError):
                continue  # unreadable: keep the conservative answer
            found[index] = isinstance(record, dict) and key in record
        return found

    def metadata(self, rows: np.ndarray, size: int) -> tuple[np.ndarray, list[tuple[int, str]]]:
        """The metadata ``dict`` of the given rows, parsed from their lines (None elsewhere),
        and the rows whose line the JSON parsers refuse although Arrow read it, with why.
        Lines whose metadata text is the same share one ``dict`` (see :class:`_SharedMetadata`)."""
        out = np.full(size, None, dtype=object)
        refused: list[tuple[int, str]] = []
        if rows.size >= _SHARE_MIN_ROWS and "metadata" not in self.nested:
            rows = _SharedMetadata(self, rows).fill(out, refused)
        for row in rows.tolist():
            self.parse_into(out, row, refused)
        return out, refused

    def line(self, row: int) -> bytes:
        line = self.positions[row]
        return bytes(self.data[self.lines.starts[line] : self.lines.ends[line]])

    def parse_into(self, out: np.ndarray, row: int, refused: list[tuple[int, str]]) -> bool:
        """``out[row]``: the metadata of ``row``'s line; False (and ``refused`` told why) when unreadable."""
        try:
            out[row] = parse_json_value(self.line(row)).get("metadata")
        except (ValueError, UnicodeDecodeError) as exc:  # a byte order mark Arrow skips, say
            refused.append((row, f"malformed JSON ({exc})"))
            return False
        return True


def _metadata_text(line: bytes) -> tuple[bytes, bytes | None] | None:
    """The text of ``line``'s top-level metadata: from the ``{`` or ``,`` before the key to the
    value's end (to the line's end when only the closing brace follows), and the text up to the
    key's name (None when the metadata ends the line); None when not found."""
    try:
        text = line.decode("utf-8")
        match = _METADATA_KEY.search(text)
        if match is None:
            return None
        _, end = _DECODER.raw_decode(text, match.end())
    except (ValueError, RecursionError):
        return None
    if text[end:].strip(" \t\r\n") == "}":
        return text[match.start() :].encode(), None
    return text[match.start() : end].encode(), match.group(1).encode()


# v4 rows keep their metadata: one parse per distinct text (see bench/README.md, tricks_bench.py shared-metadata).
class _SharedMetadata:
    """One metadata ``dict`` for all the lines whose metadata text is the same, byte for byte.

    A line is parsed; the text of its metadata (from the ``{`` or ``,`` before the key to the
    value's end) is then looked for in every other line at once, at the place the line holds
    its metadata key: its last bytes when the metadata comes last, as stormlog's writers put
    it; else where the text up to the key's name first occurs (one search per buffer). Either
    place holds the top-level key: a quote after ``{`` or ``,`` starts a string
    (inside one it would be escaped), "metadata" names no nested key, and a value the line's
    last brace closes belongs to the top level. A JSON value ends where its text says, so a
    line holding the same text there holds the same metadata. This repeats while it pays.
    """

    def __init__(self, raw: _RawLines, rows: np.ndarray) -> None:
        self.raw, self.rows = raw, rows
        lines = raw.positions[rows]
        self.starts, self.ends = raw.lines.starts[lines], raw.lines.ends[lines]
        self.buffer = pa.py_buffer(raw.data)
        self.key_offsets: dict[bytes, np.ndarray] = {}

    def _slices(self, index: np.ndarray, begins: np.ndarray) -> pa.Array:
        """The chosen rows' lines from ``begins`` to their ends, as every other value of one array."""
        offsets = np.empty(2 * index.size + 1, dtype=np.int64)
        offsets[0:-1:2], offsets[1:-1:2] = begins, self.ends[index]
        offsets[-1] = offsets[-2] if index.size else 0
        buffers = [None, pa.py_buffer(offsets), self.buffer]
        return pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * index.size, buffers)

    def _holding(self, index: np.ndarray, text: bytes, key: bytes | None) -> np.ndarray:
        """Which of the rows ``index`` hold the metadata ``text`` (see :func:`_metadata_text`)."""
        starts, ends = self.starts[index], self.ends[index]
        if key is None:
            begins = np.maximum(ends - len(text), starts)
        else:
            if key not in self.key_offsets:
                found = pc.find_substring(self._slices(np.arange(self.rows.size), self.starts), key.decode())
                self.key_offsets[key] = np.asarray(found)[0::2]
            offsets = self.key_offsets[key][index]
            begins = np.where(offsets >= 0, starts + offsets, ends)
        return np.asarray(pc.starts_with(self._slices(index, begins), text.decode()), dtype=bool)[0::2]

    def fill(self, out: np.ndarray, refused: list[tuple[int, str]]) -> np.ndarray:
        """Fills ``out`` for the rows that share their metadata (and notes refused lines);
        returns the rows left to parse one by one."""
        left = np.arange(self.rows.size)
        misses = 0
        while left.size >= _SHARE_MIN_ROWS and misses < _SHARE_MISSES:
            pick = int(left[left.size // 2])  # not the first: a job's first line is seldom a sample
            row = int(self.rows[pick])
            left = left[left != pick]
            if not self.raw.parse_into(out, row, refused) or not isinstance(out[row], dict):
                continue
            found = _metadata_text(self.raw.line(row))
            same = self._holding(left, *found) if found is not None else np.zeros(left.size, dtype=bool)
            misses = 0 if same.any() else misses + 1
            out[self.rows[left[same]]] = out[row]
            left = left[~same]
        return self.rows[left]


def columnar_events(data: Buffer, lines: LineIndex, *, default_session_id: str) -> ColumnarResult | None:
    """Schema v2/v3/v4 rows of a JSONL buffer as canonical events (see module doc)."""
    table = read_table(data, lines)
    if table is None or table.num_rows != lines.count:
        return None
    version = int_values(table.column("schema_version"), fill=-1)
    fast = (version == 2) | (version == 3) | (version == 4)
    positions = np.flatnonzero(fast)
    rest_positions = np.flatnonzero(~fast)
    if positions.size < table.num_rows:
        table = table.filter(pa.array(fast))
    raw = _RawLines(data, lines, positions, nested_names(table.schema))
    events = table_events(table, raw, default_session_id=default_session_id)
    problems = tuple((int(lines.numbers[positions[row]]), reason) for row, reason in events.problems)
    return ColumnarResult(
        frame=events.frame, positions=positions[events.kept], rest_positions=rest_positions, problems=problems
    )
