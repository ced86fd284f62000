"""The columnar fast path of JSON Lines: schema v2/v3 lines parsed by Arrow, validated per column.

:mod:`stormwatch.formats.arrow_reader` parses the whole buffer into typed columns;
:mod:`stormwatch.formats.table_events` applies stormlog's rules to whole columns.
This module answers, from the raw lines, what the table cannot (see ``_RawLines``).

Arrow cannot tell an absent key from an explicit ``null``; where stormlog's
rules tell them apart (nullable required fields, ``rank`` and friends, unknown
fields), the raw lines of the null rows are searched, all at once, for the key as
a key: ``{`` or ``,``, the quoted name, ``:``. Inside a JSON string every quote is
escaped, so only a real key matches; only when the same name is also a key nested
in the file's metadata are the matching lines parsed to tell the two apart.

Returns ``None`` when Arrow refuses the buffer (a malformed line, a value of the
wrong JSON type, metadata that is not an object or whose shape changes between
lines, bytes that are not UTF-8, lines it would crash on) or yields a row count
other than the number of non-blank lines (two records on one line): the caller
then parses every line on its own, which finds and names the culprits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from stormwatch.formats.arrow_reader import read_table
from stormwatch.formats.column_checks import int_values
from stormwatch.formats.json_value import parse_json_value
from stormwatch.formats.lines import Buffer, LineIndex
from stormwatch.formats.table_events import table_events

#: Names a key regex can hold verbatim (JSON writes them unescaped); others take the parsing path.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")
_SPACE = "[ \t\r\n]*"


@dataclass(frozen=True)
class ColumnarResult:
    """Valid fast rows, where they sit, and the lines left for one-by-one parsing.

    ``positions`` and ``rest_positions`` index the caller's :class:`LineIndex`.
    """

    frame: pd.DataFrame
    positions: np.ndarray
    rest_positions: np.ndarray
    problems: tuple[tuple[int, str], ...]


def nested_names(schema: pa.Schema) -> frozenset[str] | None:
    """Every key name that occurs below the top level of the table's objects (any depth);
    None when one is not valid UTF-8 (Arrow lets such names through): then any may be nested."""
    names: set[str] = set()
    pending = [field.type for field in schema]
    while pending:
        kind = pending.pop()
        if pa.types.is_struct(kind):
            for index in range(kind.num_fields):
                try:
                    names.add(kind.field(index).name)
                except UnicodeDecodeError:
                    return None
                pending.append(kind.field(index).type)
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
            pending.append(kind.value_type)
    return frozenset(names)


class _RawLines:
    """The raw text of chosen lines: ``positions`` map table rows to line positions."""

    def __init__(self, data: Buffer, lines: LineIndex, positions: np.ndarray, nested: frozenset[str] | None) -> None:
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
            if self.nested is not None and key not in self.nested:
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
        and the rows whose line the JSON parsers refuse although Arrow read it, with why."""
        out = np.full(size, None, dtype=object)
        refused: list[tuple[int, str]] = []
        starts, ends = self.lines.starts, self.lines.ends
        for row in rows.tolist():
            line = self.positions[row]
            try:
                out[row] = parse_json_value(self.data[starts[line] : ends[line]]).get("metadata")
            except (ValueError, UnicodeDecodeError) as exc:  # a byte order mark Arrow skips, say
                refused.append((row, f"malformed JSON ({exc})"))
        return out, refused



def columnar_events(
    data: Buffer, lines: LineIndex, *, default_session_id: str, arrow_threads: bool = True
) -> ColumnarResult | None:
    """Schema v2/v3 rows of a JSONL buffer as canonical events (see module doc);
    ``arrow_threads`` as :func:`~stormwatch.formats.arrow_reader.read_table`'s ``threads``."""
    table = read_table(data, lines, threads=arrow_threads)
    if table is None or table.num_rows != lines.count:
        return None
    version = int_values(table.column("schema_version"), fill=-1)
    fast = (version == 2) | (version == 3)
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
