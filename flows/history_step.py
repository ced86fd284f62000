"""The audit's history step: earlier runs before the batches, this audit's rows and the fleet's
comparisons after them.

Before: the history of the last ``history_days`` nights up to the audit time is read once
(analytics columns only), reduced to runs and split by job name, so each job's worker compares
the job with the earlier runs of its name (model.json's ``fleet.regression``). After: the rows
of the jobs diagnosed now (an unchanged job adds none) are committed by their batches
(:mod:`stormwatch.tasks.commits`), nights past the retention are removed, and fleet.json's
``trends``, ``regressions``, ``suspect_hosts`` and ``coverage`` are computed from the history with
this audit's rows in it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
import pyarrow as pa
from prefect import get_run_logger

from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.unwalked import unwalked
from stormwatch.history.frame import history_frame, job_runs
from stormwatch.history.sections import compare_fleet, fleet_coverage
from stormwatch.outputs.fleet import FleetRow
from stormwatch.tasks.audit_job import JobOutcome
from stormwatch.tasks.commits import with_audit_id
from stormwatch.tasks.comparisons import Reusable, comparison_basis_task, published_comparisons_task
from stormwatch.tasks.history import HistoryRead, prune_history_task, read_history_task
from stormwatch.tasks.storage.protocol import StorageSettings


def read_earlier(settings: StorageSettings, params: AuditParameters, *, audit_time: datetime,
                 names: Collection[str] | None = None) -> HistoryRead:
    """The kept history up to ``audit_time`` (of job names ``names`` only; None: all); a file that cannot
    be read is a logged warning."""
    found = read_history_task(settings, audit_time - timedelta(days=params.history_days), audit_time, names)
    for warning in found.warnings:
        get_run_logger().warning("history: %s", warning)
    return found


def reusable_comparisons(settings: StorageSettings, params: AuditParameters, *,
                         audit_time: datetime) -> Reusable | None:
    """The last fleet.json's trends, regressions and suspects when the history of the window, the
    audit time and the thresholds are those they were computed from (:mod:`stormwatch.tasks.comparisons`):
    an audit that diagnoses nothing then reads no history."""
    return published_comparisons_task(settings, audit_time - timedelta(days=params.history_days), audit_time,
                                      history_days=params.history_days, regression=params.regression_thresholds(),
                                      suspects=params.suspect_thresholds())


def by_job_name(history: pd.DataFrame, names: Collection[str]) -> dict[str, pd.DataFrame]:
    """The earlier runs (one row per run, in run order) of each of ``names`` (job names), for the
    workers comparing a job with them: the history is reduced to runs once here, not per job."""
    if history.empty or not names:
        return {}
    chosen = history[history["job_name"].astype(object).isin(set(names))]
    if chosen.empty:
        return {}
    runs = job_runs(chosen)
    return {str(name): rows.reset_index(drop=True) for name, rows in runs.groupby("job_name", sort=False)}


def record_and_compare(
    settings: StorageSettings,
    params: AuditParameters,
    *,
    audit_time: datetime,
    earlier: HistoryRead,
    outcomes: Sequence[JobOutcome],
    rows: Sequence[FleetRow],
    audit: str,
    reuse: Reusable | None = None,
) -> dict[str, Any]:
    """Prune nights past the retention and return fleet.json's fleet-wide members, computed with this
    audit's rows (committed by its batches already, under the id ``audit``) in the history; ``reuse``:
    the comparisons found still valid (:func:`reusable_comparisons`), taken as they are when this audit
    added no rows. ``history.basis`` records what the comparisons were computed from."""
    included = [outcome for outcome in outcomes
                if outcome.row.history_key is not None and outcome.history is not None and outcome.history.num_rows]
    tables = [outcome.history for outcome in included if outcome.history is not None]
    now = with_audit_id(pa.concat_tables(tables), audit) if tables else None
    since = audit_time - timedelta(days=params.history_days)
    if reuse is not None and now is None:
        sections: dict[str, Any] = dict(reuse.sections)
        basis = reuse.basis
    else:
        frames = [frame for frame in (earlier.rows, None if now is None else history_frame(now)) if frame is not None]
        frames = [frame.astype({c: object for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})
                  for frame in frames if not frame.empty]
        history = pd.concat(frames, ignore_index=True) if frames else earlier.rows
        compared = compare_fleet(history, as_of=audit_time, trend_days=params.history_days,
                                 regression=params.regression_thresholds(), suspects=params.suspect_thresholds())
        sections = compared.as_json()
        # listed before the prune: a night pruned now was compared, so the next audit must not match
        keys = sorted({*earlier.keys, *(str(outcome.row.history_key) for outcome in included)})
        basis = comparison_basis_task(settings, since, audit_time, unwalked(keys), history_days=params.history_days,
                                      regression=params.regression_thresholds(),
                                      suspects=params.suspect_thresholds())
    moved = prune_history_task(settings, audit_time, params.history_days, earlier.damaged)
    sections["coverage"] = fleet_coverage(row.coverage for row in rows)
    sections["history"] = {"audit_time": audit_time.isoformat(), "rows_added": 0 if now is None else now.num_rows,
                           "warnings": list(earlier.warnings), "repaired": moved, "basis": basis}
    return sections
