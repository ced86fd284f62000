"""Compacting the history: a night's small files (one per audit batch, one per post-job) into one.

Every audit batch and every post-job writes its own history file (:mod:`stormwatch.tasks.commits`),
so a night holds as many small files as batches and post-jobs ran. The nightly audit (before it
reads the history) and ``stormwatch compact`` (after its fold) rewrite each earlier night of
the retention window as one file (once; again when files arrive later; a single file of an older
schema version is so migrated too),
``history/date=D/compacted-<8 hex>.parquet``, whose footer key
:data:`~stormwatch.history.schema.REPLACES_KEY` lists the keys it holds the rows of.

Crash safety: the compacted file is written whole first, then the files it replaces are deleted.
Killed in between, both exist: stormwatch's reader (:func:`stormwatch.tasks.history.read_history`)
skips every file a compacted file replaces, and the next compaction deletes them first, so no row is
lost or counted twice. The list is carried over when a night is compacted again (it names every
file whose rows the night's compacted file holds), so a pending commit applied again
(:func:`stormwatch.tasks.commits.apply`) or a replayed audit rewriting a file already compacted
never brings its rows in twice: ``apply`` does not copy a file a compacted one holds, and
compaction deletes such a file instead of adding it.

The audit compacts before it reads the history and computes ``history.basis``, so a rerun at the
same audit time finds the same files. Run under the audit lease only (it deletes history files).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.history.schema import (
    HISTORY_FOLDER,
    REPLACES_KEY,
    HistoryFileError,
    as_utc,
    compacted_key,
    conform,
    file_metadata,
    is_compacted,
    partition_date,
)
from stormwatch.tasks.history import PARQUET_CONTENT_TYPE, replaced_by, table_bytes
from stormwatch.tasks.retry import FLEET_IO_RETRY, is_transient
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import Storage, StorageSettings

log = logging.getLogger(__name__)

#: Rows of a compacted file in this order: by audit, then job, session and rank.
_ORDER = [("audit_time", "ascending"), ("audit_id", "ascending"), ("job_id", "ascending"),
          ("session_id", "ascending"), ("rank", "ascending")]


@dataclass(frozen=True)
class CompactedNight:
    """One night compacted: the file written, the files it replaces (deleted), and its rows."""

    night: date
    key: str
    replaced: tuple[str, ...]
    rows: int

    def line(self) -> str:
        files = "1 file" if len(self.replaced) == 1 else f"{len(self.replaced)} files"
        return f"history {self.night}: {files} compacted into {self.key} ({self.rows} rows)"


def _nights(storage: Storage) -> dict[date, list[str]]:
    found: dict[date, list[str]] = {}
    for entry in storage.list_reports(HISTORY_FOLDER):
        day = partition_date(entry.key)
        if day is not None:
            found.setdefault(day, []).append(entry.key)
    return found


def _finish(storage: Storage, keys: Sequence[str], data: Mapping[str, bytes]) -> tuple[set[str], set[str]]:
    """(every key the compacted files among ``keys`` hold the rows of, those of ``keys`` deleted now):
    files left by a compaction killed before its deletes, or written again since (a replay)."""
    held: set[str] = set()
    for key in keys:
        if is_compacted(key):
            held |= replaced_by(data[key])
    done = {old for old in held if old in data}
    for old in sorted(done):
        storage.delete_report(old)
    return held, done


def compact_night(storage: Storage, night: date, keys: Sequence[str]) -> CompactedNight | None:
    """Night ``night``'s history files ``keys`` (as listed) in one file of the current version, then
    the small ones deleted; None when there is nothing to do (no file, or one compacted file). Files
    that do not read as history files are left where they are (the next read names them)."""
    data = {key: blob for key in keys if (blob := storage.read_report(key)) is not None}
    held, done = _finish(storage, list(data), data)
    tables: list[pa.Table] = []
    replaced: list[str] = []
    for key in sorted(data):
        if key in done:
            continue
        try:
            table = conform(pq.ParquetFile(pa.BufferReader(data[key])).read(), name=key)
        except (HistoryFileError, pa.ArrowException, OSError, ValueError) as error:
            log.warning("history compaction: %s left as it is (%s)", key, error)
            continue  # a damaged file: the next read names it and moves it under damaged/
        tables.append(table.replace_schema_metadata(None))
        replaced.append(key)
    if not replaced or (len(replaced) == 1 and is_compacted(replaced[0])):
        return None  # nothing, or one compacted file already
    rows = pa.concat_tables(tables).sort_by(_ORDER)
    key = compacted_key(night, replaced)
    metadata = {**file_metadata(), REPLACES_KEY: orjson.dumps(sorted(held | set(replaced)))}
    storage.write_report(key, table_bytes(rows, metadata=metadata), content_type=PARQUET_CONTENT_TYPE)
    for old in replaced:  # only once the compacted file is whole
        if old != key:
            storage.delete_report(old)
    return CompactedNight(night=night, key=key, replaced=tuple(replaced), rows=rows.num_rows)


def compact_history(storage: Storage, *, before: date, keep_days: int | None = None) -> list[CompactedNight]:
    """Every night before ``before`` (and, with ``keep_days``, within the ``keep_days`` nights ending
    on ``before``: older ones are pruned anyway) that holds anything but one compacted file, compacted:
    so each night is rewritten once (again only when files arrive later), and files of older schema
    versions (nanosecond ``audit_time``, fewer columns) are rewritten in the current one."""
    nights = _nights(storage)
    oldest = None if keep_days is None else before - timedelta(days=keep_days - 1)
    done = []
    for night, keys in sorted(nights.items()):
        settled = len(keys) == 1 and is_compacted(keys[0])
        if night >= before or (oldest is not None and night < oldest) or settled:
            continue
        compacted = compact_night(storage, night, keys)
        if compacted is not None:
            log.info("%s", compacted.line())
            done.append(compacted)
    return done


@task(name="compact-history", cache_policy=NO_CACHE, **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def compact_history_task(settings: StorageSettings, audit_time: datetime, keep_days: int) -> list[str]:
    """The nights before the audit's (UTC) date compacted; one line per night."""
    found = compact_history(storage_for(settings), before=as_utc(audit_time).date(), keep_days=keep_days)
    return [night.line() for night in found]


def compact_history_step(settings: StorageSettings, audit_time: datetime, keep_days: int) -> list[str]:
    """The audit's compaction, after its publish: one line per night compacted. Its failure is logged
    and reported as a line, never the audit's (the small files stay readable; the next audit retries)."""
    result: object = compact_history_task.submit(settings, audit_time, keep_days).result(raise_on_failure=False)
    if isinstance(result, BaseException):
        log.error("history compaction failed: %s; the next audit retries", type(result).__name__)
        return [f"history compaction failed: {type(result).__name__}"]
    return list(result) if isinstance(result, list) else []
