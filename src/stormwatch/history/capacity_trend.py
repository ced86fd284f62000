"""Capacity trend across runs: a job name whose peak rises toward its device's capacity, warned before it runs out.

A run's *peak* is the maximum over its ranks of ``peak_device_used_bytes`` (what the device had in
use: the allocator's reserve and what hides beside it), else of ``peak_reserved_bytes`` when no rank
recorded device use; its *capacity* is the maximum over its ranks of ``device_total_bytes``. Per job
name and world size, the series is its last ``runs`` runs (run order, :mod:`.frame`; a job's latest
audit) that have both and share the latest run's capacity (a job moved to larger devices starts a
new series).

On the logarithm of the peaks the growth per run is the Theil–Sen slope over the run index (the
median of the pairwise slopes: one outlier run cannot make or hide a trend), ``growth`` =
exp(slope) − 1, a fraction per run. At that rate the peak exceeds the capacity after

    runs_to_capacity = floor(ln(capacity / latest_peak) / slope) + 1      (1 when already at it)

more runs. A :class:`CapacityWarning` is raised when all of these hold (:class:`CapacityThresholds`;
five runs of noise can look like anything, so each test guards against one way they do):

* at least ``min_runs`` runs (default 5, the whole window; 4 at the least);
* growth of at least ``min_growth_pct`` percent a run (default 1 %: slower growth is left to the
  other tests' noise guards to tell, and projects past the horizon unless the peak is already there);
* significant: the slope is at least ``min_trend_t`` (default 4) standard errors, from the
  residuals about the Theil–Sen line: noise that happened to climb has large residuals;
* consistent: at most ``max_discordant_pairs`` pairs of runs (Mann–Kendall's pairs, earlier vs
  later) where the later peak is lower (default 1), and, when the name ran before the window (up
  to ``runs`` earlier runs are read), every earlier peak below the window's median: a climb out
  of a dip is noise;
* spread, not a single jump: no one step between consecutive runs carries more than
  ``max_step_share`` of the series' rise (default 0.6), and the best single step (two flat levels)
  fits at least ``min_step_fit_ratio`` (default 2) times worse than the line: a job that grew once
  (a larger batch) and stays there is a regression's business, not a trend's;
* ``runs_to_capacity`` within ``horizon_runs`` (default 5: about a working week of nightly runs,
  long enough to act on, near enough that the projection is still a reliable one).

bench/capacity_series.py measures these defaults: no warning over flat, noisy, stepped and
two-level series, and every series rising 3 % a run or more warned before it runs out.

Vectorised: one group-by over the rows of each job's latest audit, then every series as one
padded (series × 2·``runs``) matrix; the pairwise slopes are a (series × pairs) array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.history.frame import RUN_ORDER, latest_rows
from stormwatch.history.regressions import carrier_of, value_carriers
from stormwatch.outputs.json_members import Members

GIB = float(1 << 30)
_KEYS = ["job_name", "world_size"]
_VALUE = "_capacity_peak_bytes"


@dataclass(frozen=True, kw_only=True)
class CapacityThresholds:
    """``runs``: the series' length (latest runs); ``min_runs``: runs a series needs (4 at the least);
    ``horizon_runs``: warn when the peak is projected to exceed the capacity within this many runs;
    ``min_growth_pct``: percent a run; ``max_discordant_pairs``: pairs of runs going down that a trend
    may have; ``max_step_share``: the largest share of the rise one step may carry (a fraction);
    ``min_trend_t``: standard errors the slope must reach; ``min_step_fit_ratio``: how many times
    worse than the line the best single step must fit (see the module)."""

    runs: int = 5
    min_runs: int = 5
    horizon_runs: int = 5
    min_growth_pct: float = 1.0
    max_discordant_pairs: int = 1
    max_step_share: float = 0.6
    min_trend_t: float = 4.0
    min_step_fit_ratio: float = 2.0

    def __post_init__(self) -> None:
        if not 4 <= self.min_runs <= self.runs:
            raise ValueError(f"need 4 <= min_runs <= runs, got min_runs={self.min_runs} runs={self.runs}")
        if self.horizon_runs < 1 or self.min_growth_pct <= 0 or self.max_discordant_pairs < 0 or self.min_trend_t < 0:
            raise ValueError(f"capacity thresholds out of range: {self}")
        if not 0 < self.max_step_share <= 1:
            raise ValueError(f"max_step_share must be in (0, 1], got {self.max_step_share}")


@dataclass(frozen=True, kw_only=True)
class CapacityWarning:
    """A job name (and world size) whose peak is projected to exceed its device within the horizon.
    Bytes; ``growth_pct_per_run`` in percent; ``peaks_bytes``: the series judged, oldest first (its
    last is ``latest_peak_bytes``); ``job_id``: the latest run; ``rank``, ``host``, ``device_id``:
    where the latest peak was (None when unknown)."""

    job_name: str
    world_size: int | None
    runs: int
    growth_pct_per_run: float
    latest_peak_bytes: int
    device_total_bytes: int
    runs_to_capacity: int
    job_id: str
    peaks_bytes: tuple[int, ...]
    rank: int | None = None
    host: str | None = None
    device_id: int | None = None

    @property
    def text(self) -> str:
        """``llama-7b: peak up 6 % a run over 5 runs; at this trend it needs more than 80 GiB within 3 runs``."""
        total = f"{self.device_total_bytes / GIB:.1f}".removesuffix(".0")
        within = "the next run" if self.runs_to_capacity == 1 else f"{self.runs_to_capacity} runs"
        return (f"{self.job_name}: peak up {self.growth_pct_per_run:.0f} % a run over {self.runs} runs; "
                f"at this trend it needs more than {total} GiB within {within}")

    def as_json(self) -> dict[str, Any]:
        return {
            "job_name": self.job_name, "world_size": self.world_size, "runs": self.runs,
            "growth_pct_per_run": self.growth_pct_per_run, "latest_peak_bytes": self.latest_peak_bytes,
            "device_total_bytes": self.device_total_bytes, "runs_to_capacity": self.runs_to_capacity,
            "job_id": self.job_id, "peaks_bytes": list(self.peaks_bytes), "rank": self.rank, "host": self.host,
            "device_id": self.device_id, "text": self.text,
        }

    @classmethod
    def from_json(cls, members: Members) -> CapacityWarning:
        """What :meth:`as_json` wrote (``text`` is derived); raises
        :class:`~stormwatch.outputs.json_members.MemberError` naming a malformed member."""
        return cls(
            job_name=members.text("job_name"), world_size=members.optional_integer("world_size"),
            runs=members.integer("runs"), growth_pct_per_run=members.number("growth_pct_per_run"),
            latest_peak_bytes=members.integer("latest_peak_bytes"),
            device_total_bytes=members.integer("device_total_bytes"),
            runs_to_capacity=members.integer("runs_to_capacity"), job_id=members.text("job_id"),
            peaks_bytes=members.integers("peaks_bytes"), rank=members.optional_integer("rank"),
            host=members.optional_text("host"), device_id=members.optional_integer("device_id"),
        )


def _runs(history: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, rows): one run per job (its latest audit) in run order with its peak and capacity;
    and the rank rows of those audits with the value the peak was taken from (``_VALUE``)."""
    rows = latest_rows(history)
    rows = rows.loc[rows["job_name"].notna()]
    job_ids = rows["job_id"].astype(object).to_numpy()
    used = rows["peak_device_used_bytes"].astype(float)
    has_used = used.groupby(job_ids).transform("count").to_numpy() > 0
    value = np.where(has_used, used.to_numpy(), rows["peak_reserved_bytes"].astype(float).to_numpy())
    rows = rows.assign(**{_VALUE: value})
    runs = rows.groupby(job_ids, sort=False).agg(
        job_id=("job_id", "first"), job_name=("job_name", "first"), world_size=("world_size", "max"),
        audit_time=("audit_time", "first"), job_started_ns=("job_started_ns", "min"),
        peak=(_VALUE, "max"), total=("device_total_bytes", "max"))
    runs = runs.loc[(runs["peak"] > 0) & (runs["total"] > 0)]
    runs = runs.astype({"job_id": object, "job_name": object})
    return runs.sort_values(RUN_ORDER, na_position="first", kind="stable").reset_index(drop=True), rows


def _series(runs: pd.DataFrame, length: int) -> tuple[pd.DataFrame, np.ndarray]:
    """(last run per series, peaks): the trailing runs of each (job name, world size) with
    its latest capacity, at most ``length``, right-aligned in a (series × length) matrix of peaks
    (NaN where a series is shorter)."""
    groups = runs.groupby(_KEYS, dropna=False, sort=False)
    same = runs["total"].to_numpy() == groups["total"].transform("last").to_numpy()
    reversed_runs = runs.iloc[::-1]
    breaks = pd.Series(~same[::-1], index=reversed_runs.index).groupby(
        [reversed_runs[key] for key in _KEYS], dropna=False, sort=False).cumsum()
    kept = runs.loc[breaks.sort_index().to_numpy() == 0]
    kept_groups = kept.groupby(_KEYS, dropna=False, sort=False)
    from_end = kept_groups.cumcount(ascending=False).to_numpy()
    kept, from_end = kept.loc[from_end < length], from_end[from_end < length]
    codes = kept.groupby(_KEYS, dropna=False, sort=False).ngroup().to_numpy()
    peaks = np.full((int(codes.max()) + 1 if len(codes) else 0, length), np.nan)
    peaks[codes, length - 1 - from_end] = kept["peak"].to_numpy(dtype=float)
    last = kept.loc[from_end == 0]
    order = np.argsort(codes[from_end == 0], kind="stable")  # the series' rows in code order
    return last.iloc[order].reset_index(drop=True), peaks


def _step_fit_ratio(logs: np.ndarray, slope: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """Per series, how much worse the best single step (two flat levels, any break) fits the log
    peaks than the Theil–Sen line: the step's squared residuals over the line's (inf for an exact
    line). A job that grew once and stays there fits a step as well as a line: a small ratio."""
    present = ~np.isnan(logs)
    index = np.arange(logs.shape[1], dtype=float)
    values = np.where(present, logs, 0.0)
    line = np.where(present, logs - (slope[:, None] * index + intercept[:, None]), 0.0)
    line_ss = (line ** 2).sum(axis=1)
    best = np.full(len(logs), np.inf)
    for cut in range(1, logs.shape[1]):
        parts = []
        for side in (slice(0, cut), slice(cut, None)):
            count = present[:, side].sum(axis=1)
            total, squares = values[:, side].sum(axis=1), (values[:, side] ** 2).sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                parts.append(np.where(count > 0, squares - total ** 2 / np.maximum(count, 1), np.nan))
        both = parts[0] + parts[1]
        best = np.where(np.isnan(both), best, np.minimum(best, both))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(line_ss > 0, best / line_ss, np.inf)


def _trend_t(logs: np.ndarray, slope: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per series, the slope over its standard error: the residuals about the Theil–Sen line (its
    intercept the median of ``log peak − slope · index``), their root mean square on n − 2 degrees of
    freedom, over sqrt(Σ (index − mean index)²). Large for a steady rise, small for noise that
    happened to climb (inf for an exact rise)."""
    index = np.arange(logs.shape[1], dtype=float)
    present = ~np.isnan(logs)
    with np.errstate(invalid="ignore", divide="ignore"):
        judged = (counts >= 3) & ~np.isnan(slope)
        intercept = np.zeros(len(logs))
        if judged.any():
            intercept[judged] = np.nanmedian((logs - slope[:, None] * index)[judged], axis=1)
        residuals = np.where(present, logs - (slope[:, None] * index + intercept[:, None]), 0.0)
        scale = np.sqrt((residuals ** 2).sum(axis=1) / np.maximum(counts - 2, 1))
        mean = np.where(present, index, 0.0).sum(axis=1) / np.maximum(counts, 1)
        spread = np.sqrt(np.where(present, (index - mean[:, None]) ** 2, 0.0).sum(axis=1))
        return np.where(scale > 0, slope * spread / scale, np.inf), intercept


def _theil_sen(logs: np.ndarray, *, min_runs: int) -> np.ndarray:
    """Per series (rows of ``logs``, NaN where absent), the median of the pairwise slopes over the
    run index; NaN for a series of fewer than ``min_runs`` runs."""
    later, earlier = np.triu_indices(logs.shape[1], k=1)[::-1]  # pairs (earlier < later)
    slopes = (logs[:, later] - logs[:, earlier]) / (later - earlier)
    enough = (~np.isnan(logs)).sum(axis=1) >= min_runs
    slope = np.full(len(logs), np.nan)
    if enough.any():
        slope[enough] = np.nanmedian(slopes[enough], axis=1)
    return slope


def _consistent(logs: np.ndarray, earlier_peaks: np.ndarray, thresholds: CapacityThresholds) -> np.ndarray:
    """Per series, whether its rise is a trend rather than noise or a jump: few pairs going down, no
    step carrying most of the rise, and (when the name ran before the window) its earlier runs all
    below the window's median: a climb out of a dip is noise."""
    later, earlier = np.triu_indices(logs.shape[1], k=1)[::-1]
    rises = logs[:, later] - logs[:, earlier]
    discordant = (~np.isnan(rises) & (rises < 0)).sum(axis=1)
    counts = (~np.isnan(logs)).sum(axis=1)
    first = logs[np.arange(len(logs)), np.clip(logs.shape[1] - counts, 0, logs.shape[1] - 1)]
    rise = logs[:, -1] - first
    steps = np.diff(logs, axis=1)
    largest = np.nanmax(np.where(np.isnan(steps), -np.inf, steps), axis=1)
    known = ~np.isnan(earlier_peaks)
    before = np.max(np.where(known, np.log(np.where(known, earlier_peaks, 1.0)), -np.inf), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = largest / rise
        median = np.nanmedian(logs, axis=1)
    return ((discordant <= thresholds.max_discordant_pairs) & (rise > 0) & (share <= thresholds.max_step_share)
            & (before < median))


def find_capacity_warnings(
    history: pd.DataFrame, *, thresholds: CapacityThresholds | None = None
) -> tuple[CapacityWarning, ...]:
    """The job names projected to outgrow their device within the horizon, soonest first (then by
    name). ``history``: rows of the history schema, already limited to the audit's ``--as-of``."""
    thresholds = thresholds or CapacityThresholds()
    if history.empty:
        return ()
    runs, rows = _runs(history)
    if runs.empty:
        return ()
    last, both = _series(runs, 2 * thresholds.runs)  # the window, and as many runs before it
    peaks, earlier_peaks = both[:, thresholds.runs:], both[:, :thresholds.runs]
    present = ~np.isnan(peaks)
    counts = present.sum(axis=1)
    logs = np.log(np.where(present, peaks, 1.0))
    logs[~present] = np.nan
    slope = _theil_sen(logs, min_runs=thresholds.min_runs)
    trend_t, intercept = _trend_t(logs, slope, counts)
    totals = last["total"].to_numpy(dtype=float)
    latest = peaks[:, -1]
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = np.expm1(slope)
        headroom = np.log(totals / latest)
        to_capacity = np.where(headroom > 0, np.floor(headroom / slope) + 1, 1.0)
        warned = ((growth * 100 >= thresholds.min_growth_pct) & (trend_t >= thresholds.min_trend_t)
                  & (_step_fit_ratio(logs, slope, intercept) >= thresholds.min_step_fit_ratio)
                  & _consistent(logs, earlier_peaks, thresholds) & (to_capacity <= thresholds.horizon_runs))
    chosen = np.flatnonzero(warned)
    if not len(chosen):
        return ()
    latest_ids = set(last["job_id"].iloc[chosen])
    carriers = value_carriers(rows.loc[rows["job_id"].astype(object).isin(latest_ids)], _VALUE)
    found = []
    for index in chosen:
        run = last.iloc[index]
        world = run["world_size"]
        found.append(CapacityWarning(
            job_name=str(run["job_name"]), world_size=None if pd.isna(world) else int(world),
            runs=int(counts[index]), growth_pct_per_run=float(growth[index] * 100),
            latest_peak_bytes=int(latest[index]), device_total_bytes=int(totals[index]),
            runs_to_capacity=int(to_capacity[index]), job_id=str(run["job_id"]),
            peaks_bytes=tuple(int(value) for value in peaks[index][present[index]]),
            **carrier_of(carriers, str(run["job_id"])),
        ))
    return tuple(sorted(found, key=lambda item: (item.runs_to_capacity, item.job_name, item.world_size or 0)))
