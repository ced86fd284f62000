"""Canonical event columns and the rules every telemetry record must satisfy.

One event is one row of a pandas DataFrame with the columns in :data:`COLUMNS`.
The names and meanings are those of stormlog's ``TelemetryEventV3`` fields
(all byte counters in bytes, timestamps in nanoseconds since the epoch), plus:

* ``schema_version``: 3 for schema v2/v3 and legacy records (stormlog 0.3.5
  upgrades them all to v3), 4 for schema v4 records (stormlog 0.4.x).
* ``metadata``: the record's metadata ``dict`` for every event whose type is not
  ``"sample"``; ``None`` for samples (their metadata is only ever scanned for
  collective-communication tokens, see ``metadata_collective``), except that v4
  samples keep theirs (it carries ``memory_capabilities``).
* ``metadata_collective``: whether any string value inside the metadata
  contains a collective-communication token (``nccl``, ``all_reduce`` ...).

This module holds the scalar rules, applied to one Python record at a time:
schema v2/v3 exactly as stormlog 0.3.5 validates them, v4 as stormlog 0.4.3
does, and stormlog 0.3.5's permissive legacy conversion. The columnar fast path
(:mod:`stormwatch.formats.columnar`) applies the same rules to whole columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stormwatch.ids import stable_legacy_session_id
from stormwatch.tokens import has_collective_token_in_values

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UNKNOWN_PID = -1
UNKNOWN_HOST = "unknown"

COLUMNS: tuple[str, ...] = (
    "session_id",
    "timestamp_ns",
    "event_type",
    "collector",
    "sampling_interval_ms",
    "pid",
    "host",
    "device_id",
    "allocator_allocated_bytes",
    "allocator_reserved_bytes",
    "allocator_active_bytes",
    "allocator_inactive_bytes",
    "allocator_change_bytes",
    "device_used_bytes",
    "device_free_bytes",
    "device_total_bytes",
    "context",
    "job_id",
    "rank",
    "local_rank",
    "world_size",
    "metadata",
    "schema_version",
    "metadata_collective",
)
STRING_COLUMNS = ("session_id", "event_type", "collector", "host", "context", "job_id")
INT_COLUMNS = (
    "timestamp_ns",
    "sampling_interval_ms",
    "pid",
    "device_id",
    "rank",
    "local_rank",
    "world_size",
    "schema_version",
)
COUNTER_COLUMNS = (
    "allocator_allocated_bytes",
    "allocator_reserved_bytes",
    "allocator_active_bytes",
    "allocator_inactive_bytes",
    "allocator_change_bytes",
    "device_used_bytes",
    "device_free_bytes",
    "device_total_bytes",
)
#: Columns of the de-duplication key of stormlog's loader.
DEDUPE_KEY = (
    "session_id",
    "timestamp_ns",
    "rank",
    "local_rank",
    "world_size",
    "event_type",
    "allocator_allocated_bytes",
    "allocator_reserved_bytes",
    "device_used_bytes",
    "context",
)

REQUIRED_V3_FIELDS = (
    "schema_version",
    "session_id",
    "timestamp_ns",
    "event_type",
    "collector",
    "sampling_interval_ms",
    "pid",
    "host",
    "device_id",
    "allocator_allocated_bytes",
    "allocator_reserved_bytes",
    "allocator_active_bytes",
    "allocator_inactive_bytes",
    "allocator_change_bytes",
    "device_used_bytes",
    "device_free_bytes",
    "device_total_bytes",
    "context",
    "metadata",
)
IDENTITY_FIELDS = ("job_id", "rank", "local_rank", "world_size")
KNOWN_FIELDS = frozenset(REQUIRED_V3_FIELDS + IDENTITY_FIELDS)
#: Required fields that may hold ``null`` (absent is an error, null is not).
NULLABLE_REQUIRED_V3 = (
    "allocator_active_bytes",
    "allocator_inactive_bytes",
    "device_free_bytes",
    "device_total_bytes",
    "context",
)
#: v4 makes these core counters nullable as well.
NULLABLE_CORE_V4 = (
    "allocator_allocated_bytes",
    "allocator_reserved_bytes",
    "allocator_change_bytes",
    "device_used_bytes",
)
CAPABILITY_STRING_FIELDS = ("backend", "telemetry_collector", "sampling_source")
CAPABILITY_BOOLEAN_FIELDS = (
    "supports_allocator_allocated",
    "supports_allocator_reserved",
    "supports_allocator_active",
    "supports_allocator_inactive",
    "supports_device_used",
    "supports_device_free",
    "supports_device_total",
    "supports_native_allocator_history",
    "supports_fragmentation_analysis",
    "supports_allocator_attribution",
    "supports_bounded_profiling",
)
COUNTER_CAPABILITY = {
    "allocator_allocated_bytes": "supports_allocator_allocated",
    "allocator_reserved_bytes": "supports_allocator_reserved",
    "allocator_active_bytes": "supports_allocator_active",
    "allocator_inactive_bytes": "supports_allocator_inactive",
    "device_used_bytes": "supports_device_used",
    "device_free_bytes": "supports_device_free",
    "device_total_bytes": "supports_device_total",
}


class RecordError(ValueError):
    """A record that stormlog's rules reject; the message says which rule."""


# --------------------------------------------------------------------------- scalar coercion


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def as_int(value: object, name: str) -> int:
    """The value as a 64-bit int; bools, floats and strings are rejected."""
    if not _is_int(value):
        raise RecordError(f"{name} must be an integer")
    number = int(value)  # type: ignore[call-overload]
    if number < INT64_MIN or number > INT64_MAX:
        raise RecordError(f"{name} is outside the 64-bit range")
    return number


def as_optional_int(value: object, name: str) -> int | None:
    return None if value is None else as_int(value, name)


def as_string(value: object, name: str, *, allow_none: bool = False) -> str | None:
    """stormlog's string rule: None only when allowed, else a non-blank string."""
    if value is None:
        if allow_none:
            return None
        raise RecordError(f"{name} must be a non-empty string")
    if not isinstance(value, str):
        raise RecordError(f"{name} must be a string")
    if not value.strip() and not allow_none:
        raise RecordError(f"{name} must be a non-empty string")
    return value


def as_required_string(value: object, name: str) -> str:
    text = as_string(value, name)
    assert text is not None
    return text


def as_optional_nonblank(value: object, name: str) -> str | None:
    return None if value is None else as_required_string(value, name)


def _as_metadata(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordError("metadata must be an object")
    return dict(value)


# --------------------------------------------------------------------------- identity


def resolve_identity(
    job_id: object,
    rank: object,
    local_rank: object,
    world_size: object,
    *,
    metadata: Mapping[str, Any] | None = None,
) -> tuple[str | None, int, int, int]:
    """(job_id, rank, local_rank, world_size) by stormlog's identity rules.

    Explicit values win over metadata; missing rank is 0, local_rank defaults
    to rank, world_size to 1. Invariants: 0 <= rank < world_size,
    0 <= local_rank < world_size.
    """
    meta = metadata or {}
    raw_job = job_id if job_id is not None else meta.get("job_id")
    raw_rank = rank if rank is not None else meta.get("rank")
    raw_local = local_rank if local_rank is not None else meta.get("local_rank")
    raw_world = world_size if world_size is not None else meta.get("world_size")
    if raw_world is None:
        raw_world = 1
    if raw_rank is None:
        raw_rank = 0
    if raw_local is None:
        raw_local = raw_rank
    job = as_optional_nonblank(raw_job, "job_id")
    rank_value = as_int(raw_rank, "rank")
    local_value = as_int(raw_local, "local_rank")
    world_value = as_int(raw_world, "world_size")
    check_identity(rank_value, local_value, world_value)
    return job, rank_value, local_value, world_value


def check_identity(rank: int, local_rank: int, world_size: int) -> None:
    if rank < 0:
        raise RecordError("rank must be >= 0")
    if local_rank < 0:
        raise RecordError("local_rank must be >= 0")
    if world_size <= 0:
        raise RecordError("world_size must be >= 1")
    if rank >= world_size:
        raise RecordError("rank must be < world_size")
    if local_rank >= world_size:
        raise RecordError("local_rank must be < world_size")


def resolve_session_id(record: Mapping[str, Any], metadata: Mapping[str, Any], default_session_id: str | None) -> str:
    raw = record.get("session_id")
    if raw is None:
        raw = metadata.get("session_id")
    if isinstance(raw, str) and raw.strip():
        return raw
    if default_session_id is not None:
        return default_session_id
    stamp = record.get("timestamp_ns", record.get("timestamp", "unknown"))
    return stable_legacy_session_id(stamp, record.get("host", UNKNOWN_HOST), record.get("pid", -1))


# --------------------------------------------------------------------------- value checks


def check_values(values: Mapping[str, Any], *, nullable_core: bool) -> None:
    """Range and cross-field rules every canonical event obeys (stormlog's validator), and
    strings that are valid Unicode (a ``\\udfff`` escape decodes to a lone surrogate)."""
    for name in ("session_id", "event_type", "collector", "host", "context", "job_id"):
        text = values.get(name)
        if isinstance(text, str) and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise RecordError(f"{name} holds an unpaired surrogate (not valid Unicode)") from None
    if values["timestamp_ns"] < 0:
        raise RecordError("timestamp_ns must be >= 0")
    if values["sampling_interval_ms"] < 0:
        raise RecordError("sampling_interval_ms must be >= 0")
    if values["pid"] < -1:
        raise RecordError("pid must be >= -1")
    for name in (
        "allocator_allocated_bytes",
        "allocator_reserved_bytes",
        "allocator_active_bytes",
        "allocator_inactive_bytes",
        "device_used_bytes",
        "device_free_bytes",
        "device_total_bytes",
    ):
        value = values[name]
        if value is None:
            if not nullable_core and name in NULLABLE_CORE_V4:
                raise RecordError(f"{name} must be an integer")
            continue
        if value < 0:
            raise RecordError(f"{name} must be >= 0")
    total = values["device_total_bytes"]
    if total is not None:
        used = values["device_used_bytes"]
        free = values["device_free_bytes"]
        if used is not None and used > total:
            raise RecordError("device_used_bytes cannot exceed device_total_bytes")
        if free is not None and free > total:
            raise RecordError("device_free_bytes cannot exceed device_total_bytes")
    check_identity(values["rank"], values["local_rank"], values["world_size"])


# --------------------------------------------------------------------------- schema records


def _check_shape(record: Mapping[str, Any]) -> None:
    missing = [name for name in REQUIRED_V3_FIELDS if name not in record]
    if missing:
        raise RecordError(f"missing required telemetry fields: {', '.join(missing)}")
    unknown = sorted(str(name) for name in record if name not in KNOWN_FIELDS)
    if unknown:
        raise RecordError(f"unknown telemetry fields: {', '.join(unknown)}")
    for name in ("rank", "local_rank", "world_size"):
        if name in record:
            as_int(record[name], name)
    if "job_id" in record:
        as_optional_nonblank(record["job_id"], "job_id")


def _inferred_capabilities(metadata: dict[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """stormlog 0.4.3 fills ``memory_capabilities`` from the counters when absent."""
    if "memory_capabilities" in metadata:
        return metadata
    collector = str(record.get("collector", "legacy.unknown"))
    backend = metadata.get("backend")
    if not isinstance(backend, str) or not backend.strip():
        backend = next(
            (b for b in ("cuda", "rocm", "mps", "cpu", "tensorflow", "jax") if b in collector.lower()),
            "unknown",
        )

    def has(name: str) -> bool:
        return record.get(name) is not None

    allocated, reserved = has("allocator_allocated_bytes"), has("allocator_reserved_bytes")
    capabilities = {
        "backend": str(backend),
        "telemetry_collector": collector,
        "sampling_source": str(metadata.get("sampling_source", "legacy")),
        "supports_allocator_allocated": allocated,
        "supports_allocator_reserved": reserved,
        "supports_allocator_active": has("allocator_active_bytes"),
        "supports_allocator_inactive": has("allocator_inactive_bytes"),
        "supports_device_used": has("device_used_bytes"),
        "supports_device_free": has("device_free_bytes"),
        "supports_device_total": has("device_total_bytes"),
        "supports_native_allocator_history": False,
        "supports_fragmentation_analysis": allocated and reserved,
        "supports_allocator_attribution": allocated and reserved,
        "supports_bounded_profiling": False,
    }
    return {**metadata, "memory_capabilities": capabilities}


def _check_capabilities(record: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
    capabilities = metadata.get("memory_capabilities")
    if not isinstance(capabilities, Mapping):
        raise RecordError("metadata.memory_capabilities must be an object")
    expected = CAPABILITY_STRING_FIELDS + CAPABILITY_BOOLEAN_FIELDS
    missing = [name for name in expected if name not in capabilities]
    if missing:
        raise RecordError("missing memory capability fields: " + ", ".join(missing))
    unknown = sorted(set(capabilities) - set(expected))
    if unknown:
        raise RecordError("unknown memory capability fields: " + ", ".join(unknown))
    for name in CAPABILITY_STRING_FIELDS:
        as_required_string(capabilities[name], f"metadata.memory_capabilities.{name}")
    for name in CAPABILITY_BOOLEAN_FIELDS:
        if not isinstance(capabilities[name], bool):
            raise RecordError(f"metadata.memory_capabilities.{name} must be a boolean")
    for counter, capability in COUNTER_CAPABILITY.items():
        if record[counter] is not None and not capabilities[capability]:
            raise RecordError(f"{counter} must be null when {capability} is false")
    if record["allocator_change_bytes"] is not None and not capabilities["supports_allocator_allocated"]:
        raise RecordError("allocator_change_bytes must be null without allocated memory support")


def _schema_record(record: Mapping[str, Any], default_session_id: str | None) -> dict[str, Any]:
    version = as_int(record["schema_version"], "schema_version")
    if version not in (2, 3, 4):
        raise RecordError(f"unsupported schema_version: {version}")
    metadata = _as_metadata(record.get("metadata", {}))
    identity = resolve_identity(
        record.get("job_id"), record.get("rank"), record.get("local_rank"), record.get("world_size")
    )
    session_id = resolve_session_id(record, metadata, default_session_id)
    upgraded = {**record, "session_id": session_id}
    _check_shape(upgraded)
    nullable_core = version == 4
    metadata = _as_metadata(record["metadata"])
    if nullable_core:
        metadata = _inferred_capabilities(metadata, record)
        _check_capabilities(record, metadata)

    def counter(name: str) -> int | None:
        if nullable_core or name in NULLABLE_REQUIRED_V3:
            return as_optional_int(record[name], name)
        return as_int(record[name], name)

    values: dict[str, Any] = {
        "session_id": session_id,
        "timestamp_ns": as_int(record["timestamp_ns"], "timestamp_ns"),
        "event_type": as_required_string(record["event_type"], "event_type"),
        "collector": as_required_string(record["collector"], "collector"),
        "sampling_interval_ms": as_int(record["sampling_interval_ms"], "sampling_interval_ms"),
        "pid": as_int(record["pid"], "pid"),
        "host": as_required_string(record["host"], "host"),
        "device_id": as_int(record["device_id"], "device_id"),
        **{name: counter(name) for name in COUNTER_COLUMNS},
        "context": as_string(record["context"], "context", allow_none=True),
        "job_id": identity[0],
        "rank": identity[1],
        "local_rank": identity[2],
        "world_size": identity[3],
        "metadata": metadata,
        "schema_version": 4 if nullable_core else 3,
    }
    check_values(values, nullable_core=nullable_core)
    return values


# --------------------------------------------------------------------------- legacy records


def _legacy_metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    raw = record.get("metadata")
    metadata: dict[str, Any] = {}
    if isinstance(raw, Mapping):
        metadata.update(raw)
    elif raw is not None:
        raise RecordError("metadata must be an object when provided")
    for key, value in record.items():
        if isinstance(key, str) and key.startswith("metadata_"):
            metadata[key.removeprefix("metadata_")] = value
    return metadata


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _legacy_timestamp_ns(record: Mapping[str, Any]) -> int:
    if "timestamp_ns" in record:
        return as_int(record["timestamp_ns"], "timestamp_ns")
    stamp = record.get("timestamp")
    if _number(stamp):
        try:
            return as_int(int(float(stamp) * 1_000_000_000), "timestamp")  # type: ignore[arg-type]
        except (OverflowError, ValueError) as exc:
            raise RecordError("timestamp is not a finite number") from exc
    raise RecordError("legacy record is missing a valid timestamp")


def _legacy_device_id(record: Mapping[str, Any]) -> int:
    if "device_id" in record:
        return as_int(record["device_id"], "device_id")
    device = record.get("device")
    if isinstance(device, str):
        lowered = device.lower()
        if "cpu" in lowered:
            return -1
        if ":" in device:
            tail = device.rsplit(":", 1)[-1]
            if tail.isdigit():
                return as_int(int(tail), "device_id")
        if lowered.startswith("/gpu"):
            return 0
    return 0 if "memory_mb" in record else -1


def _first_present_int(record: Mapping[str, Any], names: tuple[str, ...]) -> tuple[bool, int]:
    for name in names:
        if name in record:
            return True, as_int(record[name], name)
    return False, 0


def _legacy_allocated(record: Mapping[str, Any]) -> int:
    found, value = _first_present_int(record, ("allocator_allocated_bytes", "memory_allocated"))
    if found:
        return value
    memory_mb = record.get("memory_mb")
    if _number(memory_mb):
        try:
            return as_int(int(float(memory_mb) * 1024**2), "memory_mb")  # type: ignore[arg-type]
        except (OverflowError, ValueError) as exc:
            raise RecordError("memory_mb is not a finite number") from exc
    if "device_used_bytes" in record:
        return as_int(record["device_used_bytes"], "device_used_bytes")
    return 0


def _legacy_total(record: Mapping[str, Any], metadata: Mapping[str, Any]) -> int | None:
    if "device_total_bytes" in record:
        return as_optional_int(record["device_total_bytes"], "device_total_bytes")
    for source in (record, metadata):
        for name in ("total_memory", "device_total", "total_bytes"):
            if name in source:
                return as_optional_int(source[name], name)
    return None


def _legacy_collector(record: Mapping[str, Any], default: str, device_id: int, metadata: Mapping[str, Any]) -> str:
    collector = record.get("collector")
    if isinstance(collector, str) and collector.strip():
        return collector
    backend = record.get("backend", metadata.get("backend"))
    if isinstance(backend, str):
        known = {
            "mps": "stormlog.mps_tracker",
            "rocm": "stormlog.rocm_tracker",
            "cuda": "stormlog.cuda_tracker",
            "cpu": "stormlog.cpu_tracker",
        }
        if backend.strip().lower() in known:
            return known[backend.strip().lower()]
    if "memory_mb" in record:
        return "stormlog.tensorflow.memory_tracker"
    if "memory_allocated" in record:
        return "stormlog.cpu_tracker" if device_id == -1 else "stormlog.cuda_tracker"
    return default


def _legacy_record(
    record: Mapping[str, Any],
    *,
    default_session_id: str | None,
    default_collector: str,
    default_sampling_interval_ms: int,
) -> dict[str, Any]:
    metadata = _legacy_metadata(record)
    timestamp_ns = _legacy_timestamp_ns(record)
    device_id = _legacy_device_id(record)
    allocated = _legacy_allocated(record)
    found, reserved = _first_present_int(record, ("allocator_reserved_bytes", "memory_reserved"))
    reserved = reserved if found else allocated
    _, change = _first_present_int(record, ("allocator_change_bytes", "memory_change"))
    active = as_optional_int(record.get("allocator_active_bytes"), "allocator_active_bytes")
    inactive = as_optional_int(record.get("allocator_inactive_bytes"), "allocator_inactive_bytes")
    used = as_int(record["device_used_bytes"], "device_used_bytes") if "device_used_bytes" in record else allocated
    total = _legacy_total(record, metadata)
    if "device_free_bytes" in record:
        free = as_optional_int(record["device_free_bytes"], "device_free_bytes")
    else:
        free = None if total is None else max(total - used, 0)
    event_type = as_string(record.get("event_type", record.get("type", "sample")), "event_type")
    sampling = as_int(record.get("sampling_interval_ms", default_sampling_interval_ms), "sampling_interval_ms")
    if "pid" in record:
        pid = as_int(record["pid"], "pid")
    elif "pid" in metadata:
        pid = as_int(metadata["pid"], "pid")
    else:
        pid = UNKNOWN_PID
    if "host" in record:
        host = as_string(record["host"], "host") or UNKNOWN_HOST
    elif "host" in metadata:
        host = as_string(metadata["host"], "host") or UNKNOWN_HOST
    else:
        host = UNKNOWN_HOST
    collector = _legacy_collector(record, default_collector, device_id, metadata)
    identity = resolve_identity(
        record.get("job_id"),
        record.get("rank"),
        record.get("local_rank"),
        record.get("world_size"),
        metadata=metadata,
    )
    metadata = {k: v for k, v in metadata.items() if k not in IDENTITY_FIELDS}
    session_id = resolve_session_id(record, metadata, default_session_id)
    metadata.pop("session_id", None)
    context = as_string(record.get("context", record.get("message")), "context", allow_none=True)
    values: dict[str, Any] = {
        "session_id": session_id,
        "timestamp_ns": timestamp_ns,
        "event_type": as_required_string(event_type or "sample", "event_type"),
        "collector": as_required_string(collector, "collector"),
        "sampling_interval_ms": sampling,
        "pid": pid,
        "host": as_required_string(host, "host"),
        "device_id": device_id,
        "allocator_allocated_bytes": allocated,
        "allocator_reserved_bytes": reserved,
        "allocator_active_bytes": active,
        "allocator_inactive_bytes": inactive,
        "allocator_change_bytes": change,
        "device_used_bytes": used,
        "device_free_bytes": free,
        "device_total_bytes": total,
        "context": context,
        "job_id": identity[0],
        "rank": identity[1],
        "local_rank": identity[2],
        "world_size": identity[3],
        "metadata": metadata,
        "schema_version": 3,
    }
    check_values(values, nullable_core=False)
    return values


def normalise_record(
    record: object,
    *,
    default_session_id: str | None,
    default_collector: str = "legacy.unknown",
    default_sampling_interval_ms: int = 0,
) -> tuple[Any, ...]:
    """One raw record as a row of :data:`COLUMNS`; raises :class:`RecordError`.

    Records with ``schema_version`` follow the schema rules (v2/v3 as stormlog
    0.3.5, v4 as 0.4.3); the rest take stormlog 0.3.5's legacy conversion.
    """
    if not isinstance(record, Mapping):
        raise RecordError("record must be an object")
    if "schema_version" in record:
        values = _schema_record(record, default_session_id)
    else:
        values = _legacy_record(
            record,
            default_session_id=default_session_id,
            default_collector=default_collector,
            default_sampling_interval_ms=default_sampling_interval_ms,
        )
    metadata = values["metadata"]
    values["metadata_collective"] = has_collective_token_in_values(metadata)
    if values["event_type"] == "sample" and values["schema_version"] != 4:
        values["metadata"] = None
    return tuple(values[name] for name in COLUMNS)
