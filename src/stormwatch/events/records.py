"""One raw telemetry record to one canonical event row, by stormlog's rules.

Schema v2/v3 exactly as stormlog 0.3.5 validates them, v4 as stormlog 0.4.3
does, and stormlog 0.3.5's permissive legacy conversion
(:mod:`stormwatch.events.legacy_records`), one Python record at a time. The
columnar fast path (:mod:`stormwatch.formats.columnar`) applies the same rules
to whole columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stormwatch.events.collective_tokens import has_collective_token_in_values
from stormwatch.events.legacy_records import legacy_record
from stormwatch.events.schema import (
    CAPABILITY_BOOLEAN_FIELDS,
    CAPABILITY_STRING_FIELDS,
    COLUMNS,
    COUNTER_CAPABILITY,
    COUNTER_COLUMNS,
    KNOWN_FIELDS,
    NULLABLE_REQUIRED_V3,
    REQUIRED_V3_FIELDS,
    RecordError,
)
from stormwatch.events.values import (
    as_int,
    as_metadata,
    as_optional_int,
    as_optional_nonblank,
    as_required_string,
    as_string,
    check_values,
    resolve_identity,
    resolve_session_id,
)


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


def inferred_capabilities(metadata: dict[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
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
    metadata = as_metadata(record.get("metadata", {}))
    identity = resolve_identity(
        record.get("job_id"), record.get("rank"), record.get("local_rank"), record.get("world_size")
    )
    session_id = resolve_session_id(record, metadata, default_session_id)
    upgraded = {**record, "session_id": session_id}
    _check_shape(upgraded)
    nullable_core = version == 4
    metadata = as_metadata(record["metadata"])
    if nullable_core:
        metadata = inferred_capabilities(metadata, record)
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
        values = legacy_record(
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
