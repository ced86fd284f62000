"""The history store's IO: append one audit's rows, read a window of nights, prune old nights.

Files live under ``<reports>/history/date=YYYY-MM-DD/`` (see :mod:`stormwatch.history.schema`),
on any :class:`~stormwatch.tasks.storage.protocol.Storage`. An audit writes exactly one new object
(its own key; a replay of the same audit writes the same key again) and never rewrites another
night's file; reading lists ``history/`` once and reads the files of the nights asked for, skipping
(with a warning naming its report key) any file that is damaged, foreign or of an unknown version.
Plain functions, and the two Prefect tasks the audit runs them in (read, and prune),
retried with back-off when the storage fails transiently.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.history.frame import ANALYTICS_COLUMNS, empty_history, history_frame
from stormwatch.history.schema import (
    HISTORY_FOLDER,
    READ_SCHEMA,
    REPLACES_KEY,
    V1_STRING_COLUMNS,
    HistoryFileError,
    as_utc,
    conform,
    file_metadata,
    history_key,
    is_compacted,
    partition_date,
    source_columns,
)
from stormwatch.load.tree import Entry
from stormwatch.tasks.repair import quarantine
from stormwatch.tasks.retry import FLEET_IO_RETRY, is_transient
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import Storage, StorageSettings
from stormwatch.tasks.timeouts import FLEET_IO_TASK_TIMEOUT_S

PARQUET_CONTENT_TYPE = "application/vnd.apache.parquet"


class DamagedHistoryFileError(HistoryFileError):
    """A history file that is not readable as Parquet at all: a write cut short, not a newer version."""


@dataclass(frozen=True)
class HistoryRead:
    """What :func:`read_history` found: rows (the analytics' DataFrame), the keys read, and one
    warning per skipped file (each names its key)."""

    rows: pd.DataFrame
    keys: tuple[str, ...]
    warnings: tuple[str, ...]
    damaged: tuple[str, ...] = ()  # keys of files not readable as Parquet (cut short, zero bytes)


def parquet_bytes(table: pa.Table, *, extra_metadata: Mapping[bytes, bytes] | None = None) -> bytes:
    """One history file: the table in :data:`HISTORY_SCHEMA` with the history footer metadata
    (and ``extra_metadata``: a commit's rows, :mod:`stormwatch.tasks.commits`)."""
    metadata = {**file_metadata(), **(extra_metadata or {})}
    table = conform(table.replace_schema_metadata(file_metadata()), name="history rows")
    return table_bytes(table, metadata=metadata)


def table_bytes(table: pa.Table, *, metadata: Mapping[bytes, bytes]) -> bytes:
    """``table`` as Parquet with ``metadata`` as its footer's key-value metadata (history files,
    fleet.parquet): zstd, timestamps as written (microseconds in :data:`HISTORY_SCHEMA`)."""
    table = table.replace_schema_metadata(None)
    sink = io.BytesIO()
    # no ARROW:schema footer entry: it held the key-value metadata (a commit's rows) a second time,
    # base64'd, and every column is a plain Parquet type read back the same (bench/README.md,
    # "Reading the history")
    with pq.ParquetWriter(sink, table.schema, compression="zstd", store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(metadata)
    return sink.getvalue()


def append_history(storage: Storage, table: pa.Table, *, audit_time: datetime) -> str | None:
    """Write one audit's rows (from :func:`stormwatch.history.history_rows`) as one new file in the
    audit date's partition; the key written, ``None`` when there are no rows (nothing is written).
    Raises ValueError when the rows belong to more than one audit."""
    if table.num_rows == 0:
        return None
    audits = table.column("audit_id").unique().to_pylist()
    if len(audits) != 1:
        raise ValueError(f"history rows of {len(audits)} audits given to one append")
    key = history_key(audit_time, str(audits[0]))
    storage.write_report(key, parquet_bytes(table), content_type=PARQUET_CONTENT_TYPE)
    return key


def _history_entries(storage: Storage) -> tuple[list[tuple[Entry, date]], list[str]]:
    """History files (with their partition dates) and a warning for every other object there."""
    files: list[tuple[Entry, date]] = []
    warnings: list[str] = []
    for entry in storage.list_reports(HISTORY_FOLDER):
        day = partition_date(entry.key)
        if day is None:
            warnings.append(f"{entry.key}: skipped, not a history file name")
        else:
            files.append((entry, day))
    return files, warnings


def _parse(key: str, data: bytes | None, columns: Sequence[str] | None,
           names: Collection[str] | None = None) -> pa.Table | None:
    """The file's ``columns``; None when ``names`` (job names) is given and the file holds none of
    them: its ``job_name`` column is read first, and the others only where a name matches (a
    post-job reads one name's runs from every file; bench/README.md, "Reading the history")."""
    if data is None:
        raise HistoryFileError(f"{key}: gone since it was listed")
    try:
        # ParquetFile, not read_table: no dataset layer (bench/README.md, "Reading the history")
        # columns every version has are read dictionary-encoded; newer ones are cast by conform
        dictionary = [name for name in V1_STRING_COLUMNS if columns is None or name in columns]
        try:
            parquet = pq.ParquetFile(pa.BufferReader(data), read_dictionary=dictionary)
        except KeyError:  # a string column missing: a foreign file, which conform names as such
            parquet = pq.ParquetFile(pa.BufferReader(data))
        if names is not None and "job_name" in parquet.schema_arrow.names:
            found = conform(parquet.read(columns=["job_name"]), name=key, schema=READ_SCHEMA, columns=["job_name"])
            if not pc.any(pc.is_in(pc.cast(found.column("job_name"), pa.string()),
                                   value_set=pa.array(sorted(names), pa.string()))).as_py():
                return None
        table = parquet.read(columns=source_columns(columns, parquet.schema_arrow.names))
    except (pa.ArrowException, OSError, ValueError) as error:
        raise DamagedHistoryFileError(f"{key}: not readable as Parquet ({error})") from error
    return conform(table, name=key, schema=READ_SCHEMA, columns=columns)


def _us(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (``audit_time``'s unit)."""
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _within(table: pa.Table, since_us: int, until_us: int) -> pa.Table:
    """The rows audited within [since_us, until_us]; a file (one audit, one time) is kept or
    dropped whole without a filter pass."""
    times_us = pc.cast(table.column("audit_time"), pa.int64())
    bounds = pc.min_max(times_us).as_py()
    if bounds["min"] is None or (since_us <= bounds["min"] and bounds["max"] <= until_us):
        return table
    if bounds["max"] < since_us or bounds["min"] > until_us:
        return table.slice(0, 0)
    return table.filter(pc.and_(pc.greater_equal(times_us, since_us), pc.less_equal(times_us, until_us)))


def replaced_by(data: bytes) -> frozenset[str]:
    """The keys a compacted history file's footer says it holds the rows of (none when unreadable)."""
    try:
        raw = (pq.read_metadata(pa.BufferReader(data)).metadata or {}).get(REPLACES_KEY)
        keys = orjson.loads(raw) if raw else []
    except (pa.ArrowException, OSError, ValueError, orjson.JSONDecodeError):
        return frozenset()  # a damaged compacted file: the parse names it
    return frozenset(str(key) for key in keys) if isinstance(keys, list) else frozenset()


def _named(table: pa.Table, names: Collection[str] | None) -> pa.Table:
    """The rows of ``names`` (job names; None: all)."""
    if names is None:
        return table
    return table.filter(pc.is_in(pc.cast(table.column("job_name"), pa.string()), value_set=pa.array(sorted(names))))


def read_history(
    storage: Storage, *, since: datetime, until: datetime, columns: Sequence[str] | None = None,
    names: Collection[str] | None = None,
) -> HistoryRead:
    """The rows audited from ``since`` to ``until`` (both included; naive = UTC), from the partitions
    of those dates only; ``columns``: read only these (e.g.
    :data:`~stormwatch.history.frame.ANALYTICS_COLUMNS`), default all. Files are read
    ``settings.max_concurrency`` at a time; a damaged or foreign file is skipped with a warning
    naming it. ``names``: keep the rows of these job names only (a post-job's one name), file by
    file, so the memory held is theirs, not the fleet's."""
    since, until = as_utc(since), as_utc(until)
    files, warnings = _history_entries(storage)
    wanted = [entry.key for entry, day in files if since.date() <= day <= until.date()]
    found: dict[str, pa.Table | None] = {}
    damaged: list[str] = []
    replaced: set[str] = set()
    since_us, until_us = _us(since), _us(until)

    def read(chunk_keys: Sequence[str], *, compacted: bool) -> None:
        # S3 objects are fetched `workers` at a time (each a round trip); a local file is read where
        # it is parsed, one by one: fetch threads each grew an allocator arena (bench/README.md,
        # "Reading the history"). A file's footer metadata (its commit's rows) is dropped at once, so
        # what is kept is the window's rows of ``names`` only.
        remote = storage.settings.scheme == "s3"
        workers = max(1, min(storage.settings.max_concurrency, len(chunk_keys))) if remote else 1
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="history-read") as pool:
            for start in range(0, len(chunk_keys), workers):
                chunk = chunk_keys[start:start + workers]
                fetched = pool.map(storage.read_report, chunk) if remote else map(storage.read_report, chunk)
                for key, data in zip(chunk, fetched, strict=True):
                    try:
                        parsed = _parse(key, data, columns, names)
                        table = None if parsed is None else _named(_within(parsed, since_us, until_us), names)
                    except HistoryFileError as error:
                        warnings.append(f"{error}; skipped")
                        if isinstance(error, DamagedHistoryFileError):
                            damaged.append(key)
                        continue
                    if compacted and data is not None:
                        replaced.update(replaced_by(data))
                    found[key] = None if table is None else table.replace_schema_metadata(None)

    # compacted files first: the files they hold the rows of (left by a compaction killed before
    # it deleted them) are not read, so no row counts twice
    read([key for key in wanted if is_compacted(key)], compacted=True)
    read([key for key in wanted if not is_compacted(key) and key not in replaced], compacted=False)
    keys = [key for key in wanted if key in found and key not in replaced]
    tables = [table for key in keys if (table := found[key]) is not None]
    kept = [table for table in tables if table.num_rows] or tables[:1]  # no wanted rows: nothing but its schema
    if not kept:
        return HistoryRead(empty_history(columns), tuple(keys), tuple(warnings), tuple(damaged))
    return HistoryRead(history_frame(pa.concat_tables(kept)), tuple(keys), tuple(warnings), tuple(damaged))


def prune_history(storage: Storage, *, keep_days: int, as_of: datetime) -> Sequence[str]:
    """Delete the history files of nights older than the ``keep_days`` nights ending on ``as_of``'s
    UTC date (``keep_days=1`` keeps that date only); the keys deleted. Only history-named files are
    ever deleted; newer nights (a replay ``--as-of`` the past) are kept."""
    if keep_days < 1:
        raise ValueError(f"keep_days must be at least 1, got {keep_days}")
    oldest_kept = as_utc(as_of).date() - timedelta(days=keep_days - 1)
    files, _ = _history_entries(storage)
    deleted = [entry.key for entry, day in files if day < oldest_kept]
    return [key for key in deleted if storage.delete_report(key)]


@task(name="read-history", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def read_history_task(settings: StorageSettings, since: datetime, until: datetime,
                      names: Collection[str] | None = None) -> HistoryRead:
    return read_history(storage_for(settings), since=since, until=until, columns=ANALYTICS_COLUMNS, names=names)


@task(name="prune-history", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def prune_history_task(settings: StorageSettings, audit_time: datetime, keep_days: int,
                       damaged: Sequence[str] = ()) -> list[str]:
    """Nights older than ``keep_days`` before ``audit_time`` removed, and the ``damaged`` history files
    (found by the read) moved under ``reports/damaged/``; one line per file moved."""
    storage = storage_for(settings)
    prune_history(storage, keep_days=keep_days, as_of=audit_time)
    return [quarantine(storage, key, now=datetime.now(UTC)) for key in damaged]
