"""The history store's schema and file layout: Parquet files per audit, partitioned by audit date.

Layout (keys relative to the reports prefix)::

    history/date=YYYY-MM-DD/audit-YYYYMMDDTHHMMSSZ-<8 hex>[-b<8 hex>].parquet

``date`` is the audit's UTC date (Hive-style, so DuckDB's ``hive_partitioning`` and pandas'
``partitioning="hive"`` see it as a column); the first 8 hex digits are a digest of the audit's
(job id, input fingerprint) pairs, the ``-b`` ones of the job ids of one batch of it (an audit
writes one file per batch it commits, see ``stormwatch.tasks.commits``), so replaying the same
audit ``--as-of`` the same time writes the same keys again instead of second files. Each file
holds rows of :data:`HISTORY_SCHEMA` and the key :data:`PARQUET_METADATA_KEY` in its footer's
key-value metadata: ``{"schema_version": N}``.

Units: every ``*_bytes`` column is bytes; ``*_ns`` columns are integer nanoseconds since the Unix
epoch; ``audit_time`` is ``timestamp[ns, UTC]``. Invariant: one row per (audit_id, job_id, session_id,
rank): a job diagnosed session by session keeps a row per rank of each session (``session_id``,
``session_verdict``), with the job's ``verdict`` (the worst of its sessions) on each.

Version 2 added ``session_id`` and ``session_verdict``; a version-1 file reads with them null.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime

import orjson
import pyarrow as pa

HISTORY_SCHEMA_VERSION = 2
HISTORY_FOLDER = "history"
PARQUET_METADATA_KEY = b"stormwatch.history"
AUDIT_TIME_TYPE = pa.timestamp("ns", tz="UTC")

HISTORY_SCHEMA = pa.schema([
    pa.field("audit_id", pa.string(), nullable=False),        # audit-YYYYMMDDTHHMMSSZ-<8 hex>
    pa.field("audit_time", AUDIT_TIME_TYPE, nullable=False),  # the audit's --as-of time
    pa.field("job_id", pa.string(), nullable=False),
    pa.field("job_name", pa.string(), nullable=False),        # JobNamePattern.name_of(job_id)
    pa.field("world_size", pa.int32()),
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("host", pa.string()),
    pa.field("device_id", pa.int32()),
    pa.field("samples", pa.int64()),
    pa.field("peak_allocated_bytes", pa.int64()),
    pa.field("peak_reserved_bytes", pa.int64()),
    pa.field("peak_device_used_bytes", pa.int64()),
    pa.field("device_total_bytes", pa.int64()),
    pa.field("hidden_gap_peak_bytes", pa.int64()),            # model row's hidden_gap_peak_abs_bytes
    pa.field("hidden_gap_latest_bytes", pa.int64()),
    pa.field("allocated_delta_bytes", pa.int64()),
    pa.field("reserved_delta_bytes", pa.int64()),
    pa.field("first_anomaly_signal", pa.string()),
    pa.field("first_anomaly_severity", pa.string()),          # Severity value, null when unknown
    pa.field("first_anomaly_timestamp_ns", pa.int64()),
    pa.field("first_cause", pa.bool_(), nullable=False),      # this rank is the job's earliest indicator's
    pa.field("verdict", pa.string()),                         # VerdictStatus value: the job's
    pa.field("input_fingerprint", pa.string()),
    pa.field("job_started_ns", pa.int64()),                   # earliest session start: orders runs
    pa.field("session_id", pa.string()),                      # the session (group) the rank ran in (v2)
    pa.field("session_verdict", pa.string()),                 # VerdictStatus value: the session's (v2)
])
HISTORY_COLUMNS = tuple(HISTORY_SCHEMA.names)
#: Columns version 2 added.
SESSION_COLUMNS = ("session_id", "session_verdict")
STRING_COLUMNS = tuple(field.name for field in HISTORY_SCHEMA if field.type == pa.string())
#: The schema rows are read in: strings dictionary-encoded (what the Parquet pages hold), so a
#: million rows decode and become pandas categoricals without a Python string per value.
READ_SCHEMA = pa.schema([
    field.with_type(pa.dictionary(pa.int32(), pa.string())) if field.name in STRING_COLUMNS else field
    for field in HISTORY_SCHEMA
])

_KEY = re.compile(
    r"^history/date=(?P<date>\d{4}-\d{2}-\d{2})/(?P<audit>audit-\d{8}T\d{6}Z-[0-9a-f]{8})(?:-b[0-9a-f]{8})?\.parquet$"
)


class HistoryFileError(ValueError):
    """A file under ``history/`` that is not a readable history file of a known version."""


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is taken as UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def audit_id(audit_time: datetime, jobs: Iterable[tuple[str, str | None]]) -> str:
    """``audit-YYYYMMDDTHHMMSSZ-<8 hex>``: the audit time (UTC, whole seconds) and a digest of the
    sorted (job id, input fingerprint) pairs; equal for a replay of the same audit."""
    digest = hashlib.sha256(orjson.dumps(sorted((job, fp or "") for job, fp in jobs))).hexdigest()[:8]
    return f"audit-{as_utc(audit_time):%Y%m%dT%H%M%SZ}-{digest}"


def partition_folder(day: date) -> str:
    return f"{HISTORY_FOLDER}/date={day.isoformat()}"


def history_key(audit_time: datetime, audit: str) -> str:
    """The report key of one audit's file; its partition is the audit's UTC date."""
    return f"{partition_folder(as_utc(audit_time).date())}/{audit}.parquet"


def partition_date(key: str) -> date | None:
    """The date of a history file's partition, ``None`` when ``key`` is not a history file's key."""
    found = _KEY.match(key)
    if found is None:
        return None
    try:
        return date.fromisoformat(found["date"])
    except ValueError:
        return None


def file_metadata() -> dict[bytes, bytes]:
    """The footer key-value metadata every history file carries."""
    return {PARQUET_METADATA_KEY: orjson.dumps({"schema_version": HISTORY_SCHEMA_VERSION})}


def conform(
    table: pa.Table, *, name: str, schema: pa.Schema = HISTORY_SCHEMA, columns: Sequence[str] | None = None
) -> pa.Table:
    """``table`` (as read from a file named ``name``) in ``schema`` (:data:`HISTORY_SCHEMA` or
    :data:`READ_SCHEMA`), limited to ``columns`` (default: all) in schema order.

    Raises :class:`HistoryFileError` when the footer carries no history metadata (a foreign
    file), names a version newer than this code's, or the columns are missing or of the wrong type.
    """
    raw = (table.schema.metadata or {}).get(PARQUET_METADATA_KEY)
    if raw is None:
        raise HistoryFileError(f"{name}: not a stormwatch history file (no {PARQUET_METADATA_KEY.decode()} metadata)")
    try:
        version = orjson.loads(raw)["schema_version"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as error:
        raise HistoryFileError(f"{name}: unreadable history metadata") from error
    if not isinstance(version, int) or not 1 <= version <= HISTORY_SCHEMA_VERSION:
        known = f"1..{HISTORY_SCHEMA_VERSION}"
        raise HistoryFileError(f"{name}: history schema version {version!r} (this code reads {known})")
    wanted = [column for column in HISTORY_COLUMNS if columns is None or column in columns]
    if version < 2:  # written before sessions were kept: their columns are null
        for column in SESSION_COLUMNS:
            if column in wanted and column not in table.column_names:
                table = table.append_column(pa.field(column, pa.string()), pa.nulls(table.num_rows, pa.string()))
    missing = [column for column in wanted if column not in table.column_names]
    if missing:
        raise HistoryFileError(f"{name}: missing columns {', '.join(missing)}")
    target = pa.schema([schema.field(column) for column in wanted], metadata=table.schema.metadata)
    try:
        return table.select(wanted).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise HistoryFileError(f"{name}: columns of the wrong type ({error})") from error
