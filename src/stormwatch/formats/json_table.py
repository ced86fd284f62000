"""The columnar path of JSON documents: parsed schema v2/v3/v4 records as one typed table.

A JSON document (an array of records, or an object holding ``events``) is parsed
whole (:func:`~stormwatch.formats.json_value.parse_json_value`); this module turns
its schema v2/v3/v4 records (v4: stormlog 0.4.3's exports and MLX ``tracking.json``)
into the table :func:`~stormwatch.formats.table_events.table_events` validates
column by column: one Python list per known field, gathered from the record dicts,
then one Arrow array typed as :data:`~stormwatch.formats.arrow_reader.SCHEMA` says,
and ``metadata`` as a struct column inferred from the metadata dicts. The dicts
themselves answer what the table cannot (``key in record``; the metadata ``dict``
of non-sample rows and of every v4 row).

Records whose values the table cannot hold faithfully take the record-by-record
path instead: a value of the wrong JSON type in a known field (Arrow would cast a
float ``1.5`` to the integer 1), an integer beyond 64 bits, a string that is not
valid Unicode (a lone surrogate). So do the rows :func:`table_events` rejects, so
that their warnings are those of :func:`~stormwatch.events.records.normalise_record`
word for word. The whole file goes that way (``None``) when its metadata dicts do
not form one Arrow type (a field that is a string here and a number there), or
nest deeper than :data:`MAX_METADATA_DEPTH`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from stormwatch.events.schema import INT64_MAX, INT64_MIN, KNOWN_FIELDS
from stormwatch.formats.arrow_reader import SCHEMA
from stormwatch.formats.table_events import table_events

#: Metadata nesting (objects and arrays) beyond which a file takes the record-by-record
#: path: that path walks metadata recursively and reports records nested near Python's
#: recursion limit as "metadata nested too deeply".
MAX_METADATA_DEPTH = 64
_INT_TYPES = frozenset({int, type(None)})
_STRING_TYPES = frozenset({str, type(None)})
#: What the conversion of a checked list may still raise: an integer beyond 64 bits,
#: a string holding a lone surrogate.
_CONVERSION_ERRORS = (OverflowError, UnicodeEncodeError, pa.ArrowException)


@dataclass(frozen=True)
class RecordTable:
    """Valid events of the columnar path and the records left for the record-by-record path.

    ``positions`` (the frame's rows) and ``rest`` (sorted) index the document's records.
    """

    frame: pd.DataFrame
    positions: np.ndarray
    rest: np.ndarray


class _Records:
    """The :class:`~stormwatch.formats.table_events.RowSource` of a table made from record dicts."""

    def __init__(self, records: list[dict[str, Any]], metadata: np.ndarray) -> None:
        self.records, self.metadata_dicts = records, metadata

    def has_key(self, rows: np.ndarray, key: str) -> np.ndarray:
        records = self.records
        return np.fromiter((key in records[row] for row in rows.tolist()), dtype=bool, count=rows.size)

    def metadata(self, rows: np.ndarray, size: int) -> tuple[np.ndarray, list[tuple[int, str]]]:
        out = np.full(size, None, dtype=object)
        out[rows] = self.metadata_dicts[rows]
        return out, []


def _fits(value: object, kind: pa.DataType) -> bool:
    """Whether Arrow holds ``value`` (of a type the field allows) as it is."""
    if value is None:
        return True
    if pa.types.is_integer(kind):
        return INT64_MIN <= value <= INT64_MAX  # type: ignore[operator]
    try:
        value.encode("utf-8")  # type: ignore[attr-defined]
    except UnicodeEncodeError:
        return False
    return True


def _typed_columns(records: list[dict[str, Any]]) -> tuple[dict[str, pa.Array], set[int]]:
    """The known fields as typed arrays, or (when some are not empty) the rows that cannot be typed."""
    arrays: dict[str, pa.Array] = {}
    untyped: set[int] = set()
    for field in SCHEMA:
        name, kind = field.name, field.type
        values = [record.get(name) for record in records]
        allowed = _INT_TYPES if pa.types.is_integer(kind) else _STRING_TYPES
        if not allowed.issuperset(map(type, values)):
            untyped.update(row for row, value in enumerate(values) if type(value) not in allowed)
            continue
        try:
            arrays[name] = pa.array(values, kind)
        except _CONVERSION_ERRORS:
            misfits = [row for row, value in enumerate(values) if not _fits(value, kind)]
            untyped.update(misfits or range(len(values)))
    return arrays, untyped


def _depth(kind: pa.DataType) -> int:
    """Nesting depth of an Arrow type: objects and arrays count one level each."""
    depth, level = 0, [kind]
    while level:
        depth += 1
        nested: list[pa.DataType] = []
        for item in level:
            if pa.types.is_struct(item):
                nested.extend(item.field(index).type for index in range(item.num_fields))
            elif pa.types.is_list(item) or pa.types.is_large_list(item):
                nested.append(item.value_type)
        level = nested
        if depth > MAX_METADATA_DEPTH:
            break
    return depth


def _metadata_column(records: list[dict[str, Any]]) -> tuple[pa.Array, np.ndarray] | None:
    """``metadata`` of the records (a row whose metadata is no object: null), see :func:`metadata_arrays`."""
    dicts = [record.get("metadata") for record in records]
    if any(type(value) is not dict for value in dicts):
        dicts = [value if type(value) is dict else None for value in dicts]
    return metadata_arrays(dicts)


def metadata_arrays(dicts: list[dict[str, Any] | None]) -> tuple[pa.Array, np.ndarray] | None:
    """Metadata dicts (None: a null row) as one Arrow array and as an object array of the
    dicts; None when the dicts do not form one type, or nest too deeply."""
    try:
        column = pa.array(dicts)
    except (*_CONVERSION_ERRORS, TypeError, ValueError):
        return None
    if _depth(column.type) > MAX_METADATA_DEPTH:
        return None
    objects = np.empty(len(dicts), dtype=object)
    objects[:] = dicts
    return column, objects


def _table(records: list[dict[str, Any]], arrays: dict[str, pa.Array], metadata: pa.Array) -> pa.Table:
    """The typed columns, ``metadata``, and an all-null column per unknown field (which rows
    hold it, the records say)."""
    columns = {**arrays, "metadata": metadata}
    unknown = set().union(*records).difference(KNOWN_FIELDS)
    for name in sorted(unknown):
        columns[name] = pa.nulls(len(records))
    return pa.table(columns)


#: The schema versions :func:`~stormwatch.formats.table_events.table_events` checks column by column.
_COLUMNAR_VERSIONS = frozenset({2, 3, 4})


def _columnar_records(records: list[Any]) -> np.ndarray:
    """Positions of the records that are objects with ``schema_version`` 2, 3 or 4 (an integer)."""
    return np.flatnonzero(
        [type(record) is dict and type(v := record.get("schema_version")) is int and v in _COLUMNAR_VERSIONS
         for record in records]
    )


def record_table(records: list[Any], *, default_session_id: str) -> RecordTable | None:
    """The document's schema v2/v3/v4 records as canonical events (see the module doc), or None
    when the file should take the record-by-record path as a whole."""
    positions = _columnar_records(records)
    chosen: list[dict[str, Any]] = []
    arrays: dict[str, pa.Array] = {}
    while positions.size:
        chosen = records if positions.size == len(records) else [records[row] for row in positions.tolist()]
        arrays, untyped = _typed_columns(chosen)
        if not untyped:
            break
        positions = np.delete(positions, sorted(untyped))
    metadata = _metadata_column(chosen) if positions.size else None
    if metadata is None:
        return None
    try:
        events = table_events(_table(chosen, arrays, metadata[0]), _Records(chosen, metadata[1]),
                              default_session_id=default_session_id)
    except pa.ArrowException:  # as the JSON Lines path: whatever Arrow cannot do, the records can
        return None
    kept = positions[events.kept]
    left = np.ones(len(records), dtype=bool)
    left[kept] = False
    return RecordTable(frame=events.frame, positions=kept, rest=np.flatnonzero(left))
