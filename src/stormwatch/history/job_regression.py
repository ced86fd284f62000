"""One job's run against the earlier runs of its job name, as model.json's ``fleet.regression``.

The audit reads the history once and reduces it to runs (one row per earlier run: its job
name, world size and peaks, in run order, :func:`~stormwatch.history.frame.job_runs`); the
worker that diagnoses a job gets the runs of its job name and judges the job's own peaks
against them with the rule of :mod:`~stormwatch.history.regressions`, a few array operations
per metric rather than a history query per job. The member holds the worst status over the
metrics and, per metric, its value, baseline, change and the earlier values (a sparkline).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from stormwatch.history.regressions import (
    Regression,
    RegressionMetric,
    RegressionStatus,
    RegressionThresholds,
    judge,
)
from stormwatch.outputs.json_members import Members

#: The status of a job over its metrics: a regression on any metric wins, then ok.
_WORST_FIRST = (RegressionStatus.REGRESSION, RegressionStatus.OK, RegressionStatus.NO_BASELINE)


def _max(table: pa.Table, column: str) -> Any:
    return pc.max(table.column(column)).as_py() if table.num_rows else None


def _carrier(table: pa.Table, column: str) -> dict[str, Any]:
    """The rank row holding ``column``'s maximum (the lowest such rank, then the first row), as
    :class:`Regression` members: the rule of :func:`~stormwatch.history.regressions.value_carriers`."""
    if "rank" not in table.column_names:
        return {"rank": None, "host": None, "device_id": None}
    held = table.filter(pc.equal(table.column(column), pc.max(table.column(column))))
    if not held.num_rows:
        return {"rank": None, "host": None, "device_id": None}
    first = int(pc.index(held.column("rank"), pc.min(held.column("rank"))).as_py())
    row = {name: held.column(name)[first].as_py() if name in held.column_names else None
           for name in ("rank", "host", "device_id")}
    return {"rank": row["rank"], "host": None if row["host"] is None else str(row["host"]),
            "device_id": row["device_id"]}


def judge_run(
    job_id: str, own_rows: pa.Table, earlier_runs: pd.DataFrame | None, *, thresholds: RegressionThresholds
) -> tuple[Regression, ...]:
    """The job (its history rows ``own_rows``) against ``earlier_runs`` of its job name (runs in run
    order, columns of :data:`~stormwatch.history.frame.RUN_COLUMNS`; None: none), per metric with a value."""
    if not own_rows.num_rows:
        return ()
    job_name = str(own_rows.column("job_name")[0].as_py())
    world = _max(own_rows, "world_size")
    same: pd.DataFrame | None = None
    if earlier_runs is not None and not earlier_runs.empty:
        sizes = earlier_runs["world_size"]
        same_world = sizes.isna() if world is None else sizes == world
        same = earlier_runs[same_world & (earlier_runs["job_id"].astype(object) != job_id)]
    found = []
    for metric in RegressionMetric:
        value = _max(own_rows, metric.value)
        if value is None:
            continue
        earlier = np.zeros(0) if same is None else same[metric.value].dropna().to_numpy(dtype=float)
        earlier = earlier[len(earlier) - min(len(earlier), thresholds.runs):]
        status, median, mad = judge(float(value), earlier, thresholds)
        found.append(Regression(
            job_id=job_id, job_name=job_name, world_size=None if world is None else int(world), metric=metric,
            value_bytes=int(value), baseline_bytes=None if median is None else int(round(median)),
            change_pct=None if not median else float((value / median - 1) * 100), baseline_runs=len(earlier),
            status=status, mad_bytes=None if mad is None else int(round(mad)),
            earlier_bytes=tuple(int(item) for item in earlier), **_carrier(own_rows, metric.value),
        ))
    return tuple(sorted(found, key=lambda item: item.metric.value))  # as find_regressions orders them


@dataclass(frozen=True, kw_only=True, slots=True)
class RegressionSummary:
    """model.json's ``fleet.regression``: the job's run against the earlier runs of its job name and
    world size. ``status``: the worst over ``metrics`` (a regression on any metric wins, then ok);
    ``metrics``: one :class:`Regression` per metric with a value, in metric-name order (non-empty)."""

    status: RegressionStatus
    job_name: str
    world_size: int | None
    metrics: tuple[Regression, ...]

    def as_json(self) -> dict[str, Any]:
        return {"status": self.status.value, "job_name": self.job_name, "world_size": self.world_size,
                "metrics": [item.as_json() for item in self.metrics]}

    @classmethod
    def from_json(cls, members: Members) -> RegressionSummary:
        """Raises :class:`~stormwatch.outputs.json_members.MemberError` naming a malformed member."""
        return cls(status=members.enum("status", RegressionStatus, "a regression status"),
                   job_name=members.text("job_name"), world_size=members.optional_integer("world_size"),
                   metrics=members.each("metrics", Regression.from_json))


def regression_summary(
    job_id: str, own_rows: pa.Table, earlier_runs: pd.DataFrame | None, *, thresholds: RegressionThresholds
) -> RegressionSummary | None:
    """The job's summary (from its history rows ``own_rows``); None when it has no metric value."""
    found = judge_run(job_id, own_rows, earlier_runs, thresholds=thresholds)
    if not found:
        return None
    statuses = {item.status for item in found}
    return RegressionSummary(status=next(status for status in _WORST_FIRST if status in statuses),
                             job_name=found[0].job_name, world_size=found[0].world_size, metrics=found)
