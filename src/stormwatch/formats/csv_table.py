"""The columnar path of CSV exports: cell texts read by ``pyarrow.csv``, typed per column,
validated by :func:`~stormwatch.formats.table_events.table_events`.

Every known column is read as text (an empty cell as null) and typed by the
rules of :mod:`stormwatch.formats.csv_columns`, ``metadata`` parsed once per
distinct cell. A CSV record has every column of the header, so a key is present
exactly when the header has its column.

:func:`columnar_csv` returns None (the caller then reads the file row by row, as
today) when the file is one this path does not take: Arrow refuses it (ragged
rows, bytes that are not UTF-8, quoting it cannot read), its first line is blank,
its header repeats a name, lacks a required field or holds one stormlog does not
know (every schema record of such a file is rejected), a cell is too long for
Python's ``csv`` module, or the distinct metadata do not make one struct type.
Otherwise it names the rows the row-by-row path must still take: records that
are not of schema v2/v3/v4, cells that are no number, and rows the columnar rules
reject (so that their warning is today's, word for word). A v4 row whose metadata
cell is a Python literal has its capabilities inferred as stormlog 0.4.3 does, which
reads such a cell as ``{}`` (:func:`~stormwatch.formats.csv_export.stormlog_capabilities`).
"""

from __future__ import annotations

import copy
import csv
import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from stormwatch.events.schema import KNOWN_FIELDS, REQUIRED_V3_FIELDS
from stormwatch.formats.arrow_reader import INT_FIELDS, SCHEMA, STRING_FIELDS, arrow_threads
from stormwatch.formats.csv_columns import MetadataColumn, int_column, string_column
from stormwatch.formats.table_events import table_events

_COLUMNS = frozenset({*KNOWN_FIELDS, "metadata"})
#: A v2 record has no session_id (stormlog fills it in): a CSV of v2 records may lack the column.
_REQUIRED_COLUMNS = frozenset(REQUIRED_V3_FIELDS) - {"session_id"}
#: By :func:`~stormwatch.formats.arrow_reader.arrow_threads`: on Arrow's thread pool, or on the
#: calling thread alone (a unit parsed beside others, as JSON Lines units are).
_READS = {threads: pcsv.ReadOptions(use_threads=threads) for threads in (True, False)}
_PARSE = pcsv.ParseOptions(newlines_in_values=True)
_CONVERT = pcsv.ConvertOptions(
    column_types={name: pa.large_string() for name in _COLUMNS},
    null_values=[""],
    strings_can_be_null=True,
    quoted_strings_can_be_null=True,
)


@dataclass(frozen=True)
class CsvColumnar:
    """What the columnar path made of a file: the events of the rows it kept (``kept``, their
    record positions, ascending), the rows left to the row-by-row path (``slow``, ascending),
    and every row's cell texts (``cells``) for those."""

    frame: pd.DataFrame
    kept: np.ndarray
    slow: np.ndarray
    cells: pa.Table


class _Header:
    """The RowSource of a CSV: a key is present in a row iff the header has its column;
    the metadata dicts come from the parsed distinct cells, shared by the rows of one cell
    until :func:`_unshared` gives each row that keeps one its own."""

    def __init__(self, names: list[str], metadata: MetadataColumn) -> None:
        self.names, self.meta = frozenset(names), metadata
        self.dicts = np.empty(len(metadata.dicts), dtype=object)
        self.dicts[:] = metadata.dicts

    def has_key(self, rows: np.ndarray, key: str) -> np.ndarray:
        return np.full(len(rows), key in self.names, dtype=bool)

    def metadata(self, rows: np.ndarray, size: int) -> tuple[np.ndarray, list[tuple[int, str]]]:
        out = np.full(size, None, dtype=object)
        codes = self.meta.codes[rows]
        found = codes >= 0
        out[rows[found]] = self.dicts[codes[found]]
        return out, []


def _unshared(frame: pd.DataFrame, parsed: list[dict[str, Any] | None]) -> pd.DataFrame:
    """``frame`` with each row still holding a parsed cell's dict given its own (the first row
    the parsed one, later rows a copy), as the row-by-row reader gives them. Rows whose v4
    capabilities were inferred hold a dict made for their group, shared as on the JSON Lines path:
    inferring per distinct cell, not per row, is why the dicts are handed out shared
    (bench/README.md, "v4 CSV on the columnar path")."""
    ids = {id(item) for item in parsed if item is not None}
    values = frame["metadata"].to_numpy(dtype=object, copy=True)
    handed: set[int] = set()
    changed = False
    for row, item in enumerate(values.tolist()):
        if item is None or id(item) not in ids:
            continue
        if id(item) in handed:
            values[row] = copy.deepcopy(item)
            changed = True
        handed.add(id(item))
    if not changed:
        return frame
    frame = frame.copy(deep=False)
    frame["metadata"] = values
    return frame


def read_cells(data: bytes) -> pa.Table | None:
    """The file's records as a table of cell texts (an empty cell null), or None when Arrow
    refuses it or the header is not one of a schema v2/v3 export (see the module doc)."""
    if not len(data) or data[:1] in (b"\n", b"\r"):
        return None
    try:
        table = pcsv.read_csv(
            pa.py_buffer(data), read_options=_READS[arrow_threads()], parse_options=_PARSE, convert_options=_CONVERT
        )
        names = table.column_names  # a header name that is not UTF-8 raises UnicodeDecodeError here
    except (pa.ArrowException, ValueError):
        return None
    if len(set(names)) != len(names) or not _REQUIRED_COLUMNS <= set(names) <= _COLUMNS:
        return None
    limit = csv.field_size_limit()
    if len(data) >= limit and any(_longest(table.column(name)) >= limit for name in names):
        return None  # the csv module stops reading there: today's reader reports it
    return table


def _longest(column: pa.ChunkedArray) -> int:
    longest = pc.max(pc.binary_length(column)).as_py()
    return 0 if longest is None else int(longest)


def _typed(cells: pa.Table) -> tuple[pa.Table, np.ndarray, MetadataColumn] | None:
    """The cells as the table table_events reads (:data:`SCHEMA` plus a metadata struct), a mask
    of the rows that must take the row-by-row path, and the parsed metadata."""
    size = cells.num_rows
    slow = np.zeros(size, dtype=bool)
    columns: dict[str, Any] = {}
    for name in STRING_FIELDS:
        present = name in cells.column_names
        columns[name] = string_column(cells.column(name)) if present else pa.nulls(size, pa.large_string())
    for name in INT_FIELDS:
        if name in cells.column_names:
            columns[name], bad = int_column(cells.column(name))
            slow |= bad
        else:
            columns[name] = pa.nulls(size, pa.int64())
    version = columns["schema_version"]
    # v4 rows too, capabilities inferred as 0.4.3 does (bench/README.md, "v4 CSV on the columnar path")
    slow |= ~np.asarray(pc.fill_null(pc.is_in(version, value_set=pa.array([2, 3, 4])), False))
    metadata = MetadataColumn.parse(cells.column("metadata"))
    if metadata is None:
        return None
    schema = pa.schema([*SCHEMA, pa.field("metadata", metadata.struct.type)])
    table = pa.Table.from_arrays([*(columns[field.name] for field in SCHEMA), metadata.struct], schema=schema)
    return table, slow, metadata


def columnar_csv(data: bytes, *, default_session_id: str) -> CsvColumnar | None:
    """The schema v2/v3 records of a CSV export (BOM already removed) as canonical events, and
    the rows left to the row-by-row path; None when the whole file is (see the module doc)."""
    cells = read_cells(data)
    if cells is None:
        return None
    typed = _typed(cells)
    if typed is None:
        return None
    table, slow, metadata = typed
    fast = np.flatnonzero(~slow)
    if fast.size < table.num_rows:
        keep = ~slow
        table, metadata = table.filter(pa.array(keep)), metadata.filter(keep)
    events = table_events(table, _Header(cells.column_names, metadata), default_session_id=default_session_id,
                          unread_metadata=metadata.unread)
    rejected = fast[[row for row, _ in events.problems]] if events.problems else np.zeros(0, dtype=np.int64)
    return CsvColumnar(
        frame=_unshared(events.frame, metadata.dicts), kept=fast[events.kept],
        slow=np.union1d(np.flatnonzero(slow), rejected), cells=cells,
    )


def record_lines(data: bytes) -> list[int] | None:
    """For every record, the line ``csv.DictReader`` reports it at (its ``line_num``: the line
    the record ends on; blank lines are no records); None if the csv module cannot read the
    file through."""
    reader = csv.reader(io.StringIO(data.decode("utf-8", errors="surrogateescape"), newline=""))
    try:
        next(reader, None)
        return [reader.line_num for row in reader if row]
    except csv.Error:
        return None


def row_cells(cells: pa.Table, rows: np.ndarray) -> list[dict[str, str]]:
    """The given records as ``csv.DictReader`` gives them (header name to cell text)."""
    names = cells.column_names
    taken = cells.take(pa.array(rows)).to_pylist()
    return [{name: "" if row[name] is None else row[name] for name in names} for row in taken]
