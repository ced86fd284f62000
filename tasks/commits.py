"""Commit records: the point at which a diagnosed job is done, written once per batch of jobs.

A job is done only when its outputs (model.json, report.html), its history rows and its fleet
row are durable. The batch writes its jobs' outputs first, then one commit object,
``reports/.commits/<audit id>-b<8 hex>.parquet``: the batch's history rows as a history file
(:mod:`stormwatch.history.schema`) whose footer also carries the jobs' fleet rows (each naming
its input fingerprint and the history file that holds its rows). That single write is the
commit: a job whose commit object does not exist is diagnosed again by the next audit (never
taken as unchanged on its model.json alone), one whose commit exists is done.

The rest follows from the commit and can be redone any number of times with the same result:

1. *apply*: copy the commit's bytes to its history key (``history/date=D/<audit id>-b<hex>.parquet``,
   a deterministic key, so a second copy writes the same object again: history appends are
   idempotent per (audit, job, session, rank));
2. *fold*: the next fleet.json carries the commit's rows (:mod:`stormwatch.tasks.plan` merges the
   rows of every commit still present over fleet.json's, the newest ``committed_at`` winning);
3. *clear*: once fleet.json is published, the commit objects it folded are deleted.

A kill between any two steps leaves a commit that the next audit applies and folds again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from stormwatch.history.schema import HISTORY_SCHEMA, HistoryFileError, conform, history_key, is_compacted
from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.tasks.history import PARQUET_CONTENT_TYPE, parquet_bytes, replaced_by
from stormwatch.tasks.repair import quarantine
from stormwatch.tasks.runs_store import stored_row
from stormwatch.tasks.storage.protocol import COMMITS_FOLDER, FLEET_JSON_KEY, Storage

log = logging.getLogger(__name__)

#: Footer key of a commit object: ``{"audit_id", "audit_time", "committed_at", "history_key", "rows"}``.
COMMIT_METADATA_KEY = b"stormwatch.commit"


@dataclass(frozen=True, kw_only=True)
class Commit:
    """One batch's commit: its history rows (``history``, possibly empty) and fleet rows (``rows``,
    diagnosed jobs only, each with its rank rows and ``history_key``); ``committed_at`` is the wall
    clock (UTC) when it was made, never the ``--as-of`` time, so the newest commit wins on replays."""

    key: str
    audit_id: str
    audit_time: datetime
    committed_at: datetime
    history_key: str
    rows: tuple[FleetRow, ...]
    history: pa.Table


@dataclass(frozen=True)
class PendingCommits:
    """The commits found in storage, oldest first, and one line per commit object that could not be read."""

    commits: tuple[Commit, ...] = ()
    damaged: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(commit.key for commit in self.commits)


def batch_name(audit: str, job_ids: Iterable[str]) -> str:
    """``<audit id>-b<8 hex>``: the same for a retry of the same batch of the same audit."""
    digest = hashlib.sha256("\n".join(sorted(job_ids)).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{audit}-b{digest}"


def commit_key(name: str) -> str:
    return f"{COMMITS_FOLDER}/{name}.parquet"


def commit_batch(storage: Storage, rows: Sequence[FleetRow], history: pa.Table | None, *, audit: str,
                 audit_time: datetime, now: datetime | None = None) -> Commit | None:
    """Commit the diagnosed jobs among ``rows`` (their outputs already written) with ``history`` (their
    history rows, given the ``audit_id`` ``audit`` here), then apply it; None when no row was diagnosed."""
    diagnosed = [row for row in rows if row.status is JobStatus.DIAGNOSED]
    if not diagnosed:
        return None
    name = batch_name(audit, (row.job_id for row in diagnosed))
    target = history_key(audit_time, name)
    committed_at = (now or datetime.now(UTC)).isoformat()
    # a repaired job's row already names the history file holding its rows (tasks/plan.py)
    kept = tuple(replace(row, history_key=row.history_key or target, committed_at=committed_at) for row in diagnosed)
    table = HISTORY_SCHEMA.empty_table() if history is None else with_audit_id(history, audit)
    body = _encode(kept, table, audit=audit, audit_time=audit_time, committed_at=committed_at, target=target)
    key = commit_key(name)
    storage.write_report(key, body, content_type=PARQUET_CONTENT_TYPE)
    commit = Commit(key=key, audit_id=audit, audit_time=audit_time, committed_at=datetime.fromisoformat(committed_at),
                    history_key=target, rows=kept, history=table)
    apply(storage, commit, body=body)
    return commit


def with_audit_id(table: pa.Table, audit: str) -> pa.Table:
    """``table``'s rows (made job by job by the workers) as one audit's: ``audit_id`` set to ``audit``."""
    index = table.schema.get_field_index("audit_id")
    field = table.schema.field(index)
    return table.set_column(index, field, pa.array([audit] * table.num_rows, type=field.type))


def _encode(rows: Sequence[FleetRow], history: pa.Table, *, audit: str, audit_time: datetime,
            committed_at: str, target: str) -> bytes:
    meta = orjson.dumps({
        "audit_id": audit, "audit_time": audit_time.astimezone(UTC).isoformat(), "committed_at": committed_at,
        "history_key": target,
        "rows": [{**row.as_json(), "rank_rows": list(row.rank_rows)} for row in rows],
    }, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    return parquet_bytes(history, extra_metadata={COMMIT_METADATA_KEY: meta})


def decode(key: str, data: bytes) -> Commit:
    """The commit in ``data`` (read from ``key``); raises HistoryFileError naming ``key`` when damaged."""
    try:
        table = pq.ParquetFile(pa.BufferReader(data)).read()
        meta = orjson.loads((table.schema.metadata or {})[COMMIT_METADATA_KEY])
        rows = tuple(_row(item) for item in meta["rows"])
        commit = Commit(key=key, audit_id=str(meta["audit_id"]), audit_time=datetime.fromisoformat(meta["audit_time"]),
                        committed_at=datetime.fromisoformat(meta["committed_at"]),
                        history_key=str(meta["history_key"]), rows=rows,
                        history=conform(table, name=key))
    except HistoryFileError:
        raise
    except (pa.ArrowException, OSError, KeyError, TypeError, ValueError, orjson.JSONDecodeError) as error:
        raise HistoryFileError(f"{key}: not a readable commit ({type(error).__name__}: {error})") from error
    return commit


def _row(item: dict[str, object]) -> FleetRow:
    ranks = item.get("rank_rows", [])
    if not isinstance(ranks, list):
        raise ValueError("rank_rows is not a list")
    return replace(FleetRow.from_json(item), rank_rows=tuple(dict(rank) for rank in ranks))


def apply(storage: Storage, commit: Commit, *, body: bytes | None = None) -> bool:
    """Copy the commit's history rows to its history key (nothing when it has none, when that
    object already holds them, or when the night's compacted file does); True when written now.
    The same bytes every time."""
    if commit.history.num_rows == 0:
        return False
    data = body if body is not None else storage.read_report(commit.key)
    if data is None:
        return False
    found = storage.read_report(commit.history_key)
    if found == data or (found is None and compacted_holds(storage, commit.history_key)):
        return False
    storage.write_report(commit.history_key, data, content_type=PARQUET_CONTENT_TYPE)
    return True


def compacted_holds(storage: Storage, key: str) -> bool:
    """Whether a compacted file of ``key``'s night holds ``key``'s rows (:mod:`stormwatch.tasks.history_compact`):
    then the history has them, and copying the file back would count them twice."""
    folder = key.rsplit("/", 1)[0]
    for entry in storage.list_reports(folder):
        if is_compacted(entry.key) and key in replaced_by(storage.read_report(entry.key) or b""):
            return True
    return False


def pending_commits(storage: Storage, *, now: datetime | None = None) -> PendingCommits:
    """Every commit object in storage, applied again (idempotent), oldest first; a damaged one is named
    and moved under ``reports/damaged/`` (its jobs, never committed as far as anyone can tell, are
    diagnosed again). Only the audit lease's holder calls this."""
    commits: list[Commit] = []
    damaged: list[str] = []
    for entry in storage.list_reports(COMMITS_FOLDER):
        data = storage.read_report(entry.key)
        if data is None:
            continue  # cleared since the listing
        try:
            commit = decode(entry.key, data)
        except HistoryFileError as error:
            damaged.append(f"{error}; {quarantine(storage, entry.key, now=now or datetime.now(UTC))}")
            continue
        apply(storage, commit, body=data)
        commits.append(commit)
    commits.sort(key=lambda commit: commit.committed_at)
    return PendingCommits(tuple(commits), tuple(damaged))


def clear(storage: Storage, keys: Iterable[str]) -> list[str]:
    """Delete the commit objects ``keys`` (their rows published in fleet.json); the keys deleted."""
    return [key for key in keys if storage.delete_report(key)]


def newest_rows(previous: dict[str, FleetRow], commits: Sequence[Commit]) -> dict[str, FleetRow]:
    """``previous`` (fleet.json's rows by job id) with each committed row laid over it, the newest
    ``committed_at`` winning (rows without one, written before commits existed, lose to any commit)."""
    rows = dict(previous)
    for commit in commits:
        for row in commit.rows:
            known = rows.get(row.job_id)
            if known is None or (known.committed_at or "") <= (row.committed_at or ""):
                rows[row.job_id] = row
    return rows


def commit_key_of(row: FleetRow) -> str | None:
    """The commit object that holds ``row`` (named like its history file), None for a row never committed."""
    if row.history_key is None:
        return None
    return commit_key(row.history_key.rsplit("/", 1)[-1].removesuffix(".parquet"))


def committed_row(storage: Storage, job_id: str) -> FleetRow | None:
    """``job_id``'s committed row: its newest stored run, or a pending commit's when newer; None when the
    job was never committed (a damaged store counts as never committed). With no runs files, a
    version-1 fleet.json's row."""
    rows: dict[str, FleetRow] = {}
    found = stored_row(storage, job_id)
    if isinstance(found, FleetRow):
        rows[job_id] = found
    elif found is False:
        data = storage.read_report(FLEET_JSON_KEY)
        try:
            document = orjson.loads(data) if data else {}
            for item in document.get("jobs", ()) if document.get("schema_version", 1) == 1 else ():
                if isinstance(item, dict) and item.get("job_id") == job_id:
                    rows[job_id] = FleetRow.from_json(item)
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            rows = {}
    return newest_rows(rows, pending_commits(storage).commits).get(job_id)
