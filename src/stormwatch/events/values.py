"""Scalar rules for one telemetry record's values: integer and string coercion, rank identity,
session ids and the range checks stormlog's validator applies to every event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stormwatch.events.schema import INT64_MAX, INT64_MIN, NULLABLE_CORE_V4, UNKNOWN_HOST, RecordError
from stormwatch.events.session_ids import stable_legacy_session_id

# --------------------------------------------------------------------------- scalar coercion


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def as_int(value: object, name: str) -> int:
    """The value as a 64-bit int; bools, floats and strings are rejected."""
    if not is_int(value):
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


def as_metadata(value: object) -> dict[str, Any]:
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
