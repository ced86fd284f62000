"""Regressions by job name: a run's peak against the median of the runs of its job before it.

For each metric (:class:`RegressionMetric`: the run's maximum over ranks of the peak reserved
bytes, and separately of the hidden-gap peak), the baseline is the earlier runs of the same job
name and world size, the last ``runs`` of them in run order (:mod:`.frame`), those with a value.
With fewer than ``min_runs`` the status is ``no_baseline``. Otherwise, with ``median`` and ``MAD``
(median absolute deviation, unscaled) of the baseline, the run regressed when both

    value > median · (1 + min_change)      and      value > median + mad_factor · MAD

A run without a value for a metric gets no row for it. Cost: one sort of the runs, then
O(runs · ``runs``) for the runs asked about.

Each regression names the rank that set its value (the run's maximum: among the ranks of the
run's latest audit holding it, the lowest rank) and where that rank ran (``host``, ``device_id``),
found by one ``idxmax`` per run (:func:`value_carriers`). When that device is a suspect of the same
audit (:mod:`.suspects`), the regression is the device's, not the job's: ``explained_by_suspect``
(set by :func:`~.sections.compare_fleet`, which knows the audit's suspects). Likewise a peak
reserved regression whose rank leaked in that run (its history row's ``leak``) is the leak's:
``explained_by_leak``, told inside the leak's alert, not as a second alert.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.history.frame import job_runs, latest_rows
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
    rank: int | None = None  # the rank whose value is the run's (None: unknown, e.g. rows without ranks)
    host: str | None = None  # where that rank ran
    device_id: int | None = None
    explained_by_suspect: bool = False  # that (host, device) is a suspect of the same audit
    explained_by_leak: bool = False  # peak reserved set by a rank whose memory leaked in that run

    @property
    def carrier_text(self) -> str | None:
        """``explained by suspect device node-bad/2``; else ``set by rank 2 on node-bad GPU 2`` (None: no rank)."""
        device = "?" if self.device_id is None else str(self.device_id)
        if self.explained_by_suspect:
            return f"explained by suspect device {self.host}/{device}"
        if self.explained_by_leak:
            return f"explained by the leak on rank {self.rank}"
        if self.rank is None:
            return None
        place = "" if self.host is None else f" on {self.host} GPU {device}"
        return f"set by rank {self.rank}{place}"

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id, "job_name": self.job_name, "world_size": self.world_size,
            "metric": self.metric.value, "value_bytes": self.value_bytes, "baseline_bytes": self.baseline_bytes,
            "change_pct": self.change_pct, "baseline_runs": self.baseline_runs, "status": self.status.value,
            "mad_bytes": self.mad_bytes, "earlier_bytes": list(self.earlier_bytes),
            "rank": self.rank, "host": self.host, "device_id": self.device_id,
            "explained_by_suspect": self.explained_by_suspect, "explained_by_leak": self.explained_by_leak,
        }

    @classmethod
    def from_json(cls, members: Members) -> Regression:
        """What :meth:`as_json` wrote (before the carrier was recorded too: ``rank``, ``host``,
        ``device_id`` None, not explained); raises :class:`~stormwatch.outputs.json_members.MemberError`
        naming a malformed member."""
        return cls(
            job_id=members.text("job_id"), job_name=members.text("job_name"),
            world_size=members.optional_integer("world_size"),
            metric=members.enum("metric", RegressionMetric, "a regression metric"),
            value_bytes=members.integer("value_bytes"), baseline_bytes=members.optional_integer("baseline_bytes"),
            change_pct=members.optional_number("change_pct"), baseline_runs=members.integer("baseline_runs"),
            status=members.enum("status", RegressionStatus, "a regression status"),
            mad_bytes=members.optional_integer("mad_bytes"), earlier_bytes=members.integers("earlier_bytes"),
            rank=members.optional_integer("rank"), host=members.optional_text("host"),
            device_id=members.optional_integer("device_id"),
            explained_by_suspect=members.flag("explained_by_suspect", False),
            explained_by_leak=members.flag("explained_by_leak", False),
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


#: What :func:`value_carriers` gives per job: the rank holding the value and where it ran.
CARRIER_COLUMNS = ("rank", "host", "device_id")


def value_carriers(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per job id (the index), the rank row holding the maximum of ``column`` over ``rows`` (rank rows
    of one audit per job): ``rank``, ``host``, ``device_id`` (NaN when unknown). Ties: the lowest
    rank, then the first row. Jobs without a value are left out; one stable sort and one ``idxmax``."""
    if rows.empty or "rank" not in rows.columns:
        return pd.DataFrame(columns=list(CARRIER_COLUMNS), index=pd.Index([], name="job_id"))
    valued = rows.loc[rows[column].notna()]
    if valued.empty:
        return pd.DataFrame(columns=list(CARRIER_COLUMNS), index=pd.Index([], name="job_id"))
    valued = valued.sort_values("rank", kind="stable")
    job_ids = valued["job_id"].astype(object)
    chosen = valued[column].astype(float).groupby(job_ids.to_numpy(), sort=False).idxmax()
    found = valued.loc[chosen.to_numpy(), ["rank", "host", "device_id"]]
    found.index = pd.Index(chosen.index, name="job_id")
    return found.astype({"host": object})


def carrier_of(carriers: pd.DataFrame, job_id: str) -> dict[str, Any]:
    """``rank``, ``host``, ``device_id`` of ``job_id`` in ``carriers`` (:func:`value_carriers`), as
    :class:`Regression` members (None when unknown)."""
    if job_id not in carriers.index:
        return {"rank": None, "host": None, "device_id": None}
    rank, host, device = carriers.loc[job_id, ["rank", "host", "device_id"]]
    return {"rank": None if pd.isna(rank) else int(rank), "host": None if pd.isna(host) else str(host),
            "device_id": None if pd.isna(device) else int(device)}


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
    rows = latest_rows(history.loc[history["job_id"].astype(object).isin(wanted)])  # a job's latest audit
    found: list[Regression] = []
    for metric in RegressionMetric:
        carriers = value_carriers(rows, metric.value)
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
                **carrier_of(carriers, str(run["job_id"])),
            ))
    return tuple(sorted(found, key=lambda item: (item.job_id, item.metric.value)))
