"""``--retention-days``: runs last diagnosed before the kept nights leave the fleet state and the reports.

Policy. With ``--retention-days N``, an audit keeps the runs of the N nights ending on its own
(its ``--as-of`` night). A run whose newest stored row is older is retired:

1. a retired record (job id, input fingerprint, options) is written,
   ``_fleet/retired/date=D/<fold>.parquet``, so its job, whose inputs are still under ``jobs/``,
   is not diagnosed again as if it were new: it is left alone until its inputs change;
2. its reports (``reports/<job_id>/``: model.json, report.html, sessions) are deleted;
3. the night's runs files are deleted once none of their runs is kept.

Inputs under ``jobs/`` are never touched, and nothing is pruned without the flag. Each step can
be redone after a kill with the same result. The history keeps its own window (``--history-days``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.plan import PreviousFleet
from stormwatch.tasks.retry import FLEET_IO_RETRY, is_transient
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import FLEET_STATE_FOLDER, Storage, StorageSettings
from stormwatch.tasks.timeouts import FLEET_IO_TASK_TIMEOUT_S

RETIRED_FOLDER = f"{FLEET_STATE_FOLDER}/retired"
RETIRED_COLUMNS = ("job_id", "input_fingerprint", "options", "night")


@dataclass(frozen=True)
class Pruned:
    """What a prune did: runs retired, report files and runs files deleted, by key."""

    retired: int = 0
    reports_deleted: int = 0
    files_deleted: tuple[str, ...] = ()

    def as_json(self) -> dict[str, int]:
        return {"retired_runs": self.retired, "report_files": self.reports_deleted,
                "runs_files": len(self.files_deleted)}

    def line(self, days: int) -> str:
        return (f"retention ({days} nights): {self.retired} runs retired, {self.reports_deleted} report files and "
                f"{len(self.files_deleted)} runs files deleted")


def read_retired(storage: Storage) -> pd.DataFrame:
    """Every retired record; a damaged file is skipped (its jobs are diagnosed again: nothing is lost)."""
    frames = []
    for entry in storage.list_reports(RETIRED_FOLDER):
        data = storage.read_report(entry.key)
        if data is None or not entry.key.endswith(".parquet"):
            continue
        try:
            frames.append(pq.ParquetFile(pa.BufferReader(data)).read(columns=list(RETIRED_COLUMNS)).to_pandas())
        except (pa.ArrowException, OSError, ValueError):
            continue
    if not frames:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in RETIRED_COLUMNS})
    return pd.concat(frames, ignore_index=True).drop_duplicates("job_id", keep="last")


def _write_retired(storage: Storage, table: pd.DataFrame, *, night: str, name: str) -> None:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(table.reindex(columns=list(RETIRED_COLUMNS)), preserve_index=False), sink)
    storage.write_report(f"{RETIRED_FOLDER}/date={night}/{name}.parquet", sink.getvalue(),
                         content_type=MediaType.PARQUET)


def prune_runs(storage: Storage, previous: PreviousFleet, *, keep_days: int, as_of: datetime,
               name: str) -> tuple[PreviousFleet, Pruned]:
    """Retire the runs whose newest row is from before the ``keep_days`` nights ending on ``as_of``'s
    night; ``previous`` without them, and what was done. ``name``: this fold's file name."""
    oldest = as_of.astimezone(UTC).date() - timedelta(days=keep_days - 1)
    table = previous.table
    old = table[table["night"] < oldest.isoformat()] if len(table) else table
    pending = {row.job_id for commit in previous.commits.commits for row in commit.rows}
    old = old[~old["job_id"].isin(list(pending))]
    deleted_reports = 0
    for night, group in old.groupby("night", sort=True):
        _write_retired(storage, group, night=str(night), name=name)
    for job_id in old["job_id"]:
        for entry in storage.list_reports(str(job_id)):
            deleted_reports += bool(storage.delete_report(entry.key))
    kept_nights = set(table["night"][~table["job_id"].isin(list(old["job_id"]))]) if len(table) else set()
    gone: list[str] = []
    files = dict(previous.files)
    for night, keys in sorted(previous.files.items()):
        if night < oldest.isoformat() and night not in kept_nights:
            gone += [key for key in keys if storage.delete_report(key)]
            files.pop(night)
    rest = table[~table["job_id"].isin(list(old["job_id"]))] if len(table) else table
    return replace(previous, table=rest.reset_index(drop=True), files=files), Pruned(
        retired=len(old), reports_deleted=deleted_reports, files_deleted=tuple(gone))


@task(name="apply-retention", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def retention_task(settings: StorageSettings, previous: PreviousFleet, keep_days: int | None, as_of: datetime,
                   name: str) -> tuple[PreviousFleet, Pruned | None, pd.DataFrame]:
    """Prune (with ``keep_days``; None: nothing is pruned), then read every retired record."""
    storage = storage_for(settings)
    pruned = None
    if keep_days is not None:
        previous, pruned = prune_runs(storage, previous, keep_days=keep_days, as_of=as_of, name=name)
    return previous, pruned, read_retired(storage)
