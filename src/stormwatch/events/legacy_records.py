"""stormlog 0.3.5's permissive conversion of legacy records (no ``schema_version``) to v3 events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stormwatch.events.schema import IDENTITY_FIELDS, UNKNOWN_HOST, UNKNOWN_PID, RecordError
from stormwatch.events.values import (
    as_int,
    as_optional_int,
    as_required_string,
    as_string,
    check_values,
    resolve_identity,
    resolve_session_id,
)


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


def legacy_record(
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
