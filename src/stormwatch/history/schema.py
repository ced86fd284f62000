"""The rank-row schema shared by the history store and fleet.parquet, and the history's file layout.

Layout (keys relative to the reports prefix)::

    history/date=YYYY-MM-DD/audit-YYYYMMDDTHHMMSSZ-<8 hex>[-b<8 hex>].parquet
    history/date=YYYY-MM-DD/compacted-<8 hex>.parquet     (a night's files in one, see below)

``date`` is the audit's UTC date (Hive-style, so DuckDB's ``hive_partitioning`` and pandas'
``partitioning="hive"`` see it as a column); the first 8 hex digits are a digest of the audit's
(job id, input fingerprint) pairs, the ``-b`` ones of the job ids of one batch of it (an audit
writes one file per batch it commits, see ``stormwatch.tasks.commits``), so replaying the same
audit ``--as-of`` the same time writes the same keys again instead of second files. A compacted
file (``stormwatch.tasks.history_compact``) holds the rows of the night's files it names in its
footer key :data:`REPLACES_KEY`; readers skip those files while they still exist.

One schema, :data:`HISTORY_SCHEMA`, for every history file and for fleet.parquet: the same names
and types (fleet.parquet leaves null what a fleet row does not know: ``audit_time``,
``peak_allocated_bytes``, ``first_anomaly_severity``, ``job_started_ns``). Each file carries its
version twice: the ``schema_version`` column, and the footer key :data:`SCHEMA_VERSION_KEY`
(history files also :data:`PARQUET_METADATA_KEY`, ``{"schema_version": N}``, which marks them as
history files).

Units: every ``*_bytes`` column is bytes; ``*_ns`` columns are integer nanoseconds since the Unix
epoch; ``audit_time`` is ``timestamp[us, UTC]`` (microseconds: what Spark, Trino and BigQuery
read). Invariant: one row per (audit_id, job_id, session_id, rank): a job diagnosed session by
session keeps a row per rank of each session (``session_id``, ``session_verdict``), with the job's
``verdict`` (the worst of its sessions) on each.

Versions: 2 added ``session_id`` and ``session_verdict``; 3 made ``audit_time`` microseconds and
added :data:`ADDED_IN` ``[3]`` (fleet.parquet before 3 named ``hidden_gap_peak_bytes``
``hidden_gap_peak_abs_bytes``); 4 added the rank's duration and growth, :data:`GROWTH_COLUMNS`
(``*_bytes_per_hour`` in bytes per hour, ``capacity_after_start_s`` in seconds, ``duration_ns``
in nanoseconds, not an epoch time; see :class:`stormwatch.growth.figures.RankGrowth`).
:func:`conform` reads every version: missing columns null, ``audit_time`` cast to microseconds,
old names renamed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime

import orjson
import pyarrow as pa

HISTORY_SCHEMA_VERSION = 4
HISTORY_FOLDER = "history"
PARQUET_METADATA_KEY = b"stormwatch.history"
#: Footer key of both history files and fleet.parquet: the schema version as decimal text (``b"3"``).
SCHEMA_VERSION_KEY = b"stormwatch.schema_version"
#: Footer key of a compacted history file: JSON list of the keys (relative to reports) whose rows it holds.
REPLACES_KEY = b"stormwatch.replaces"
AUDIT_TIME_TYPE = pa.timestamp("us", tz="UTC")

HISTORY_SCHEMA = pa.schema([
    pa.field("audit_id", pa.string()),                        # audit-YYYYMMDDTHHMMSSZ-<8 hex>
    pa.field("audit_time", AUDIT_TIME_TYPE),                  # the audit's --as-of time; null in fleet.parquet
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
    pa.field("first_cause", pa.bool_()),                      # this rank is the job's earliest indicator's
    pa.field("verdict", pa.string()),                         # VerdictStatus value: the job's
    pa.field("input_fingerprint", pa.string()),
    pa.field("job_started_ns", pa.int64()),                   # earliest session start: orders runs
    pa.field("session_id", pa.string()),                      # the session (group) the rank ran in (v2)
    pa.field("session_verdict", pa.string()),                 # VerdictStatus value: the session's (v2)
    pa.field("availability", pa.string()),                    # model row's availability (v3)
    pa.field("has_anomaly", pa.bool_()),                      # (v3)
    pa.field("first_anomaly_phase_path", pa.string()),        # (v3)
    pa.field("outlier", pa.bool_()),                          # flagged on any metric; null: no fleet facts (v3)
    pa.field("schema_version", pa.int32(), nullable=False),   # the version the row was written in (v3)
    pa.field("duration_ns", pa.int64()),                      # first to last sample of the rank, a length (v4)
    pa.field("allocated_growth_bytes_per_hour", pa.float64()),  # steady-state growth after warm-up (v4)
    pa.field("reserved_growth_bytes_per_hour", pa.float64()),   # (v4)
    pa.field("growth_confidence", pa.float64()),              # that the judged growth is above zero, [0, 1] (v4)
    pa.field("leak", pa.bool_()),                             # null: no growth figure (v4)
    pa.field("capacity_after_start_s", pa.float64()),         # when, at that growth, the device fills (v4)
    pa.field("growth_gap", pa.string()),                      # GrowthGap value: why no growth figure (v4)
    pa.field("used_percent", pa.float64()),                   # peak use / device total x 100 (v4)
    pa.field("unused_gib_hours", pa.float64()),               # (total - peak use) x duration, GiB-hours (v4)
])
HISTORY_COLUMNS = tuple(HISTORY_SCHEMA.names)
#: Columns version 2 added.
SESSION_COLUMNS = ("session_id", "session_verdict")
#: Columns version 4 added: a rank's duration and its growth (stormwatch.growth).
GROWTH_COLUMNS = ("duration_ns", "allocated_growth_bytes_per_hour", "reserved_growth_bytes_per_hour",
                  "growth_confidence", "leak", "capacity_after_start_s", "growth_gap")
#: Columns version 4 added beside them: the rank's headroom (stormwatch.growth.headroom), from its
#: peaks, device total and duration.
HEADROOM_COLUMNS = ("used_percent", "unused_gib_hours")
#: Columns each version added: a file of an older version reads them as nulls (``schema_version``: its own).
ADDED_IN: dict[int, tuple[str, ...]] = {
    2: SESSION_COLUMNS,
    3: ("availability", "has_anomaly", "first_anomaly_phase_path", "outlier", "schema_version"),
    4: GROWTH_COLUMNS + HEADROOM_COLUMNS,
}
#: Old column names, as fleet.parquet wrote them before version 3, and their names now.
RENAMED = {"hidden_gap_peak_abs_bytes": "hidden_gap_peak_bytes"}
STRING_COLUMNS = tuple(field.name for field in HISTORY_SCHEMA if field.type == pa.string())
#: String columns every version has: read dictionary-encoded straight from the pages.
V1_STRING_COLUMNS = tuple(name for name in STRING_COLUMNS if not any(name in added for added in ADDED_IN.values()))
#: The schema rows are read in: strings dictionary-encoded (what the Parquet pages hold), so a
#: million rows decode and become pandas categoricals without a Python string per value.
READ_SCHEMA = pa.schema([
    field.with_type(pa.dictionary(pa.int32(), pa.string())) if field.name in STRING_COLUMNS else field
    for field in HISTORY_SCHEMA
])

_KEY = re.compile(
    r"^history/date=(?P<date>\d{4}-\d{2}-\d{2})/"
    r"(?:(?P<audit>audit-\d{8}T\d{6}Z-[0-9a-f]{8})(?:-b[0-9a-f]{8})?|(?P<compacted>compacted-[0-9a-f]{8}))\.parquet$"
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


def is_compacted(key: str) -> bool:
    """Whether ``key`` is a compacted history file's (``history/date=D/compacted-<8 hex>.parquet``)."""
    found = _KEY.match(key)
    return found is not None and found["compacted"] is not None


def compacted_key(day: date, replaced: Iterable[str]) -> str:
    """The key of night ``day``'s compacted file holding the rows of the files ``replaced``: a digest
    of their sorted keys, so compacting the same files again writes the same key."""
    digest = hashlib.sha256("\n".join(sorted(replaced)).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{partition_folder(day)}/compacted-{digest}.parquet"


def file_metadata(*, history: bool = True) -> dict[bytes, bytes]:
    """The footer key-value metadata a file of :data:`HISTORY_SCHEMA` carries: the schema version,
    and (``history``) the key that marks a history file (fleet.parquet has the version only)."""
    version = {SCHEMA_VERSION_KEY: str(HISTORY_SCHEMA_VERSION).encode()}
    return {PARQUET_METADATA_KEY: orjson.dumps({"schema_version": HISTORY_SCHEMA_VERSION}), **version} if history \
        else version


def file_version(metadata: dict[bytes, bytes] | None, *, name: str) -> int:
    """The schema version a file's footer ``metadata`` names (:data:`PARQUET_METADATA_KEY`, else
    :data:`SCHEMA_VERSION_KEY`). Raises :class:`HistoryFileError` naming ``name`` when it names
    none (a foreign file), an unreadable one, or one newer than this code's."""
    found = metadata or {}
    raw, plain = found.get(PARQUET_METADATA_KEY), found.get(SCHEMA_VERSION_KEY)
    if raw is None and plain is None:
        raise HistoryFileError(f"{name}: not a stormwatch history file (no {PARQUET_METADATA_KEY.decode()} metadata)")
    try:
        version = orjson.loads(raw)["schema_version"] if raw is not None else int(plain or b"")
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise HistoryFileError(f"{name}: unreadable history metadata") from error
    if not isinstance(version, int) or not 1 <= version <= HISTORY_SCHEMA_VERSION:
        known = f"1..{HISTORY_SCHEMA_VERSION}"
        raise HistoryFileError(f"{name}: history schema version {version!r} (this code reads {known})")
    return version


def source_columns(columns: Sequence[str] | None, present: Sequence[str]) -> list[str] | None:
    """The columns to read from a file whose columns are ``present`` for the schema's ``columns``
    (None: all): those it has, under their old names where it used them."""
    if columns is None:
        return None
    wanted = {*columns, *(old for old, new in RENAMED.items() if new in columns)}
    return [name for name in present if name in wanted]


def conform(
    table: pa.Table, *, name: str, schema: pa.Schema = HISTORY_SCHEMA, columns: Sequence[str] | None = None
) -> pa.Table:
    """``table`` (as read from a file named ``name``, of any version) in ``schema``
    (:data:`HISTORY_SCHEMA` or :data:`READ_SCHEMA`), limited to ``columns`` (default: all) in schema
    order: old names renamed (:data:`RENAMED`), columns added since the file's version null
    (``schema_version``: the file's), ``audit_time`` in microseconds.

    Raises :class:`HistoryFileError` when the footer names no version (a foreign file), one newer
    than this code's, or the columns are missing or of the wrong type.
    """
    version = file_version(table.schema.metadata, name=name)
    wanted = [column for column in HISTORY_COLUMNS if columns is None or column in columns]
    renames = {old: new for old, new in RENAMED.items() if old in table.column_names and new not in table.column_names}
    if renames:
        table = table.rename_columns([renames.get(column, column) for column in table.column_names])
    for added_in, added in ADDED_IN.items():
        for column in added if version < added_in else ():
            if column in wanted and column not in table.column_names:
                kind = HISTORY_SCHEMA.field(column).type
                filler = pa.array([version] * table.num_rows, kind) if column == "schema_version" \
                    else pa.nulls(table.num_rows, kind)
                table = table.append_column(pa.field(column, kind), filler)
    missing = [column for column in wanted if column not in table.column_names]
    if missing:
        raise HistoryFileError(f"{name}: missing columns {', '.join(missing)}")
    table = table.select(wanted)
    target = pa.schema([schema.field(column) for column in wanted], metadata=table.schema.metadata)
    try:
        if "audit_time" in wanted and table.schema.field("audit_time").type != AUDIT_TIME_TYPE:
            # versions 1-2 wrote nanoseconds; whole microseconds always (datetimes), so nothing is lost
            index = wanted.index("audit_time")
            table = table.set_column(index, target.field(index), table.column(index).cast(AUDIT_TIME_TYPE, safe=False))
        return table.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise HistoryFileError(f"{name}: columns of the wrong type ({error})") from error
