"""One job's run against the earlier runs of its job name, as model.json's ``fleet.regression``.

The worker that diagnoses a job gets the history rows of its job name's earlier runs (the
audit reads the history once); this turns them and the job's own rows into the member the
job report shows: the worst status over the metrics, and per metric its value, baseline,
change and the earlier values for a sparkline.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from stormwatch.history.frame import history_frame
from stormwatch.history.regressions import RegressionStatus, RegressionThresholds, find_regressions

#: The status of a job over its metrics: a regression on any metric wins, then ok.
_WORST_FIRST = (RegressionStatus.REGRESSION, RegressionStatus.OK, RegressionStatus.NO_BASELINE)


def regression_summary(
    job_id: str, own_rows: pa.Table, earlier: pd.DataFrame | None, *, thresholds: RegressionThresholds
) -> dict[str, Any] | None:
    """``{"status", "job_name", "world_size", "metrics": [Regression.as_json()...]}`` for ``job_id``
    (its rows ``own_rows``, in the history schema) against ``earlier`` (rows of other runs, any
    columns of the schema; None or empty: no baseline yet); None when the job has no metric value."""
    own = history_frame(own_rows)
    frames = [own] if earlier is None or earlier.empty else [earlier[earlier["job_id"] != job_id], own]
    frames = [frame[[column for column in own.columns if column in frame.columns]] for frame in frames]
    history = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    for column in ("job_name", "host", "verdict", "job_id", "audit_id"):
        if column in history.columns:
            history[column] = history[column].astype(object)
    found = [item for item in find_regressions(history, job_ids=[job_id], thresholds=thresholds)
             if item.job_id == job_id]
    if not found:
        return None
    statuses = {item.status for item in found}
    return {
        "status": next(status.value for status in _WORST_FIRST if status in statuses),
        "job_name": found[0].job_name,
        "world_size": found[0].world_size,
        "metrics": [item.as_json() for item in found],
    }
