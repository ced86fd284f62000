"""Reading and writing the fleet's runs files (:mod:`stormwatch.outputs.fleet_runs`).

Every audit reads the plan columns of every runs file (columnar, a few columns per run) and the
``row`` column of the nights its pages show; it writes one file per night it settled runs of.
A file that does not read is named, moved under ``reports/damaged/`` and left out: its runs are
diagnosed again by this audit, so nothing is lost, and being gone it cannot count them twice.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from stormwatch.outputs.fleet import FleetRow
from stormwatch.outputs.fleet_runs import (
    PLAN_COLUMNS,
    RUNS_FOLDER,
    RUNS_METADATA_KEY,
    latest_runs,
    night_of_key,
    rows_of,
    runs_key,
    runs_table,
)
from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.repair import quarantine
from stormwatch.tasks.storage.protocol import Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredRuns:
    """The newest row of every stored run (``table``: plan columns, and ``row`` for the nights since
    ``shown_since``, None elsewhere), the runs files by night, and one line per damaged file."""

    table: pd.DataFrame
    files: Mapping[str, tuple[str, ...]]  # night (YYYY-MM-DD) -> keys
    damaged: tuple[str, ...] = ()


def _read(data: bytes, key: str, *, full: bool) -> pd.DataFrame:
    parquet = pq.ParquetFile(pa.BufferReader(data))  # one footer parse: the schema's metadata and the columns
    table = parquet.read(columns=None if full else list(PLAN_COLUMNS))
    meta = (parquet.schema_arrow.metadata or {}).get(RUNS_METADATA_KEY)
    if meta is None or not isinstance(orjson.loads(meta), dict):
        raise ValueError("no runs metadata in its footer")
    missing = set(PLAN_COLUMNS) - set(table.column_names)
    if missing:
        raise ValueError(f"columns missing: {', '.join(sorted(missing))}")
    frame = table.to_pandas()
    if not full:
        frame["row"] = None
    return frame


def read_runs(storage: Storage, *, shown_since: date | None, now: datetime) -> StoredRuns:
    """Every runs file; ``row`` is read for the nights on or after ``shown_since`` (None: none)."""
    files: dict[str, list[str]] = {}
    for entry in storage.list_reports(RUNS_FOLDER):
        found = night_of_key(entry.key)
        if found is not None and entry.key.endswith(".parquet"):
            files.setdefault(found.isoformat(), []).append(entry.key)
    frames: list[pd.DataFrame] = []
    damaged: list[str] = []
    kept: dict[str, tuple[str, ...]] = {}
    for night, keys in sorted(files.items()):
        full = shown_since is not None and night >= shown_since.isoformat()
        good = []
        for key in sorted(keys):
            data = storage.read_report(key)
            if data is None:
                continue  # pruned since the listing
            try:
                frames.append(_read(data, key, full=full))
                good.append(key)
            except (pa.ArrowException, OSError, ValueError, orjson.JSONDecodeError) as error:
                line = (f"{key}: not a readable runs file ({type(error).__name__}); its runs are diagnosed "
                        f"again; {quarantine(storage, key, now=now)}")
                log.warning("%s", line)
                damaged.append(line)
        if good:
            kept[night] = tuple(good)
    return StoredRuns(table=latest_runs(frames), files=kept, damaged=tuple(damaged))


def window_rows(storage: Storage, *, since: date, now: datetime) -> list[FleetRow]:
    """The stored runs of the nights on or after ``since`` (their newest rows), by job id."""
    table = read_runs(storage, shown_since=since, now=now).table
    shown = table[table["row"].notna() & (table["night"] >= since.isoformat())]
    return sorted(rows_of(shown), key=lambda row: row.job_id)


def write_runs(storage: Storage, rows: Sequence[FleetRow], *, night: date, folded_at: datetime, fold_id: str,
               name_of: Callable[[str], str]) -> list[str]:
    """``rows`` as night ``night``'s runs file of this fold; the keys written (none without rows)."""
    if not rows:
        return []
    table = runs_table(rows, night=night, folded_at=folded_at, fold_id=fold_id, name_of=name_of)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    key = runs_key(night, fold_id)
    storage.write_report(key, sink.getvalue(), content_type=MediaType.PARQUET)
    return [key]


def stored_row(storage: Storage, job_id: str) -> FleetRow | None | bool:
    """``job_id``'s newest stored run (rank rows included); None when no runs file holds it; False when
    there are no runs files at all (a fleet of version 1, or none yet)."""
    found: list[pd.DataFrame] = []
    listed = False
    for entry in storage.list_reports(RUNS_FOLDER):
        if night_of_key(entry.key) is None or not entry.key.endswith(".parquet"):
            continue
        listed = True
        data = storage.read_report(entry.key)
        if data is None:
            continue
        try:
            ids = pq.ParquetFile(pa.BufferReader(data)).read(columns=["job_id"]).column("job_id")
            if job_id not in set(ids.to_pylist()):
                continue
            frame = _read(data, entry.key, full=True)
        except (pa.ArrowException, OSError, ValueError, orjson.JSONDecodeError):
            continue  # the audit names and repairs it
        found.append(frame[frame["job_id"] == job_id])
    if not listed:
        return False
    newest = latest_runs(found)
    return rows_of(newest)[0] if len(newest) else None
