"""The fleet's runs, kept per night: one Parquet table per fold, partitioned by the night of the run.

Layout (keys relative to the reports prefix)::

    _fleet/runs/date=YYYY-MM-DD/<fold id>.parquet

A fold (the nightly audit's publish step, or ``stormwatch compact``) writes the runs it settled
that night: those diagnosed (or failed) by the audit, those of the post-job commits it folds in,
and those whose notification it stamped. A run is never rewritten in place: a later fold that
settles it again adds a newer row, and :func:`latest_runs` keeps, per job id, the row of the
newest fold (then the newest commit). So a night's table is written once, whatever is stored,
and the nightly cost grows with what changed. The footer's key :data:`RUNS_METADATA_KEY` holds
``{"schema_version", "night", "fold_id", "folded_at"}``.

Columns: the scalar facts the audit plans with (:data:`PLAN_COLUMNS`) and ``row``, the fleet row
as JSON with its rank rows (parsed only for the runs a page or summary shows).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa

from stormwatch.outputs.fleet import FleetRow

RUNS_SCHEMA_VERSION = 1
RUNS_FOLDER = "_fleet/runs"
RUNS_METADATA_KEY = b"stormwatch.runs"

RUNS_SCHEMA = pa.schema([
    pa.field("job_id", pa.string(), nullable=False),
    pa.field("job_name", pa.string(), nullable=False),
    pa.field("night", pa.string(), nullable=False),        # YYYY-MM-DD, the run's audit date (UTC)
    pa.field("folded_at", pa.string(), nullable=False),    # ISO 8601: when the fold wrote this row
    pa.field("status", pa.string(), nullable=False),       # JobStatus value
    pa.field("verdict", pa.string()),                      # VerdictStatus value, null for failed runs
    pa.field("input_fingerprint", pa.string()),
    pa.field("options", pa.string()),                      # canonical JSON (:func:`canonical_options`)
    pa.field("committed_at", pa.string()),
    pa.field("diagnosed_at", pa.string()),
    pa.field("notified_at", pa.string()),
    pa.field("history_key", pa.string()),
    pa.field("output_bytes", pa.string()),                 # JSON {"model.json": n, ...}
    pa.field("row", pa.string(), nullable=False),          # FleetRow.as_json() with its rank_rows
])
#: What the audit's plan reads of every stored run (``row`` only for shown runs).
PLAN_COLUMNS = tuple(name for name in RUNS_SCHEMA.names if name != "row")


def canonical_options(options: Mapping[str, Any] | None) -> str | None:
    """``options`` as sorted-key JSON, so stored and recorded options compare as strings."""
    return None if options is None else orjson.dumps(dict(options), option=orjson.OPT_SORT_KEYS).decode()


def runs_key(night: date, fold_id: str) -> str:
    return f"{RUNS_FOLDER}/date={night.isoformat()}/{fold_id}.parquet"


def night_of_key(key: str) -> date | None:
    """The night of a runs file's key; None when ``key`` is not one."""
    parts = key.split("/")
    if len(parts) != 4 or "/".join(parts[:2]) != RUNS_FOLDER or not parts[2].startswith("date="):
        return None
    try:
        return date.fromisoformat(parts[2].removeprefix("date="))
    except ValueError:
        return None


def row_json(row: FleetRow) -> str:
    return orjson.dumps({**row.as_json(), "rank_rows": list(row.rank_rows)},
                        option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode()


def runs_table(rows: Sequence[FleetRow], *, night: date, folded_at: datetime, fold_id: str,
               name_of: Any) -> pa.Table:
    """One night's runs file: ``rows`` (one per job id) with ``name_of(job_id)`` as ``job_name``."""
    stamp = folded_at.isoformat()
    columns: dict[str, list[Any]] = {
        "job_id": [row.job_id for row in rows],
        "job_name": [name_of(row.job_id) for row in rows],
        "night": [night.isoformat()] * len(rows),
        "folded_at": [stamp] * len(rows),
        "status": [row.status.value for row in rows],
        "verdict": [None if row.verdict is None else row.verdict.value for row in rows],
        "input_fingerprint": [row.input_fingerprint for row in rows],
        "options": [canonical_options(row.options) for row in rows],
        "committed_at": [row.committed_at for row in rows],
        "diagnosed_at": [row.diagnosed_at for row in rows],
        "notified_at": [row.notified_at for row in rows],
        "history_key": [row.history_key for row in rows],
        "output_bytes": [None if row.output_bytes is None else orjson.dumps(row.output_bytes).decode()
                         for row in rows],
        "row": [row_json(row) for row in rows],
    }
    meta = orjson.dumps({"schema_version": RUNS_SCHEMA_VERSION, "night": night.isoformat(), "fold_id": fold_id,
                         "folded_at": stamp})
    return pa.table(columns, schema=RUNS_SCHEMA).replace_schema_metadata({RUNS_METADATA_KEY: meta})


def empty_runs() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in RUNS_SCHEMA.names})


def latest_runs(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """One row per job id: the newest fold's (ties: the newest commit), from the runs files read."""
    parts = [frame for frame in frames if not frame.empty]
    if not parts:
        return empty_runs()
    table = pd.concat(parts, ignore_index=True)
    table = table.sort_values(["folded_at", "committed_at"], kind="stable", na_position="first")
    return table.drop_duplicates("job_id", keep="last").reset_index(drop=True)


def rows_of(table: pd.DataFrame) -> list[FleetRow]:
    """The fleet rows of ``table``'s ``row`` column, rank rows included."""
    rows = []
    for text in table["row"]:
        item = orjson.loads(text)
        ranks = item.pop("rank_rows", None) or []
        rows.append(replace(FleetRow.from_json(item), rank_rows=tuple(dict(rank) for rank in ranks)))
    return rows
