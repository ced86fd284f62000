"""Suspect hosts and devices: where jobs' first causes land more often than chance explains.

Over the runs audited in the last ``nights`` nights up to ``as_of`` (each job once, its latest
audit in the window): a (host, device id) *hosted* a job when one of the job's ranks ran on it,
and *caused* it when the job's first cause (the rank of its earliest indicator, ``first_cause``)
ran on it. Per (host, device id): ``jobs`` hosted, ``anomalous_jobs`` caused, ``rate`` =
anomalous_jobs / jobs. The fleet rate is the same ratio over every (job, device) pair of the
window, so a device of an 8-rank job is held to the chance (1 in 8) of its rank being the first
cause's, not to the share of anomalous jobs. A device is a suspect when ``jobs >= min_jobs`` and the
Wilson score lower bound of its rate (``z`` = 1.96 for 95%) exceeds ``factor`` × the fleet rate.
Rows whose host is unknown count for neither. Linear in rows (one group-by).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.history.frame import in_window, latest_rows


@dataclass(frozen=True)
class SuspectThresholds:
    """``nights``: window in days up to the audit time; ``min_jobs``: jobs a device needs to be judged;
    ``factor``: how many times the fleet rate its Wilson lower bound must exceed; ``z``: the normal
    quantile of the bound (1.96: 95%)."""

    nights: int = 14
    min_jobs: int = 3
    factor: float = 2.0
    z: float = 1.96

    def __post_init__(self) -> None:
        if self.nights < 1 or self.min_jobs < 1 or self.factor <= 0 or self.z <= 0:
            raise ValueError(f"suspect thresholds must be positive: {self}")


@dataclass(frozen=True)
class Suspect:
    """A (host, device id) whose first-cause rate stands out; rates are fractions in [0, 1]."""

    host: str
    device_id: int | None
    jobs: int
    anomalous_jobs: int
    rate: float
    fleet_rate: float
    rate_lower_bound: float

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "device_id": self.device_id, "jobs": self.jobs,
                "anomalous_jobs": self.anomalous_jobs, "rate": self.rate, "fleet_rate": self.fleet_rate,
                "rate_lower_bound": self.rate_lower_bound}


def wilson_lower_bound(successes: np.ndarray, trials: np.ndarray, z: float = 1.96) -> np.ndarray:
    """The Wilson score interval's lower bound of ``successes / trials`` (element-wise; 0 where
    ``trials`` is 0)::

        (p + z²/2n − z·sqrt(p(1−p)/n + z²/4n²)) / (1 + z²/n)
    """
    n = np.asarray(trials, dtype=float)
    safe = np.where(n > 0, n, 1.0)
    p = np.asarray(successes, dtype=float) / safe
    z2 = z * z
    bound = (p + z2 / (2 * safe) - z * np.sqrt(p * (1 - p) / safe + z2 / (4 * safe * safe))) / (1 + z2 / safe)
    return np.where(n > 0, np.clip(bound, 0.0, 1.0), 0.0)


def device_rates(history: pd.DataFrame, *, as_of: datetime, nights: int) -> tuple[pd.DataFrame, float]:
    """Per (host, device_id) in the window: ``jobs``, ``anomalous_jobs``; and the fleet rate."""
    rows = latest_rows(in_window(history, as_of=as_of, days=nights))
    rows = rows.loc[rows["host"].notna(), ["job_id", "host", "device_id", "first_cause"]]
    if rows.empty:
        return pd.DataFrame(columns=["host", "device_id", "jobs", "anomalous_jobs"]), 0.0
    pairs = rows.groupby(["host", "device_id", "job_id"], observed=True, dropna=False)["first_cause"].any()
    devices = pairs.groupby(level=["host", "device_id"], observed=True, dropna=False).agg(["size", "sum"])
    devices = devices.rename(columns={"size": "jobs", "sum": "anomalous_jobs"}).reset_index()
    fleet_rate = float(devices["anomalous_jobs"].sum() / devices["jobs"].sum())
    return devices, fleet_rate


def find_suspects(
    history: pd.DataFrame, *, as_of: datetime, thresholds: SuspectThresholds | None = None
) -> tuple[Suspect, ...]:
    """The suspect (host, device id) pairs, most suspect (highest lower bound) first."""
    thresholds = thresholds or SuspectThresholds()
    devices, fleet_rate = device_rates(history, as_of=as_of, nights=thresholds.nights)
    if devices.empty:
        return ()
    jobs = devices["jobs"].to_numpy(dtype=float)
    anomalous = devices["anomalous_jobs"].to_numpy(dtype=float)
    bound = wilson_lower_bound(anomalous, jobs, thresholds.z)
    chosen = np.flatnonzero((jobs >= thresholds.min_jobs) & (bound > thresholds.factor * fleet_rate))
    found = [
        Suspect(
            host=str(devices["host"].iat[i]),
            device_id=None if pd.isna(devices["device_id"].iat[i]) else int(devices["device_id"].iat[i]),
            jobs=int(jobs[i]),
            anomalous_jobs=int(anomalous[i]),
            rate=float(anomalous[i] / jobs[i]),
            fleet_rate=fleet_rate,
            rate_lower_bound=float(bound[i]),
        )
        for i in chosen
    ]
    return tuple(sorted(found, key=lambda item: (-item.rate_lower_bound, item.host, item.device_id or -1)))
