"""fleet.json's fleet-wide members, from the history and the fleet's rows.

``trends`` (per night, the history window), ``regressions`` (the latest run of every job name,
where it regressed), ``suspect_hosts`` (the last nights' hosts and devices holding first causes
far above the fleet's rate), ``capacity`` (job names whose peak is projected to outgrow their
device within a few runs, :mod:`.capacity_trend`) and ``coverage`` (the fleet's rows summed).
Pure: the caller reads the history and writes fleet.json.

A regression whose value was set by a rank on one of tonight's suspect devices is the device's:
it stays in ``regressions`` with ``explained_by_suspect`` true (the pages say "explained by suspect
device node-bad/2"), and its alert is inhibited by the device's (:mod:`stormwatch.alerting.inhibition`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import pandas as pd

from stormwatch.history.capacity_trend import CapacityThresholds, CapacityWarning, find_capacity_warnings
from stormwatch.history.frame import in_window, job_runs
from stormwatch.history.regressions import (
    Regression,
    RegressionMetric,
    RegressionStatus,
    RegressionThresholds,
    find_regressions,
)
from stormwatch.history.suspects import Suspect, SuspectThresholds, find_suspects
from stormwatch.history.trends import nightly_trends


@dataclass(frozen=True)
class FleetComparisons:
    """What the fleet's history says tonight (tuples, oldest or most suspect first)."""

    trends: tuple[dict[str, Any], ...]
    regressions: tuple[Regression, ...]
    suspects: tuple[Suspect, ...]
    capacity: tuple[CapacityWarning, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "trends": list(self.trends),
            "regressions": [item.as_json() for item in self.regressions],
            "suspect_hosts": [item.as_json() for item in self.suspects],
            "capacity": [item.as_json() for item in self.capacity],
        }


def attributed(regressions: tuple[Regression, ...], suspects: tuple[Suspect, ...], *,
               leaking: frozenset[tuple[str, int]] = frozenset()) -> tuple[Regression, ...]:
    """``regressions`` with those whose value a rank on a suspect device set marked ``explained_by_suspect``,
    and the peak reserved ones set by a rank in ``leaking`` ((job id, rank) pairs) ``explained_by_leak``."""
    devices = {(item.host, item.device_id) for item in suspects}
    out = []
    for item in regressions:
        if item.host is not None and (item.host, item.device_id) in devices:
            item = replace(item, explained_by_suspect=True)
        elif (item.metric is RegressionMetric.PEAK_RESERVED and item.rank is not None
              and (item.job_id, item.rank) in leaking):
            item = replace(item, explained_by_leak=True)
        out.append(item)
    return tuple(out)


def leaking_ranks(rows: pd.DataFrame, job_ids: Collection[str]) -> frozenset[tuple[str, int]]:
    """(job id, rank) of the rows of ``job_ids`` whose memory leaked (history column ``leak``; absent
    in files written before it: none)."""
    if "leak" not in rows.columns or rows.empty:
        return frozenset()
    leaked = rows.loc[rows["leak"].fillna(False).astype(bool) & rows["job_id"].isin(list(job_ids))]
    return frozenset(zip(leaked["job_id"].astype(str), leaked["rank"].astype(int), strict=True))


def compare_fleet(
    history: pd.DataFrame,
    *,
    as_of: datetime,
    trend_days: int,
    regression: RegressionThresholds,
    suspects: SuspectThresholds,
    capacity: CapacityThresholds | None = None,
) -> FleetComparisons:
    """``history``: every row read for this audit plus its own rows (later rows are ignored)."""
    current = in_window(history, as_of=as_of, days=None)
    runs = job_runs(current)
    latest: list[str] = []
    if not runs.empty:
        latest = list(runs.groupby(["job_name", "world_size"], dropna=False, sort=False)["job_id"].last())
    regressed = tuple(item for item in find_regressions(current, job_ids=latest, thresholds=regression)
                      if item.status is RegressionStatus.REGRESSION)
    trends = tuple(trend.as_json() for trend in nightly_trends(in_window(current, as_of=as_of, days=trend_days)))
    found = find_suspects(current, as_of=as_of, thresholds=suspects)
    leaking = leaking_ranks(current, {item.job_id for item in regressed})
    return FleetComparisons(trends, attributed(regressed, found, leaking=leaking), found,
                            find_capacity_warnings(current, thresholds=capacity))


#: Coverage counts summed over the fleet's jobs (a job written before a count existed adds 0).
_SUMMED = ("expected_ranks", "present_ranks", "sessions", "sessions_without_stop", "load_warnings", "ended_abruptly")


def fleet_coverage(coverages: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The fleet's coverage: the jobs' ``fleet.coverage`` summed (jobs without one are not counted)."""
    total: Counter[str] = Counter()
    versions: Counter[str] = Counter()
    collectors: Counter[str] = Counter()
    jobs = 0
    for coverage in coverages:
        if not coverage:
            continue
        jobs += 1
        for name in _SUMMED:
            total[name] += int(coverage.get(name) or 0)
        versions.update({str(key): int(value) for key, value in (coverage.get("schema_versions") or {}).items()})
        collectors.update({str(key): int(value) for key, value in (coverage.get("collectors") or {}).items()})
    expected = total["expected_ranks"]
    return {
        "jobs": jobs,
        **{name: total[name] for name in _SUMMED},
        "percent": round(100.0 * total["present_ranks"] / expected, 1) if expected else None,
        "schema_versions": dict(sorted(versions.items())),
        "collectors": dict(sorted(collectors.items())),
    }
