"""The columnar fast path: schema v2/v3 JSON Lines parsed by Arrow, validated per column.

``pyarrow.json`` parses the whole buffer into typed columns (the known fields
under an explicit schema; anything else, ``metadata`` included, inferred). The
rules of :mod:`stormwatch.records` are then applied to whole columns: a row that
breaks one is reported and dropped, the rest are kept. No Python object is made
per event, except the metadata ``dict`` of non-sample events (alerts, phases,
lifecycle), which are few.

Arrow cannot tell an absent key from an explicit ``null``; where stormlog's
rules tell them apart (nullable required fields, ``rank`` and friends, unknown
fields), the raw line of each such null row is searched for the quoted key.

Returns ``None`` when Arrow refuses the buffer (a malformed line, a value of the
wrong JSON type, metadata whose shape changes between lines): the caller then
parses every line on its own, which finds and names the culprits.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from stormwatch.formats.lines import LineIndex
from stormwatch.frame import frame_from_columns
from stormwatch.records import COUNTER_COLUMNS, KNOWN_FIELDS, NULLABLE_REQUIRED_V3
from stormwatch.tokens import COLLAPSED_PATTERN, has_collective_token

_STRING_FIELDS = ("session_id", "event_type", "collector", "host", "job_id", "context")
_INT_FIELDS = (
    "schema_version",
    "timestamp_ns",
    "sampling_interval_ms",
    "pid",
    "rank",
    "local_rank",
    "world_size",
    "device_id",
    *COUNTER_COLUMNS,
)
SCHEMA = pa.schema([(name, pa.string()) for name in _STRING_FIELDS] + [(name, pa.int64()) for name in _INT_FIELDS])
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
_BLOCK_SIZE_BYTES = 2 << 20
#: String columns with at most this many distinct values are checked value by value.
_FEW_DISTINCT = 256


@dataclass(frozen=True)
class ColumnarResult:
    """Valid fast rows, where they sit, and the lines left for one-by-one parsing.

    ``positions`` and ``rest_positions`` index the caller's :class:`LineIndex`.
    """

    frame: pd.DataFrame
    positions: np.ndarray
    rest_positions: np.ndarray
    problems: tuple[tuple[int, str], ...]


class _Errors:
    """The first broken rule of each row, in rule order."""

    def __init__(self, size: int) -> None:
        self.codes = np.zeros(size, dtype=np.int16)
        self.texts: list[str] = [""]

    def add(self, mask: np.ndarray, message: str) -> None:
        if not mask.any():
            return
        self.texts.append(message)
        self.codes[mask & (self.codes == 0)] = len(self.texts) - 1

    @property
    def bad(self) -> np.ndarray:
        return self.codes != 0

    def message(self, row: int) -> str:
        return self.texts[int(self.codes[row])]


def _ints(column: pa.ChunkedArray, fill: int) -> np.ndarray:
    return column.fill_null(fill).to_numpy().astype(np.int64, copy=False)


def _nulls(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(column.is_null())


def _blank(column: pa.ChunkedArray) -> np.ndarray:
    trimmed = pc.utf8_trim_whitespace(column)
    return np.asarray(pc.fill_null(pc.equal(pc.binary_length(trimmed), 0), False))


def _line_array(data: bytes, lines: LineIndex) -> pa.Array:
    """Each non-blank line as one binary value (trailing blank bytes included)."""
    offsets = np.concatenate([lines.starts, [len(data)]]).astype(np.int64)
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), lines.count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _key_present(line_array: pa.Array, rows: np.ndarray, key: str) -> np.ndarray:
    """For the given rows (positions), whether the raw line holds ``"key"``."""
    present = np.zeros(rows.size, dtype=bool)
    if rows.size:
        taken = line_array.take(pa.array(rows))
        present = np.asarray(pc.match_substring(taken, f'"{key}"'))
    return present


def _collective_mask(column: pa.Array, size: int) -> np.ndarray:
    """Rows with a collective token in any string value of a (nested) column."""
    column_type = column.type
    if pa.types.is_string(column_type) or pa.types.is_large_string(column_type):
        distinct = pc.unique(column)
        if len(distinct) <= _FEW_DISTINCT:
            hits = [text for text in distinct.to_pylist() if text is not None and has_collective_token(text)]
            if not hits:
                return np.zeros(size, dtype=bool)
            return np.asarray(pc.fill_null(pc.is_in(column, value_set=pa.array(hits, column_type)), False))
        lowered = pc.utf8_lower(column)
        collapsed = pc.replace_substring(pc.replace_substring(lowered, "-", ""), "_", "")
        return np.asarray(pc.fill_null(pc.match_substring_regex(collapsed, COLLAPSED_PATTERN), False))
    if pa.types.is_struct(column_type):
        found = np.zeros(size, dtype=bool)
        for child in column.flatten():
            found |= _collective_mask(child, size)
        return found
    if pa.types.is_list(column_type) or pa.types.is_large_list(column_type):
        found = np.zeros(size, dtype=bool)
        inner = _collective_mask(column.flatten(), len(column.flatten()))
        parents = np.asarray(pc.list_parent_indices(column))
        found[parents[inner]] = True
        return found
    return np.zeros(size, dtype=bool)


def _read_table(data: bytes) -> pa.Table | None:
    try:
        return pj.read_json(
            io.BytesIO(data),
            read_options=pj.ReadOptions(block_size=_BLOCK_SIZE_BYTES),
            parse_options=pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="infer"),
        )
    except (pa.ArrowException, ValueError):
        return None


def _metadata_dicts(data: bytes, lines: LineIndex, positions: np.ndarray, non_sample: np.ndarray) -> np.ndarray:
    """The metadata ``dict`` of non-sample rows (parsed from their lines); None for samples."""
    out = np.full(positions.size, None, dtype=object)
    for index in np.flatnonzero(non_sample).tolist():
        line = positions[index]
        record = orjson.loads(data[lines.starts[line] : lines.ends[line]])
        out[index] = record.get("metadata")
    return out


def columnar_events(data: bytes, lines: LineIndex, *, default_session_id: str) -> ColumnarResult | None:
    """Schema v2/v3 rows of a JSONL buffer as canonical events (see module doc)."""
    table = _read_table(data)
    if table is None or table.num_rows != lines.count:
        return None
    version = _ints(table.column("schema_version"), -1)
    fast = (version == 2) | (version == 3)
    rest_positions = np.flatnonzero(~fast)
    positions = np.flatnonzero(fast)
    if positions.size < table.num_rows:
        table = table.filter(pa.array(fast))
    size = table.num_rows
    errors = _Errors(size)
    line_array = _line_array(data, lines)

    extra = [name for name in table.column_names if name not in KNOWN_FIELDS and name != "metadata"]
    for name in extra:
        nulls = _nulls(table.column(name))
        present = ~nulls
        present[nulls] = _key_present(line_array, positions[nulls], name)
        errors.add(present, f"unknown telemetry field: {name}")
    for name in _REQUIRED_NON_NULL:
        errors.add(_nulls(table.column(name)), f"{name} is missing or not of the right type")
    for name in NULLABLE_REQUIRED_V3:
        nulls = _nulls(table.column(name))
        absent = np.zeros(size, dtype=bool)
        absent[nulls] = ~_key_present(line_array, positions[nulls], name)
        errors.add(absent, f"missing required telemetry field: {name}")

    metadata = table.column("metadata").combine_chunks() if "metadata" in table.column_names else None
    if metadata is None or not pa.types.is_struct(metadata.type):
        errors.add(np.ones(size, dtype=bool), "metadata must be an object")
    else:
        errors.add(_nulls(metadata), "metadata must be an object")
    for name in ("rank", "local_rank", "world_size"):
        nulls = _nulls(table.column(name))
        stated_null = np.zeros(size, dtype=bool)
        stated_null[nulls] = _key_present(line_array, positions[nulls], name)
        errors.add(stated_null, f"{name} must be an integer")
    job_id = table.column("job_id")
    errors.add(_blank(job_id), "job_id must be a non-empty string")
    for name in ("event_type", "collector", "host"):
        errors.add(_blank(table.column(name)), f"{name} must be a non-empty string")

    ints = {name: _ints(table.column(name), 0) for name in _INT_FIELDS if name != "schema_version"}
    errors.add(ints["timestamp_ns"] < 0, "timestamp_ns must be >= 0")
    errors.add(ints["sampling_interval_ms"] < 0, "sampling_interval_ms must be >= 0")
    errors.add(ints["pid"] < -1, "pid must be >= -1")
    for name in COUNTER_COLUMNS:
        if name != "allocator_change_bytes":
            errors.add(ints[name] < 0, f"{name} must be >= 0")
    has_total = ~_nulls(table.column("device_total_bytes"))
    total = ints["device_total_bytes"]
    errors.add(has_total & (ints["device_used_bytes"] > total), "device_used_bytes cannot exceed device_total_bytes")
    has_free = ~_nulls(table.column("device_free_bytes"))
    errors.add(
        has_total & has_free & (ints["device_free_bytes"] > total), "device_free_bytes cannot exceed device_total_bytes"
    )

    rank = ints["rank"]
    local_given = ~_nulls(table.column("local_rank"))
    local_rank = np.where(local_given, ints["local_rank"], rank)
    world_given = ~_nulls(table.column("world_size"))
    world_size = np.where(world_given, ints["world_size"], 1)
    errors.add(rank < 0, "rank must be >= 0")
    errors.add(local_rank < 0, "local_rank must be >= 0")
    errors.add(world_size <= 0, "world_size must be >= 1")
    errors.add(rank >= world_size, "rank must be < world_size")
    errors.add(local_rank >= world_size, "local_rank must be < world_size")

    session_id = table.column("session_id").combine_chunks()
    usable = ~_blank(table.column("session_id")) & ~_nulls(session_id)
    fallback: pa.Array = pa.array([default_session_id] * 1, pa.string())
    resolved = pc.if_else(pa.array(usable), session_id, fallback[0])
    if metadata is not None and pa.types.is_struct(metadata.type):
        names = [metadata.type.field(i).name for i in range(metadata.type.num_fields)]
        if "session_id" in names:
            meta_sid = metadata.field(names.index("session_id"))
            if pa.types.is_string(meta_sid.type):
                meta_usable = _nulls(session_id) & ~_blank(pa.chunked_array([meta_sid])) & ~_nulls(meta_sid)
                resolved = pc.if_else(pa.array(meta_usable), meta_sid, resolved)

    bad = errors.bad
    keep = ~bad
    problems = tuple((int(lines.numbers[positions[i]]), errors.message(i)) for i in np.flatnonzero(bad).tolist())
    event_type = table.column("event_type")
    non_sample = np.asarray(pc.fill_null(pc.not_equal(event_type, "sample"), True))
    collective = _collective_mask(metadata, size) if metadata is not None else np.zeros(size, dtype=bool)
    kept_positions = positions[keep]
    keep_arrow = pa.array(keep)

    def counter(name: str) -> Any:
        column = table.column(name).filter(keep_arrow)
        return pd.arrays.IntegerArray(_ints(column, 0), np.asarray(column.is_null()))

    columns: dict[str, Any] = {
        "session_id": resolved.filter(keep_arrow),
        "event_type": event_type.filter(keep_arrow),
        "collector": table.column("collector").filter(keep_arrow),
        "host": table.column("host").filter(keep_arrow),
        "context": table.column("context").filter(keep_arrow),
        "job_id": job_id.filter(keep_arrow),
        "timestamp_ns": ints["timestamp_ns"][keep],
        "sampling_interval_ms": ints["sampling_interval_ms"][keep],
        "pid": ints["pid"][keep],
        "device_id": ints["device_id"][keep],
        "rank": rank[keep],
        "local_rank": local_rank[keep],
        "world_size": world_size[keep],
        "schema_version": np.full(int(keep.sum()), 3, dtype=np.int64),
        "metadata": _metadata_dicts(data, lines, kept_positions, non_sample[keep]),
        "metadata_collective": collective[keep],
        **{name: counter(name) for name in COUNTER_COLUMNS},
    }
    return ColumnarResult(
        frame=frame_from_columns(columns),
        positions=kept_positions,
        rest_positions=rest_positions,
        problems=problems,
    )
