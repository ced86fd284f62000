"""Regressions by job name: a run's peak against the median of the runs of its job before it.

For each metric (:class:`RegressionMetric`: the run's maximum over ranks of the peak reserved
bytes, and separately of the hidden-gap peak), the baseline is the earlier runs of the same job
name and world size, the last ``runs`` of them in run order (:mod:`.frame`), those with a value.
With fewer than ``min_runs`` the status is ``no_baseline``. Otherwise, with ``median`` and ``MAD``
(median absolute deviation, unscaled) of the baseline, the run regressed when both

    value > median · (1 + min_change)      and      value > median + mad_factor · MAD

A run without a value for a metric gets no row for it. Cost: one sort of the runs, then
O(runs · ``runs``) for the runs asked about.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.history.frame import job_runs
from stormwatch.outputs.json_members import Members


class RegressionMetric(StrEnum):
    """What is compared; both are the maximum over the run's ranks, in bytes."""

    PEAK_RESERVED = "peak_reserved_bytes"
    HIDDEN_GAP_PEAK = "hidden_gap_peak_bytes"


class RegressionStatus(StrEnum):
    REGRESSION = "regression"
    OK = "ok"
    NO_BASELINE = "no_baseline"  # fewer than min_runs earlier runs: "no baseline yet"


@dataclass(frozen=True)
class RegressionThresholds:
    """``runs``: baseline length (earlier runs); ``min_change``: a fraction (0.10 = 10% above the
    median); ``mad_factor``: MADs above the median; ``min_runs``: earlier runs needed for a baseline."""

    runs: int = 7
    min_change: float = 0.10
    mad_factor: float = 3.0
    min_runs: int = 3

    def __post_init__(self) -> None:
        if not 1 <= self.min_runs <= self.runs:
            raise ValueError(f"need 1 <= min_runs <= runs, got min_runs={self.min_runs} runs={self.runs}")
        if self.min_change < 0 or self.mad_factor < 0:
            raise ValueError("min_change and mad_factor must not be negative")


@dataclass(frozen=True)
class Regression:
    """One run and metric against its baseline; bytes; ``change_pct`` in percent (None when the
    baseline is missing or zero); ``earlier_bytes``: the baseline values, oldest first (a sparkline)."""

    job_id: str
    job_name: str
    world_size: int | None
    metric: RegressionMetric
    value_bytes: int
    baseline_bytes: int | None
    change_pct: float | None
    baseline_runs: int
    status: RegressionStatus
    mad_bytes: int | None
    earlier_bytes: tuple[int, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id, "job_name": self.job_name, "world_size": self.world_size,
            "metric": self.metric.value, "value_bytes": self.value_bytes, "baseline_bytes": self.baseline_bytes,
            "change_pct": self.change_pct, "baseline_runs": self.baseline_runs, "status": self.status.value,
            "mad_bytes": self.mad_bytes, "earlier_bytes": list(self.earlier_bytes),
        }

    @classmethod
    def from_json(cls, members: Members) -> Regression:
        """What :meth:`as_json` wrote; raises :class:`~stormwatch.outputs.json_members.MemberError`
        naming a malformed member."""
        return cls(
            job_id=members.text("job_id"), job_name=members.text("job_name"),
            world_size=members.optional_integer("world_size"),
            metric=members.enum("metric", RegressionMetric, "a regression metric"),
            value_bytes=members.integer("value_bytes"), baseline_bytes=members.optional_integer("baseline_bytes"),
            change_pct=members.optional_number("change_pct"), baseline_runs=members.integer("baseline_runs"),
            status=members.enum("status", RegressionStatus, "a regression status"),
            mad_bytes=members.optional_integer("mad_bytes"), earlier_bytes=members.integers("earlier_bytes"),
        )


def judge(value: float, earlier: np.ndarray, thresholds: RegressionThresholds) -> tuple[
    RegressionStatus, float | None, float | None
]:
    """(status, median, MAD) of ``value`` against the ``earlier`` values."""
    if len(earlier) < thresholds.min_runs:
        return RegressionStatus.NO_BASELINE, None, None
    median = float(np.median(earlier))
    mad = float(np.median(np.abs(earlier - median)))
    regressed = value > median * (1 + thresholds.min_change) and value > median + thresholds.mad_factor * mad
    return (RegressionStatus.REGRESSION if regressed else RegressionStatus.OK), median, mad


def find_regressions(
    history: pd.DataFrame,
    *,
    job_ids: Collection[str] | None = None,
    thresholds: RegressionThresholds | None = None,
) -> tuple[Regression, ...]:
    """Each run in ``job_ids`` (default: the jobs of the latest audit in ``history``) against its
    baseline, per metric; sorted by (job_id, metric). ``history``: rows of the history schema,
    already limited to the audit's ``--as-of`` (later runs would otherwise count as earlier)."""
    thresholds = thresholds or RegressionThresholds()
    runs = job_runs(history)
    if runs.empty:
        return ()
    if job_ids is None:
        job_ids = set(runs.loc[runs["audit_time"] == runs["audit_time"].max(), "job_id"])
    wanted = set(job_ids)
    found: list[Regression] = []
    for metric in RegressionMetric:
        valued = runs.loc[runs[metric.value].notna()]
        valued = valued.sort_values(["job_name", "world_size"], na_position="first", kind="stable")
        position = valued.groupby(["job_name", "world_size"], dropna=False, sort=False).cumcount().to_numpy()
        values = valued[metric.value].to_numpy(dtype=float)
        for index in np.flatnonzero(valued["job_id"].isin(wanted).to_numpy()):
            earlier = values[index - min(int(position[index]), thresholds.runs) : index]
            status, median, mad = judge(values[index], earlier, thresholds)
            run = valued.iloc[index]
            world = run["world_size"]
            found.append(Regression(
                job_id=str(run["job_id"]),
                job_name=str(run["job_name"]),
                world_size=None if pd.isna(world) else int(world),
                metric=metric,
                value_bytes=int(values[index]),
                baseline_bytes=None if median is None else int(round(median)),
                change_pct=None if not median else float((values[index] / median - 1) * 100),
                baseline_runs=len(earlier),
                status=status,
                mad_bytes=None if mad is None else int(round(mad)),
                earlier_bytes=tuple(int(value) for value in earlier),
            ))
    return tuple(sorted(found, key=lambda item: (item.job_id, item.metric.value)))
