"""CSV exports (stormlog trackers' ``export_events(..., "csv")``) to canonical events.

Differences from stormlog 0.3.5, on purpose: integers are exact (stormlog reads
them through ``float``, rounding nanosecond timestamps); ``metadata`` written as
a Python literal (what ``csv``/pandas make of a dict) is recovered with
``ast.literal_eval``, never ``eval``; bytes that are not UTF-8 drop only their
row; a byte-order mark is ignored. Schema-v4 rows (stormlog 0.4.3) keep the rest of
such metadata but not its ``memory_capabilities``: those are 0.4.3's, inferred from
the counters as 0.4.3 infers them (:func:`stormlog_capabilities`), so the model
sees the capabilities, and keeps the rows, that 0.4.3's does.

Files take the columnar path (:mod:`stormwatch.formats.csv_table`) where it can
take them; the rows it leaves (records that are not of schema v2/v3, cells that
are no number, rows it rejects), and whole files it cannot read, take the
row-by-row path (:func:`read_csv_rows`: ``csv.DictReader`` and
:func:`~stormwatch.events.records.normalise_record` per row), whose warnings name
each bad row's line as ``DictReader`` counts them.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from stormwatch.events.frame import concat_frames, frame_from_rows
from stormwatch.events.records import inferred_capabilities, normalise_record
from stormwatch.events.schema import COUNTER_COLUMNS, INT_COLUMNS, STRING_COLUMNS, RecordError
from stormwatch.formats.bad_input import describe_problems
from stormwatch.formats.csv_columns import parse_int_cell, parse_metadata_cell, read_metadata_cell
from stormwatch.formats.csv_table import columnar_csv, record_lines, row_cells
from stormwatch.formats.jsonl import BOM, ParsedEvents

__all__ = ["parse_int_cell", "parse_metadata_cell", "read_csv", "read_csv_rows"]

#: CSV cells read as exact integers: the canonical integer fields and stormlog's legacy ones.
INT_FIELDS = frozenset(
    {*INT_COLUMNS, *COUNTER_COLUMNS, "memory_allocated", "memory_reserved", "memory_change", "total_memory"}
)
FLOAT_FIELDS = frozenset({"timestamp"})
CAPABILITIES = "memory_capabilities"


def normalise_row(row: dict[Any, Any]) -> dict[Any, Any]:
    """Cell texts to record values: blanks to None, numbers by field, metadata parsed; a
    schema-v4 row's capabilities as stormlog 0.4.3 reads them (:func:`stormlog_capabilities`)."""
    out: dict[Any, Any] = {}
    stormlog_reads_metadata = True
    for key, raw in row.items():
        value = raw.strip() if isinstance(raw, str) else raw
        if value == "":
            out[key] = None
        elif key == "metadata":
            out[key], stormlog_reads_metadata = read_metadata_cell(value) if isinstance(value, str) else ({}, True)
        elif key in INT_FIELDS:
            if not isinstance(value, str):
                raise RecordError(f"{key} is missing (short row)")
            try:
                out[key] = parse_int_cell(value)
            except (ValueError, OverflowError) as exc:
                raise RecordError(f"{key} is not a number: {value[:40]!r}") from exc
        elif key in FLOAT_FIELDS and isinstance(value, str):
            try:
                out[key] = float(value)
            except ValueError as exc:
                raise RecordError(f"{key} is not a number: {value[:40]!r}") from exc
        else:
            out[key] = value
    if None in out:
        raise RecordError("row has more cells than the header")
    if not stormlog_reads_metadata and out.get("schema_version") == 4:
        out["metadata"] = stormlog_capabilities(out)
    return out


def stormlog_capabilities(record: dict[Any, Any]) -> dict[str, Any]:
    """The metadata of a v4 record whose cell stormlog 0.4.3 cannot read (a Python literal,
    as its exporters write), with the ``memory_capabilities`` 0.4.3 infers in place of the
    recovered ones: 0.4.3 reads such a cell as ``{}`` and infers them from the counters
    (``inferred_capabilities({}, record)``). The rest of the metadata stays recovered.

    Inferred capabilities hold a counter exactly when the row has it, so of the capability
    rules only one can fail: ``allocator_change_bytes`` counted without an allocated counter
    (0.4.3: "must be null when allocator allocated memory is unsupported"). That rule is the
    one every v4 record passes, JSON and JSON Lines alike (per record in
    :mod:`stormwatch.events.records`, per column in :mod:`stormwatch.formats.v4_capabilities`);
    the CSV reader only hands it the capabilities 0.4.3 sees, so a stormlog exporter's start
    and phase events logged before the first sample (no counters, a change of 0) are dropped
    with a warning naming the line, as 0.4.3 drops them.
    """
    recovered = {key: value for key, value in record["metadata"].items() if key != CAPABILITIES}
    return {**recovered, CAPABILITIES: inferred_capabilities({}, record)[CAPABILITIES]}


def row_event(row: dict[Any, Any], *, default_session_id: str) -> tuple[Any, ...]:
    """One ``csv.DictReader`` row as an event row; raises :class:`RecordError`."""
    if any(isinstance(v, str) and _has_surrogate(v) for v in row.values()):
        raise RecordError("not valid UTF-8")
    return normalise_record(
        normalise_row(row),
        default_session_id=default_session_id,
        default_collector="legacy.csv",
        default_sampling_interval_ms=0,
    )


def _text(data: bytes) -> str:
    body = data[len(BOM) :] if data.startswith(BOM) else data
    return body.decode("utf-8", errors="surrogateescape")


def read_csv_rows(data: bytes, *, label: str, default_session_id: str) -> ParsedEvents:
    """The row-by-row path: every row read by ``csv.DictReader`` and normalised on its own."""
    reader = csv.DictReader(io.StringIO(_text(data), newline=""))
    rows = []
    problems: list[tuple[int, str]] = []
    try:
        for row in reader:
            line = reader.line_num
            try:
                rows.append(row_event(row, default_session_id=default_session_id))
            except RecordError as exc:
                problems.append((line, str(exc)))
    except csv.Error as exc:
        problems.append((reader.line_num, f"unreadable CSV ({exc}); the rest of the file is skipped"))
    return ParsedEvents(frame_from_rows(rows), tuple(describe_problems(label, problems, where="row")))


def read_csv(data: bytes, *, label: str, default_session_id: str) -> ParsedEvents:
    """Events of one CSV export in row order; ``label`` names it in warnings (see the module doc)."""
    body = data[len(BOM) :] if data.startswith(BOM) else data
    try:
        fast = columnar_csv(body, default_session_id=default_session_id)
    except pa.ArrowException:  # a file Arrow reads but cannot compute on: read it as today
        fast = None
    if fast is None:
        return read_csv_rows(data, label=label, default_session_id=default_session_id)
    if not fast.slow.size:
        return ParsedEvents(fast.frame, ())
    lines = record_lines(body)
    if lines is None or len(lines) != fast.cells.num_rows:
        return read_csv_rows(data, label=label, default_session_id=default_session_id)
    rows: list[tuple[Any, ...]] = []
    kept: list[int] = []
    problems: list[tuple[int, str]] = []
    for index, row in zip(fast.slow.tolist(), row_cells(fast.cells, fast.slow), strict=True):
        try:
            rows.append(row_event(row, default_session_id=default_session_id))
            kept.append(index)
        except RecordError as exc:
            problems.append((lines[index], str(exc)))
    frame = fast.frame
    if rows:
        order = np.argsort(np.concatenate([fast.kept, np.asarray(kept, dtype=np.int64)]), kind="stable")
        frame = concat_frames([frame, frame_from_rows(rows)]).take(order).reset_index(drop=True)
    return ParsedEvents(_used_categories(frame), tuple(describe_problems(label, problems, where="row")))


def _used_categories(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with only the strings its rows hold as categories (as today's reader makes
    them), not those of the rows the columnar path dropped."""
    for name in STRING_COLUMNS:
        values = frame[name].array
        if len(values.categories) and len(np.unique(values.codes[values.codes >= 0])) < len(values.categories):
            frame[name] = values.remove_unused_categories()
    return frame


def _has_surrogate(value: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in value)
