"""The canonical events frame's columns, and the field sets of stormlog's telemetry schemas.

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
"""

from __future__ import annotations

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
