"""The columnar path of legacy records (no ``schema_version``) in JSON documents.

stormlog's trackers write events in the legacy shape ``TrackingEvent.to_dict()`` gives
(float ``timestamp`` in seconds, ``memory_*`` bytes, ``device_*`` samples, ``backend``):
0.3.x exports, and the ring buffer a 0.4.x OOM flight recorder dumps to ``events.json``
(:mod:`stormwatch.formats.oom_dump`). This module converts such records to schema v3
columns by stormlog 0.3.5's permissive rules (:mod:`stormwatch.events.legacy_records`,
which the record-by-record path applies one record at a time), then hands them to
:func:`~stormwatch.formats.table_events.table_events`, which checks them column by
column as it checks v3 records.

Only records whose keys are all of that shape (:data:`LEGACY_KEYS`), and whose values
are of the types the rules take without a question, come here; the others, and the
rows :func:`table_events` rejects, take the record-by-record path, so that their
warnings are those of :func:`~stormwatch.events.records.normalise_record` word for word.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from stormwatch.events.schema import IDENTITY_FIELDS, INT64_MAX, INT64_MIN, UNKNOWN_HOST, UNKNOWN_PID
from stormwatch.formats.arrow_reader import SCHEMA, STRING_FIELDS
from stormwatch.formats.json_table import RecordTable, metadata_arrays
from stormwatch.formats.table_events import table_events

#: The keys of stormlog's legacy ``TrackingEvent.to_dict()`` that the columnar path converts.
#: ``active_memory``, ``inactive_memory``, ``device_used`` and ``device_free`` are among them
#: because stormlog 0.3.5's conversion reads none of them (it reads ``*_bytes`` names).
LEGACY_KEYS = frozenset({
    "timestamp", "timestamp_ns", "event_type", "session_id", "memory_allocated", "memory_reserved",
    "memory_change", "device_id", "context", "job_id", "rank", "local_rank", "world_size", "metadata",
    "active_memory", "inactive_memory", "device_used", "device_free", "device_total", "backend",
})
#: Metadata names the conversion consults: identity, the process, the backend, the device total.
_CONSULTED = frozenset({*IDENTITY_FIELDS, "session_id", "pid", "host", "backend",
                        "total_memory", "device_total", "total_bytes"})
#: Dropped from an event's metadata once read (the session id is the event's own field).
_STRIPPED = frozenset({*IDENTITY_FIELDS, "session_id"})
_TOTAL_NAMES = ("total_memory", "device_total", "total_bytes")
_COLLECTORS = {"mps": "stormlog.mps_tracker", "rocm": "stormlog.rocm_tracker",
               "cuda": "stormlog.cuda_tracker", "cpu": "stormlog.cpu_tracker"}
_ABSENT: Any = object()
_TWO_63 = 2.0**63


def _is_int(value: object) -> bool:
    return type(value) is int and INT64_MIN <= value <= INT64_MAX


class _Columns:
    """The chosen records' values, one list per key, and the positions (into those records)
    whose values send them the record-by-record way."""

    def __init__(self, records: Sequence[dict[str, Any]]) -> None:
        self.records = records
        self.slow: set[int] = set()
        raw = [record.get("metadata") for record in records]
        self.slow.update(row for row, value in enumerate(raw) if value is not None and type(value) is not dict)
        self.metadata: list[dict[str, Any]] = [value if type(value) is dict else {} for value in raw]
        self.consulted = _CONSULTED & set().union(*self.metadata)

    def get(self, key: str) -> list[Any]:
        return [record.get(key, _ABSENT) for record in self.records]

    def meta(self, key: str) -> list[Any]:
        if key not in self.consulted:
            return [_ABSENT] * len(self.records)
        return [metadata.get(key, _ABSENT) for metadata in self.metadata]

    def ints(self, values: list[Any], *, default: list[Any] | Any, nullable: bool = False) -> list[int | None]:
        """``values`` as 64-bit ints (absent: ``default``, a value or one per row); any other type is slow."""
        out: list[int | None] = []
        for row, value in enumerate(values):
            if value is _ABSENT:
                value = default[row] if isinstance(default, list) else default
            if not (_is_int(value) or (nullable and value is None)):
                self.slow.add(row)
                value = None
            out.append(value)
        return out

    def strings(self, values: list[Any], *, default: str | None) -> list[str | None]:
        """``values`` as strings or None (absent: ``default``); any other type is slow."""
        out: list[str | None] = []
        for row, value in enumerate(values):
            value = default if value is _ABSENT else value
            if value is not None and type(value) is not str:
                self.slow.add(row)
                value = None
            out.append(value)
        return out


def _first(*columns: list[Any]) -> list[Any]:
    """Per row, the first value that is not absent (explicit values before metadata, and so on)."""
    out = list(columns[0])
    for column in columns[1:]:
        out = [value if value is not _ABSENT else other for value, other in zip(out, column, strict=True)]
    return out


def _present_not_none(explicit: list[Any], fallback: list[Any]) -> list[Any]:
    """stormlog's identity rule: the record's value unless it is absent or null, then metadata's;
    absent when neither holds one."""
    return [value if value is not _ABSENT and value is not None else (_ABSENT if other is None else other)
            for value, other in zip(explicit, fallback, strict=True)]


def _timestamps_ns(columns: _Columns) -> list[int | None]:
    """``timestamp_ns`` when the record has one, else ``int(float(timestamp) * 1e9)`` as stormlog
    computes it (the same double product, truncated); out of range or not a number: slow."""
    stated = columns.get("timestamp_ns")
    seconds = columns.get("timestamp")
    out: list[int | None] = []
    for row, (value, stamp) in enumerate(zip(stated, seconds, strict=True)):
        if value is not _ABSENT:
            out.append(value if _is_int(value) else None)
        elif type(stamp) in (int, float) and abs(stamp) < 1e300:
            product = float(stamp) * 1_000_000_000
            out.append(int(product) if math.isfinite(product) and -_TWO_63 <= product < _TWO_63 else None)
        else:
            out.append(None)
        if out[-1] is None:
            columns.slow.add(row)
    return out


def _collectors(columns: _Columns, device_ids: list[int | None], *, default: str) -> list[str]:
    """The backend's collector (the record's ``backend``, else metadata's), else by the counters."""
    backends = _first(columns.get("backend"), columns.meta("backend"))
    allocated = columns.get("memory_allocated")
    out = []
    for backend, stated, device_id in zip(backends, allocated, device_ids, strict=True):
        known = _COLLECTORS.get(backend.strip().lower()) if type(backend) is str else None
        if known is None:
            cpu = "stormlog.cpu_tracker" if device_id == -1 else "stormlog.cuda_tracker"
            known = default if stated is _ABSENT else cpu
        out.append(known)
    return out


def _identity(columns: _Columns) -> dict[str, list[Any]]:
    """job_id, rank, local_rank, world_size by stormlog's defaults (rank 0, local rank = rank, world 1)."""
    job = columns.strings(_present_not_none(columns.get("job_id"), columns.meta("job_id")), default=None)
    world = columns.ints(_present_not_none(columns.get("world_size"), columns.meta("world_size")), default=1)
    rank = columns.ints(_present_not_none(columns.get("rank"), columns.meta("rank")), default=0)
    local = columns.ints(_present_not_none(columns.get("local_rank"), columns.meta("local_rank")), default=rank)
    return {"job_id": job, "rank": rank, "local_rank": local, "world_size": world}


def _session_ids(columns: _Columns, default: str) -> list[str]:
    """The record's session id, else (when it has none) metadata's; else, or when blank, ``default``."""
    out = []
    for value, other in zip(columns.get("session_id"), columns.meta("session_id"), strict=True):
        value = other if value is _ABSENT or value is None else value
        out.append(value if type(value) is str and value.strip() else default)
    return out


def _totals(columns: _Columns) -> list[int | None]:
    """The device total: the record's ``device_total``, else metadata's first total name."""
    return columns.ints(_first(columns.get("device_total"), *(columns.meta(name) for name in _TOTAL_NAMES)),
                        default=None, nullable=True)


def _values(columns: _Columns, *, default_session_id: str, default_collector: str,
            default_sampling_interval_ms: int) -> dict[str, list[Any]]:
    """Every v3 field of the chosen records, by stormlog 0.3.5's legacy conversion."""
    size = len(columns.records)
    device_ids = columns.ints(columns.get("device_id"), default=-1)
    allocated = columns.ints(columns.get("memory_allocated"), default=0)
    totals = _totals(columns)
    event_types = columns.strings(columns.get("event_type"), default="sample")
    columns.slow.update(row for row, value in enumerate(event_types) if value is None)
    hosts = columns.strings(columns.meta("host"), default=UNKNOWN_HOST)
    columns.slow.update(row for row, value in enumerate(hosts) if value is None)
    return {
        "session_id": _session_ids(columns, default_session_id),
        "timestamp_ns": _timestamps_ns(columns),
        "event_type": event_types,
        "collector": _collectors(columns, device_ids, default=default_collector),
        "sampling_interval_ms": [default_sampling_interval_ms] * size,
        "pid": columns.ints(columns.meta("pid"), default=UNKNOWN_PID),
        "host": hosts,
        "device_id": device_ids,
        "allocator_allocated_bytes": allocated,
        "allocator_reserved_bytes": columns.ints(columns.get("memory_reserved"), default=allocated),
        "allocator_active_bytes": [None] * size,
        "allocator_inactive_bytes": [None] * size,
        "allocator_change_bytes": columns.ints(columns.get("memory_change"), default=0),
        "device_used_bytes": allocated,
        "device_free_bytes": [None if total is None or used is None else max(total - used, 0)
                              for total, used in zip(totals, allocated, strict=True)],
        "device_total_bytes": totals,
        "context": columns.strings(columns.get("context"), default=None),
        **_identity(columns),
        "schema_version": [3] * size,
    }


def _stripped(metadata: list[dict[str, Any]], consulted: frozenset[str]) -> list[dict[str, Any]]:
    """The metadata without the identity fields and session id the conversion took from them."""
    if not consulted & _STRIPPED:
        return metadata
    return [{key: value for key, value in item.items() if key not in _STRIPPED} if _STRIPPED & item.keys() else item
            for item in metadata]


def _unencodable(values: dict[str, list[Any]]) -> set[int]:
    """Rows holding a string Arrow cannot hold (a lone surrogate, which is not valid Unicode)."""
    rows: set[int] = set()
    for name in STRING_FIELDS:
        column = values[name]
        try:
            pa.array(column, pa.large_string())
        except (UnicodeEncodeError, pa.ArrowException):
            rows.update(row for row, value in enumerate(column) if type(value) is str and not _encodes(value))
    return rows


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Metadata:
    """The :class:`~stormwatch.formats.table_events.RowSource` of converted records: every field
    is the conversion's own (present), and each row's metadata is its stripped dict."""

    def __init__(self, dicts: np.ndarray) -> None:
        self.dicts = dicts

    def has_key(self, rows: np.ndarray, key: str) -> np.ndarray:
        return np.ones(rows.size, dtype=bool)

    def metadata(self, rows: np.ndarray, size: int) -> tuple[np.ndarray, list[tuple[int, str]]]:
        out = np.full(size, None, dtype=object)
        out[rows] = self.dicts[rows]
        return out, []


def legacy_table(records: list[Any], candidates: np.ndarray, *, default_session_id: str,
                 default_collector: str = "legacy.unknown", default_sampling_interval_ms: int = 0
                 ) -> RecordTable | None:
    """The legacy-shaped records among ``candidates`` (sorted positions into ``records``) as
    canonical events; ``rest``: the candidates left for the record-by-record path. None when
    no candidate has the legacy shape, or their metadata do not form one Arrow type."""
    positions = np.asarray([position for position in candidates.tolist()
                            if type(record := records[position]) is dict and record.keys() <= LEGACY_KEYS],
                           dtype=np.int64)
    if positions.size == 0:
        return None
    columns = _Columns([records[position] for position in positions.tolist()])
    values = _values(columns, default_session_id=default_session_id, default_collector=default_collector,
                     default_sampling_interval_ms=default_sampling_interval_ms)
    slow = columns.slow | _unencodable(values)
    metadata = _stripped(columns.metadata, columns.consulted)
    if slow:
        keep = [row for row in range(len(metadata)) if row not in slow]
        values = {name: [column[row] for row in keep] for name, column in values.items()}
        metadata = [metadata[row] for row in keep]
        positions = positions[keep]
    made = metadata_arrays(list(metadata)) if positions.size else None
    if made is None:
        return None
    table = pa.table({**{field.name: pa.array(values[field.name], field.type) for field in SCHEMA},
                      "metadata": made[0]})
    try:
        events = table_events(table, _Metadata(made[1]), default_session_id=default_session_id)
    except pa.ArrowException:  # as the other columnar paths: whatever Arrow cannot do, the records can
        return None
    kept = positions[events.kept]
    return RecordTable(frame=events.frame, positions=kept, rest=np.setdiff1d(candidates, kept))
