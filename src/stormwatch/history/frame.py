"""The history as the analytics read it: a pandas DataFrame of history rows, and runs made from it.

A *run* is one job as its latest audit saw it: a job id diagnosed again (its inputs changed)
replaces its earlier run. Runs are ordered by (audit_time, job_started_ns, job_id). Every function
is a few vectorised group-bys: linear in rows (times log for sorting), never one Python object
per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa

from stormwatch.history.schema import HISTORY_SCHEMA, as_utc
from stormwatch.outputs.verdict import VerdictStatus

_FRAME_TIME = pa.timestamp("ns", tz="UTC")
RUN_ORDER = ["audit_time", "job_started_ns", "job_id"]
#: The columns regressions (and the rank that set them), suspects, trends and the capacity trend read
#: (half the file: read only these for them).
ANALYTICS_COLUMNS = ("audit_id", "audit_time", "job_id", "job_name", "world_size", "rank", "host", "device_id",
                     "peak_reserved_bytes", "peak_device_used_bytes", "device_total_bytes", "hidden_gap_peak_bytes",
                     "first_cause", "verdict", "job_started_ns", "leak")


def history_frame(table: pa.Table) -> pd.DataFrame:
    """A history table (:data:`HISTORY_SCHEMA`) as a DataFrame: nullable integers as float64
    (NaN = null), strings as ``category`` (a million rows convert in a fraction of a second),
    ``audit_time`` as ``datetime64[ns, UTC]`` (stored in microseconds; the analytics compute in ns)."""
    index = table.schema.get_field_index("audit_time")
    if index >= 0 and table.schema.field(index).type != _FRAME_TIME:
        table = table.set_column(index, pa.field("audit_time", _FRAME_TIME), table.column(index).cast(_FRAME_TIME))
    return table.to_pandas(strings_to_categorical=True)


def empty_history(columns: Sequence[str] | None = None) -> pd.DataFrame:
    """No rows, the columns of the schema (or those of ``columns``) with their read dtypes."""
    table = HISTORY_SCHEMA.empty_table()
    return history_frame(table if columns is None else table.select([c for c in table.column_names if c in columns]))


def in_window(history: pd.DataFrame, *, as_of: datetime, days: float | None) -> pd.DataFrame:
    """Rows audited at or before ``as_of`` and, with ``days``, after ``as_of - days``."""
    until = pd.Timestamp(as_utc(as_of))
    keep = history["audit_time"] <= until
    if days is not None:
        keep &= history["audit_time"] > until - timedelta(days=days)
    return history.loc[keep]


def latest_rows(history: pd.DataFrame) -> pd.DataFrame:
    """The rank rows of each job's latest audit (audits ordered by audit_time, then audit_id)."""
    if history.empty:
        return history
    audit_codes, audit_names = pd.factorize(history["audit_id"])
    times = np.zeros(len(audit_names), dtype=np.int64)
    times[audit_codes] = history["audit_time"].to_numpy(dtype="datetime64[ns]").view(np.int64)
    sequence = np.empty(len(audit_names), dtype=np.int64)
    sequence[np.lexsort((np.asarray(audit_names, dtype=object).astype(str), times))] = np.arange(len(audit_names))
    row_sequence = pd.Series(sequence[audit_codes], index=history.index)
    job_codes, _ = pd.factorize(history["job_id"])
    latest = row_sequence.groupby(job_codes).transform("max")
    return history.loc[row_sequence == latest]


#: Verdicts by how bad they are, so a run's verdict is the worst of its rows' (sessions').
_VERDICT_RANKS = {status.value: float(status.rank) for status in VerdictStatus}
_VERDICT_NAMES = {rank: name for name, rank in _VERDICT_RANKS.items()}
RUN_COLUMNS = ["job_id", "job_name", "world_size", "audit_id", "audit_time", "job_started_ns", "verdict",
               "peak_reserved_bytes", "hidden_gap_peak_bytes"]


def audit_runs(history: pd.DataFrame) -> pd.DataFrame:
    """One row per (audit, job) in ``history``, columns :data:`RUN_COLUMNS` (strings as objects):
    the job's peaks over its ranks (of every session), ``peak_reserved_bytes`` and ``hidden_gap_peak_bytes``
    (NaN when no rank has one), its largest world size, earliest start and its verdict (the worst of
    its rows': every row of a job carries the job's, older files too). One group-by over
    integer codes; the result has as many rows as runs, not ranks."""
    if history.empty:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in RUN_COLUMNS})
    audit_codes, _ = pd.factorize(history["audit_id"])
    job_codes, jobs = pd.factorize(history["job_id"])
    key = audit_codes.astype(np.int64) * max(len(jobs), 1) + job_codes
    severity = history["verdict"].astype(object).map(_VERDICT_RANKS).astype(float)  # NaN: none or unknown
    runs = history.assign(_verdict_rank=severity.to_numpy()).groupby(key, sort=False).agg(
        job_id=("job_id", "first"),
        job_name=("job_name", "first"),
        world_size=("world_size", "max"),
        audit_id=("audit_id", "first"),
        audit_time=("audit_time", "first"),
        job_started_ns=("job_started_ns", "min"),
        verdict=("_verdict_rank", "max"),
        peak_reserved_bytes=("peak_reserved_bytes", "max"),
        hidden_gap_peak_bytes=("hidden_gap_peak_bytes", "max"),
    )
    runs["verdict"] = runs["verdict"].map(_VERDICT_NAMES)
    for name in ("job_id", "job_name", "audit_id", "verdict"):
        runs[name] = runs[name].astype(object)
    return runs.reset_index(drop=True)[RUN_COLUMNS]


def latest_per(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The latest run (by audit_time, then audit_id) for each value of ``keys``."""
    ordered = runs.sort_values(["audit_time", "audit_id"], kind="stable")
    return ordered.drop_duplicates(keys, keep="last")


def job_runs(history: pd.DataFrame) -> pd.DataFrame:
    """One row per job (its latest audit), columns :data:`RUN_COLUMNS`, in run order."""
    runs = latest_per(audit_runs(history), ["job_id"])
    return runs.sort_values(RUN_ORDER, na_position="first", kind="stable").reset_index(drop=True)
