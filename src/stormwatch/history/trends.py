"""Nightly trends for the fleet index: per audit night, jobs, verdict counts and the p95 job peak.

A night is the UTC date of the audit time (the history partition). Each job counts once per night
(its latest audit that night); its peak is the maximum over its ranks of the peak reserved bytes.
Linear in rows (one group-by over rows, the rest over runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.history.frame import audit_runs, latest_per
from stormwatch.outputs.verdict import VerdictStatus


@dataclass(frozen=True)
class NightTrend:
    """One night: ``jobs`` audited, ``verdicts`` (every VerdictStatus value, zeros included, plus
    ``"unknown"`` when some job had none), ``peak_reserved_p95_bytes`` (None when no job had a peak)."""

    night: date
    jobs: int
    verdicts: dict[str, int] = field(hash=False)
    peak_reserved_p95_bytes: int | None

    def as_json(self) -> dict[str, Any]:
        return {"night": self.night.isoformat(), "jobs": self.jobs, "verdicts": dict(self.verdicts),
                "peak_reserved_p95_bytes": self.peak_reserved_p95_bytes}


def nightly_trends(history: pd.DataFrame) -> tuple[NightTrend, ...]:
    """One :class:`NightTrend` per night present in ``history``, oldest first."""
    runs = audit_runs(history)
    if runs.empty:
        return ()
    runs["night"] = runs["audit_time"].dt.tz_convert("UTC").dt.date
    runs = latest_per(runs, ["night", "job_id"])
    runs["verdict"] = runs["verdict"].fillna("unknown")
    counts = runs.groupby(["night", "verdict"]).size()
    out = []
    for night, jobs in runs.groupby("night", sort=True):
        verdicts = {status.value: int(counts.get((night, status.value), 0)) for status in VerdictStatus}
        if (night, "unknown") in counts.index:
            verdicts["unknown"] = int(counts[(night, "unknown")])
        peaks = jobs["peak_reserved_bytes"].dropna().to_numpy(dtype=float)
        p95 = int(round(float(np.percentile(peaks, 95)))) if len(peaks) else None
        out.append(NightTrend(night=night, jobs=len(jobs), verdicts=verdicts, peak_reserved_p95_bytes=p95))
    return tuple(out)
