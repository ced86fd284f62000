"""Fleet-comparison members (issue 16) for the report tests: fleet.json's ``trends``,
``regressions``, ``suspect_hosts``, ``coverage`` and per-job ``outlier_ranks`` / ``coverage``,
and model.json's ``fleet`` member, in the shapes of the data contracts (bytes as ints,
``change_pct`` in percent, ``rate`` as a fraction, ISO 8601 audit times).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests import builders as b

NIGHTS = tuple(f"2026-11-{day:02d}" for day in range(1, 15))


def make_trends(nights: Sequence[str] = NIGHTS) -> list[dict[str, Any]]:
    """Per-night counts; the p95 grows 1 GiB a night and is null on the third night."""
    trends = []
    for index, night in enumerate(nights):
        counts = {"critical": index % 3, "warning": 2 + index % 2, "info": 1, "clean": 10 + index, "empty": index % 2}
        trends.append({"night": night, "jobs": sum(counts.values()), **counts,
                       "p95_peak_reserved_bytes": None if index == 2 else (30 + index) * b.GIB})
    return trends


def make_coverage(*, jobs: int | None = 120, expected: int = 960, present: int = 936) -> dict[str, Any]:
    """A fleet's coverage (``jobs`` set) or a job's (``jobs=None``)."""
    coverage = {"expected_ranks": expected, "present_ranks": present, "percent": 100 * present / expected,
                "sessions": 944,
                "sessions_without_stop": 7, "schema_versions": {"3": 900, "4": 44},
                "collectors": {"stormlog": 930, "nvml-sidecar": 14}, "load_warnings": 3}
    return {"jobs": jobs, **coverage} if jobs is not None else coverage


def make_outlier(*, rank: int = 3, metric: str = "peak_reserved_bytes", value: int = 40 * b.GIB,
                 median: int = 30 * b.GIB, robust_z: float = 6.2) -> dict[str, Any]:
    return {"rank": rank, "metric": metric, "value_bytes": value, "median_bytes": median, "robust_z": robust_z}


def make_regression(*, job_id: str = "job-1", job_name: str = "llama-pretrain",
                    metric: str = "peak_reserved_bytes", value: int = 41 * b.GIB, baseline: int = 35 * b.GIB,
                    change_pct: float = 17.1, runs: int = 5) -> dict[str, Any]:
    return {"job_id": job_id, "job_name": job_name, "metric": metric, "value_bytes": value,
            "baseline_bytes": baseline, "change_pct": change_pct, "baseline_runs": runs}


def make_suspect(*, host: str = "node-17", device_id: int | str = 3, jobs: int = 12, anomalous: int = 6,
                 fleet_rate: float = 0.08) -> dict[str, Any]:
    return {"host": host, "device_id": device_id, "jobs": jobs, "anomalous_jobs": anomalous,
            "rate": anomalous / jobs, "fleet_rate": fleet_rate}


def with_fleet_intel(fleet: Mapping[str, Any], *, regressions: Sequence[Mapping[str, Any]] | None = None,
                     suspects: Sequence[Mapping[str, Any]] | None = None,
                     trends: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """``fleet`` (a :func:`~tests.reports.builders.make_fleet` document) with every issue-16 member."""
    return {**fleet, "trends": list(trends if trends is not None else make_trends()),
            "regressions": [dict(item) for item in (regressions if regressions is not None else [make_regression()])],
            "suspect_hosts": [dict(item) for item in (suspects if suspects is not None else [make_suspect()])],
            "coverage": make_coverage(jobs=len(fleet.get("jobs", ())))}


def earlier_runs(values_gib: Sequence[float]) -> list[dict[str, Any]]:
    """Earlier runs a night apart (newest last), ``values_gib`` in GiB."""
    return [{"audit_time": f"2026-11-{day + 1:02d}T02:00:00+00:00", "value_bytes": int(value * b.GIB)}
            for day, value in enumerate(values_gib)]


def make_job_fleet(document: Mapping[str, Any], *, host: str = "node-{rank}",
                   outliers: Sequence[Mapping[str, Any]] | None = None,
                   regression: Mapping[str, Any] | None | str = "regression") -> dict[str, Any]:
    """``document`` (a model.json) with a ``fleet`` member: a ``fleet.ranks`` entry per present rank on
    ``host`` (formatted with the rank), rank 1 an outlier unless ``outliers`` says otherwise, and a
    comparison: ``"regression"`` (peak reserved up 17 %, gap peak within), ``"no_baseline"`` (two
    earlier runs), a mapping as given, or None."""
    model = document.get("model", {})
    present = [rank for rank in model.get("present_ranks", [])]
    ranks = [{"rank": rank, "host": host.format(rank=rank), "device_id": rank % 8, "samples": 100,
              "peak_allocated_bytes": (20 + rank) * b.GIB, "peak_reserved_bytes": (30 + rank) * b.GIB,
              "peak_device_used_bytes": (31 + rank) * b.GIB, "device_total_bytes": 80 * b.GIB,
              "hidden_gap_peak_bytes": 512 * b.MIB} for rank in present]
    if regression == "regression":
        regression = {"status": "regression", "job_name": "llama-pretrain", "world_size": len(present), "metrics": [
            {"metric": "peak_reserved_bytes", "value_bytes": 41 * b.GIB, "baseline_bytes": 35 * b.GIB,
             "change_pct": 17.1, "baseline_runs": 5, "status": "regression",
             "earlier": earlier_runs([34, 35, 35.5, 34.8, 35.2])},
            {"metric": "hidden_gap_peak_bytes", "value_bytes": 520 * b.MIB, "baseline_bytes": 512 * b.MIB,
             "change_pct": 1.6, "baseline_runs": 5, "status": "ok",
             "earlier": earlier_runs([0.5, 0.5, 0.49, 0.51, 0.5])},
        ]}
    elif regression == "no_baseline":
        regression = {"status": "no_baseline", "job_name": "llama-pretrain", "world_size": len(present), "metrics": [
            {"metric": "peak_reserved_bytes", "value_bytes": 41 * b.GIB, "baseline_bytes": None, "change_pct": None,
             "baseline_runs": 0, "status": "no_baseline", "earlier": earlier_runs([34, 35])}]}
    return {**document, "fleet": {
        "ranks": ranks,
        "outlier_ranks": [dict(item) for item in (outliers if outliers is not None else [make_outlier(rank=1)])],
        "coverage": make_coverage(jobs=None, expected=len(model.get("expected_ranks", [])) or 1,
                                  present=len(present)),
        "regression": dict(regression) if isinstance(regression, Mapping) else None,
    }}
