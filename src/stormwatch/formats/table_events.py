"""Canonical events from one Arrow table of schema v2/v3/v4 records, validated column by column.

Every columnar reader (JSON Lines, JSON documents, CSV exports) brings the same
thing: a table whose known fields are typed as
:data:`~stormwatch.formats.arrow_reader.SCHEMA` says (strings ``large_string``,
integers ``int64``), whose ``metadata`` is a struct column, plain or dictionary-encoded
(a reader that parsed each distinct metadata once keeps it so; anything else means
"metadata must be an object"), and whose other columns are fields stormlog does
not know; plus a :class:`RowSource` that answers what the table cannot: whether a
null cell was an explicit ``null`` or an absent key, and the metadata ``dict`` of
the rows that keep one (non-sample events, and every schema v4 event). The
rules of :mod:`stormwatch.events.records` are applied to whole columns: a row that
breaks one is reported and dropped, the rest are kept. No Python object is made
per event, except those metadata dicts (a source may hand the same ``dict`` to
every row whose metadata is the same). A column without nulls or blanks (the
usual case) costs one cheap test per rule, not one mask.

Schema v4 rows (stormlog 0.4.3) may hold ``null`` core counters and carry
``metadata.memory_capabilities``, checked (or inferred when absent) by
:mod:`stormwatch.formats.v4_capabilities`; they keep ``schema_version`` 4 and
their metadata even on samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from stormwatch.events.frame import blank_positions, categorical, frame_from_columns
from stormwatch.events.schema import (
    COUNTER_COLUMNS,
    KNOWN_FIELDS,
    NULLABLE_CORE_V4,
    NULLABLE_REQUIRED_V3,
    REQUIRED_V3_FIELDS,
)
from stormwatch.formats.arrow_reader import INT_FIELDS, STRING_FIELDS
from stormwatch.formats.column_checks import (
    Errors,
    blank_rows,
    collective_mask,
    decoded,
    int_values,
    null_rows,
    rows_mask,
    value_type,
)
from stormwatch.formats.v4_capabilities import check_capabilities, infer_capabilities

#: Required fields that must hold a value (session_id and metadata have rules of their own).
_REQUIRED_NON_NULL = tuple(
    name for name in REQUIRED_V3_FIELDS
    if name not in NULLABLE_REQUIRED_V3 and name not in ("schema_version", "session_id", "metadata")
)


class RowSource(Protocol):
    """What a table cannot say about its own rows, answered from the artifact's text."""

    def has_key(self, rows: np.ndarray, key: str) -> np.ndarray:
        """For the given table rows (where ``key``'s column is null), whether the record held ``key``
        itself (an explicit ``null``) rather than lacking it; a boolean array like ``rows``."""
        ...

    def metadata(self, rows: np.ndarray, size: int) -> tuple[np.ndarray, list[tuple[int, str]]]:
        """An object array of ``size`` holding the metadata ``dict`` of the given rows (None
        elsewhere), and the rows whose record cannot be read after all, with why. Rows whose
        metadata are the same may share one ``dict`` (nobody changes them)."""
        ...


@dataclass(frozen=True)
class TableEvents:
    """The valid rows of a table as canonical events: ``kept`` are their table rows
    (ascending); ``problems`` pairs each dropped table row with the first rule it broke."""

    frame: pd.DataFrame
    kept: np.ndarray
    problems: tuple[tuple[int, str], ...]


def _check_fields(table: pa.Table, v4: np.ndarray, raw: RowSource, errors: Errors) -> None:
    """Unknown fields, required fields that are null or absent (``v4`` rows: a mask, whose
    core counters may be null), metadata that is no object."""
    for name in table.column_names:
        if name in KNOWN_FIELDS or name == "metadata":
            continue
        column = table.column(name)
        present = np.ones(table.num_rows, dtype=bool)
        nulls = null_rows(column)
        present[nulls] = raw.has_key(nulls, name)
        errors.add(present, f"unknown telemetry fields: {name}")
    for name in _REQUIRED_NON_NULL:
        nulls = null_rows(table.column(name))
        if name in NULLABLE_CORE_V4 and nulls.size:
            stated = v4[nulls]
            errors.add(nulls[~stated], f"{name} is missing or not of the right type")
            nulls = nulls[stated]
            errors.add(nulls[~raw.has_key(nulls, name)], f"missing required telemetry fields: {name}")
        else:
            errors.add(nulls, f"{name} is missing or not of the right type")
    for name in NULLABLE_REQUIRED_V3:
        nulls = null_rows(table.column(name))
        errors.add(nulls[~raw.has_key(nulls, name)], f"missing required telemetry fields: {name}")
    metadata = table.column("metadata") if "metadata" in table.column_names else None
    if metadata is None or not pa.types.is_struct(value_type(metadata)):
        errors.add(np.ones(table.num_rows, dtype=bool), "metadata must be an object")
    else:
        errors.add(null_rows(metadata), "metadata must be an object")
    for name in ("rank", "local_rank", "world_size"):
        nulls = null_rows(table.column(name))
        errors.add(nulls[raw.has_key(nulls, name)], f"{name} must be an integer")


def _check_blanks(strings: dict[str, pd.Categorical], errors: Errors) -> None:
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
    has_metadata = "metadata" in table.column_names
    stated = _stated_session_ids(decoded(table.column("metadata"))) if nulls.size and has_metadata else None
    if stated is not None:
        bad = np.union1d(null_rows(stated), blank_rows(stated))
        usable = rows_mask(np.setdiff1d(nulls, bad), table.num_rows)
        if usable.any():
            resolved = pc.if_else(pa.array(usable), stated.cast(column.type), resolved)
    return categorical(resolved)


def _versions(table: pa.Table) -> np.ndarray:
    if "schema_version" not in table.column_names:
        return np.full(table.num_rows, 3, dtype=np.int64)
    return int_values(table.column("schema_version"), fill=3)


def table_events(table: pa.Table, source: RowSource, *, default_session_id: str,
                 unread_metadata: np.ndarray | None = None) -> TableEvents:
    """Schema v2/v3/v4 rows of ``table`` (see the module doc) as canonical events, in table order.
    ``unread_metadata``: per row, whether stormlog reads its metadata as ``{}`` (a CSV cell holding a
    Python literal): a v4 row's capabilities are then inferred, as 0.4.3 infers them, whatever it states."""
    size = table.num_rows
    errors = Errors(size)
    v4 = _versions(table) == 4
    if v4.any() and "metadata" in table.column_names:  # the capability checks read plain struct values
        table = table.set_column(table.column_names.index("metadata"), "metadata", decoded(table.column("metadata")))
    non_sample = np.asarray(pc.fill_null(pc.not_equal(table.column("event_type"), "sample"), True))
    metadata_dicts, refused = source.metadata(np.flatnonzero(non_sample | v4), size)
    for row, reason in refused:
        errors.add(np.array([row]), reason)
    strings = {name: categorical(table.column(name)) for name in STRING_FIELDS}  # encoded once, checked on categories
    _check_fields(table, v4, source, errors)
    unread = v4 & unread_metadata if unread_metadata is not None else np.zeros(size, dtype=bool)
    inferred = (check_capabilities(table, v4, strings["collector"], metadata_dicts, errors, unread=unread)
                if v4.any() else v4)
    _check_blanks(strings, errors)
    ints = {name: int_values(table.column(name), fill=0) for name in INT_FIELDS if name != "schema_version"}
    _check_values(table, ints, errors)
    session_ids = _session_ids(table, strings["session_id"], default_session_id)

    bad = errors.bad_rows()
    problems = tuple((int(row), errors.message(row)) for row in bad.tolist())
    metadata = table.column("metadata") if "metadata" in table.column_names else None
    collective = collective_mask(metadata) if metadata is not None else np.zeros(size, dtype=bool)
    if inferred.any():
        collective |= infer_capabilities(
            table, np.flatnonzero(inferred & ~rows_mask(bad, size)), strings["collector"], metadata_dicts,
            unread=unread,
        )
    columns: dict[str, Any] = {
        "session_id": session_ids,
        **{name: strings[name] for name in STRING_FIELDS if name != "session_id"},
        **{name: ints[name] for name in INT_FIELDS if name not in COUNTER_COLUMNS and name != "schema_version"},
        **{name: _counter(table.column(name), ints[name]) for name in COUNTER_COLUMNS},
        "schema_version": np.where(v4, 4, 3),
        "metadata": metadata_dicts,
        "metadata_collective": collective,
    }
    frame = frame_from_columns(columns)
    kept = np.arange(size)
    if bad.size:
        kept = np.flatnonzero(~rows_mask(bad, size))
        frame = frame.take(kept).reset_index(drop=True)
    return TableEvents(frame=frame, kept=kept, problems=problems)


def _counter(column: pa.ChunkedArray, values: np.ndarray) -> pd.arrays.IntegerArray:
    return pd.arrays.IntegerArray(values, rows_mask(null_rows(column), len(column)))
