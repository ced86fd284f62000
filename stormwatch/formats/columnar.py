"""The columnar fast path: schema v2/v3 JSON Lines parsed by Arrow, validated per column.

:mod:`stormwatch.formats.arrow_reader` parses the whole buffer into typed columns.
The rules of :mod:`stormwatch.events.records` are then applied to whole columns: a row that
breaks one is reported and dropped, the rest are kept. No Python object is made
per event, except the metadata ``dict`` of non-sample events (alerts, phases,
lifecycle), which are few. A column without nulls or blanks (the usual case)
costs one cheap test per rule, not one mask.

Arrow cannot tell an absent key from an explicit ``null``; where stormlog's
rules tell them apart (nullable required fields, ``rank`` and friends, unknown
fields), the raw line of each such null row is searched for the quoted key.

Returns ``None`` when Arrow refuses the buffer (a malformed line, a value of the
wrong JSON type, metadata that is not an object or whose shape changes between
lines, bytes that are not UTF-8, lines it would crash on) or yields a row count
other than the number of non-blank lines (two records on one line): the caller
then parses every line on its own, which finds and names the culprits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from stormwatch.events.frame import blank_positions, categorical, frame_from_columns
from stormwatch.events.schema import COUNTER_COLUMNS, KNOWN_FIELDS, NULLABLE_REQUIRED_V3
from stormwatch.formats.arrow_reader import INT_FIELDS, STRING_FIELDS, read_table
from stormwatch.formats.column_checks import Errors, blank_rows, collective_mask, int_values, null_rows, rows_mask
from stormwatch.formats.json_value import parse_json_value
from stormwatch.formats.lines import Buffer, LineIndex

_REQUIRED_NON_NULL = (
    "timestamp_ns",
    "event_type",
    "collector",
    "sampling_interval_ms",
    "pid",
    "host",
    "device_id",
    "allocator_allocated_bytes",
    "allocator_reserved_bytes",
    "allocator_change_bytes",
    "device_used_bytes",
)
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

    def __init__(self, data: Buffer, lines: LineIndex, positions: np.ndarray) -> None:
        self.data, self.lines, self.positions = data, lines, positions
        self._array: pa.Array | None = None

    def has_key(self, rows: np.ndarray, key: str) -> np.ndarray:
        """For the given table rows, whether the line's top-level object holds ``key``.

        A substring search finds the candidates; those are parsed, because the same
        name may be a key nested in ``metadata`` (a phase scope's ``"action"``, say).
        """
        if rows.size == 0:
            return np.zeros(0, dtype=bool)
        if self._array is None:
            offsets = np.concatenate([self.lines.starts, [len(self.data)]]).astype(np.int64)
            buffers = [None, pa.py_buffer(offsets), pa.py_buffer(self.data)]
            self._array = pa.LargeBinaryArray.from_buffers(pa.large_binary(), self.lines.count, buffers)
        taken = self._array.take(pa.array(self.positions[rows]))
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


def _check_fields(table: pa.Table, strings: dict[str, pd.Categorical], raw: _RawLines, errors: Errors) -> None:
    """Unknown fields, required fields that are null or absent, metadata that is no object."""
    for name in table.column_names:
        if name in KNOWN_FIELDS or name == "metadata":
            continue
        column = table.column(name)
        present = np.ones(table.num_rows, dtype=bool)
        nulls = null_rows(column)
        present[nulls] = raw.has_key(nulls, name)
        errors.add(present, f"unknown telemetry fields: {name}")
    for name in _REQUIRED_NON_NULL:
        errors.add(null_rows(table.column(name)), f"{name} is missing or not of the right type")
    for name in NULLABLE_REQUIRED_V3:
        nulls = null_rows(table.column(name))
        errors.add(nulls[~raw.has_key(nulls, name)], f"missing required telemetry fields: {name}")
    metadata = table.column("metadata") if "metadata" in table.column_names else None
    if metadata is None or not pa.types.is_struct(metadata.type):
        errors.add(np.ones(table.num_rows, dtype=bool), "metadata must be an object")
    else:
        errors.add(null_rows(metadata), "metadata must be an object")
    for name in ("rank", "local_rank", "world_size"):
        nulls = null_rows(table.column(name))
        errors.add(nulls[raw.has_key(nulls, name)], f"{name} must be an integer")
    for name in ("job_id", "event_type", "collector", "host"):
        errors.add(blank_positions(strings[name]), f"{name} must be a non-empty string")


def _check_values(table: pa.Table, ints: dict[str, np.ndarray], errors: Errors) -> None:
    """Range and cross-field rules; fills in ``local_rank`` and ``world_size`` defaults."""
    errors.add(ints["timestamp_ns"] < 0, "timestamp_ns must be >= 0")
    errors.add(ints["sampling_interval_ms"] < 0, "sampling_interval_ms must be >= 0")
    errors.add(ints["pid"] < -1, "pid must be >= -1")
    for name in COUNTER_COLUMNS:
        if name != "allocator_change_bytes":
            errors.add(ints[name] < 0, f"{name} must be >= 0")
    size = table.num_rows
    has_total = ~rows_mask(null_rows(table.column("device_total_bytes")), size)
    total = ints["device_total_bytes"]
    errors.add(has_total & (ints["device_used_bytes"] > total), "device_used_bytes cannot exceed device_total_bytes")
    has_free = ~rows_mask(null_rows(table.column("device_free_bytes")), size)
    errors.add(
        has_total & has_free & (ints["device_free_bytes"] > total), "device_free_bytes cannot exceed device_total_bytes"
    )
    rank = ints["rank"]
    local_nulls = null_rows(table.column("local_rank"))
    if local_nulls.size:
        ints["local_rank"][local_nulls] = rank[local_nulls]
    world_nulls = null_rows(table.column("world_size"))
    if world_nulls.size:
        ints["world_size"][world_nulls] = 1
    local_rank, world_size = ints["local_rank"], ints["world_size"]
    errors.add(rank < 0, "rank must be >= 0")
    errors.add(local_rank < 0, "local_rank must be >= 0")
    errors.add(world_size <= 0, "world_size must be >= 1")
    errors.add(rank >= world_size, "rank must be < world_size")
    errors.add(local_rank >= world_size, "local_rank must be < world_size")


def _stated_session_ids(metadata: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """``metadata.session_id`` when the metadata are objects with a string field of that name."""
    if not pa.types.is_struct(metadata.type) or metadata.type.get_field_index("session_id") < 0:
        return None
    stated = pc.struct_field(metadata, "session_id")
    return stated if pa.types.is_string(stated.type) or pa.types.is_large_string(stated.type) else None


def _session_ids(table: pa.Table, encoded: pd.Categorical, default_session_id: str) -> pd.Categorical:
    """``session_id`` (``encoded``: the column as a categorical), else (when null) a usable
    ``metadata.session_id``, else the default."""
    column = table.column("session_id")
    nulls = null_rows(column)
    unusable = np.union1d(nulls, blank_positions(encoded))
    if unusable.size == 0:
        return encoded
    fallback = pa.scalar(default_session_id, column.type)
    resolved = pc.if_else(pa.array(~rows_mask(unusable, table.num_rows)), column, fallback)
    stated = _stated_session_ids(table.column("metadata")) if nulls.size and "metadata" in table.column_names else None
    if stated is not None:
        bad = np.union1d(null_rows(stated), blank_rows(stated))
        usable = rows_mask(np.setdiff1d(nulls, bad), table.num_rows)
        if usable.any():
            resolved = pc.if_else(pa.array(usable), stated.cast(column.type), resolved)
    return categorical(resolved)


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
    raw = _RawLines(data, lines, positions)
    errors = Errors(table.num_rows)
    non_sample = np.asarray(pc.fill_null(pc.not_equal(table.column("event_type"), "sample"), True))
    metadata_dicts, refused = raw.metadata(np.flatnonzero(non_sample), table.num_rows)
    for row, reason in refused:
        errors.add(np.array([row]), reason)
    strings = {name: categorical(table.column(name)) for name in STRING_FIELDS}  # encoded once, checked on categories
    _check_fields(table, strings, raw, errors)
    ints = {name: int_values(table.column(name), fill=0) for name in INT_FIELDS if name != "schema_version"}
    _check_values(table, ints, errors)
    session_ids = _session_ids(table, strings["session_id"], default_session_id)

    bad = errors.bad_rows()
    problems = tuple((int(lines.numbers[positions[row]]), errors.message(row)) for row in bad.tolist())
    metadata = table.column("metadata") if "metadata" in table.column_names else None
    collective = collective_mask(metadata) if metadata is not None else np.zeros(table.num_rows, dtype=bool)
    columns: dict[str, Any] = {
        "session_id": session_ids,
        **{name: strings[name] for name in STRING_FIELDS if name != "session_id"},
        **{name: ints[name] for name in INT_FIELDS if name not in COUNTER_COLUMNS and name != "schema_version"},
        **{name: _counter(table.column(name), ints[name]) for name in COUNTER_COLUMNS},
        "schema_version": np.full(table.num_rows, 3, dtype=np.int64),
        "metadata": metadata_dicts,
        "metadata_collective": collective,
    }
    frame = frame_from_columns(columns)
    if bad.size:
        kept = np.flatnonzero(~rows_mask(bad, table.num_rows))
        frame = frame.take(kept).reset_index(drop=True)
        positions = positions[kept]
    return ColumnarResult(frame=frame, positions=positions, rest_positions=rest_positions, problems=problems)


def _counter(column: pa.ChunkedArray, values: np.ndarray) -> pd.arrays.IntegerArray:
    return pd.arrays.IntegerArray(values, rows_mask(null_rows(column), len(column)))
