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
    """A fleet's coverage (fleet.json; ``jobs=None`` leaves ``jobs`` out)."""
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


def make_job_coverage(*, expected: int, present: int, missing: Sequence[int] = ()) -> dict[str, Any]:
    """A job's ``fleet.coverage`` as the engine writes it (:meth:`stormwatch.peers.coverage.Coverage.as_dict`)."""
    return {"expected_ranks": expected, "present_ranks": present, "missing_ranks": list(missing),
            "ranks_present_percent": round(100 * present / expected, 2), "sessions": 944, "sessions_without_stop": 7,
            "session_ids_without_stop": [f"s-{index}" for index in range(7)], "schema_versions": {"3": 900, "4": 44},
            "collectors": {"stormlog": 930, "nvml-sidecar": 14}, "load_warnings": 3, "ended_abruptly": 0,
            "ended_abruptly_ranks": []}


def make_job_regression(*, job_name: str = "llama-pretrain", world_size: int = 8, metric: str = "peak_reserved_bytes",
                        value: int = 41 * b.GIB, baseline: int | None = 35 * b.GIB, change_pct: float | None = 17.1,
                        status: str = "regression", earlier_gib: Sequence[float] = (34, 35, 35.5, 34.8, 35.2),
                        runs: int | None = None) -> dict[str, Any]:
    """One metric of ``fleet.regression`` as the engine writes it (``Regression.as_json``), bytes as ints."""
    return {"job_id": "job-1", "job_name": job_name, "world_size": world_size, "metric": metric, "value_bytes": value,
            "baseline_bytes": baseline, "change_pct": change_pct,
            "baseline_runs": len(earlier_gib) if runs is None else runs, "status": status,
            "mad_bytes": None if baseline is None else b.GIB // 2,
            "earlier_bytes": [int(size * b.GIB) for size in earlier_gib]}


def make_job_fleet(document: Mapping[str, Any], *, host: str = "node-{rank}",
                   outliers: Sequence[Mapping[str, Any]] | None = None,
                   regression: Mapping[str, Any] | None | str = "regression") -> dict[str, Any]:
    """``document`` (a model.json) with a ``fleet`` member: a ``fleet.ranks`` entry per present rank on
    ``host`` (formatted with the rank), rank 1 an outlier unless ``outliers`` says otherwise, and a
    comparison: ``"regression"`` (peak reserved up 17 %, gap peak within), ``"no_baseline"`` (two
    earlier runs), a mapping as given, or None."""
    model = document["model"]
    present = list(model["present_ranks"])
    world = len(model["expected_ranks"])
    ranks = [{"rank": rank, "host": host.format(rank=rank), "device_id": rank % 8, "samples": 100,
              "peak_allocated_bytes": (20 + rank) * b.GIB, "peak_reserved_bytes": (30 + rank) * b.GIB,
              "peak_device_used_bytes": (31 + rank) * b.GIB, "device_total_bytes": 80 * b.GIB,
              "hidden_gap_peak_bytes": 512 * b.MIB} for rank in present]
    if regression == "regression":
        regression = {"status": "regression", "job_name": "llama-pretrain", "world_size": world, "metrics": [
            make_job_regression(world_size=world),
            make_job_regression(world_size=world, metric="hidden_gap_peak_bytes", value=520 * b.MIB,
                                baseline=512 * b.MIB, change_pct=1.6, status="ok",
                                earlier_gib=(0.5, 0.5, 0.49, 0.51, 0.5)),
        ]}
    elif regression == "no_baseline":
        regression = {"status": "no_baseline", "job_name": "llama-pretrain", "world_size": world, "metrics": [
            make_job_regression(world_size=world, baseline=None, change_pct=None, status="no_baseline",
                                earlier_gib=(34, 35), runs=2)]}
    return {**document, "fleet": {
        "ranks": ranks,
        "outlier_ranks": [dict(item) for item in (outliers if outliers is not None else [make_outlier(rank=1)])],
        "coverage": make_job_coverage(expected=world or 1, present=len(present), missing=model["missing_ranks"]),
        "regression": dict(regression) if isinstance(regression, Mapping) else None,
    }}
