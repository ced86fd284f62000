"""Jobs for the job page's story (issue 28), written by stormlog's own writer code (:mod:`tests.builders`)
and diagnosed as the pipeline does: a rank near its device's capacity beside one far below it, a CPU
job, a job with a malformed line, a one-rank job and 64 ranks for the page-size budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tests import builders as b
from tests.reports.builders import large_document

NEAR_BASE_GIB, FAR_BASE_GIB = 70, 20
OOM_AT_S = 5.5  # the last sample of a 12-sample ramp: the OOM marker sits at the plot's right edge


def write_near_capacity_job(root: Path) -> None:
    """Two ranks on 80 GiB devices: rank 0 climbs from 70 GiB to about 77 GiB and runs out of memory at
    its last sample; rank 1 stays near 20 GiB (far below its capacity)."""
    b.write_multi_rank_job(
        root, world_size=2, job_id="near-capacity",
        samples=lambda rank: b.ramp(12, base=(NEAR_BASE_GIB if rank == 0 else FAR_BASE_GIB) * b.GIB, step=600 * b.MIB),
        alerts_of=lambda rank: (b.oom_alert(OOM_AT_S),) if rank == 0 else ())


def write_cpu_job(root: Path) -> None:
    """Two ranks of stormlog's CPU tracker (device id -1: no device, no allocator pool, no total)."""
    b.write_multi_rank_job(root, world_size=2, fmt="csv", job_id="cpu-job")


def write_job_with_bad_line(root: Path) -> Path:
    """Two ranks; rank 1's file ends with a malformed line (the loader skips it, with file and line).
    Returns that file."""
    paths = b.write_multi_rank_job(root, world_size=2, job_id="bad-line")
    with paths[1].open("a", encoding="utf-8") as stream:
        stream.write('{"event_type": "sample", \n')
    return paths[1]


def write_single_rank_job(root: Path) -> None:
    b.write_multi_rank_job(root, world_size=1, job_id="one-rank", alerts=(b.oom_alert(4.0),))


def with_fleet_ranks(document: dict[str, Any], *, capacity_bytes: int = 80 * b.GIB) -> dict[str, Any]:
    """``document`` (a model.json) with a ``fleet`` member holding each present rank's facts: a host, a
    GPU and ``capacity_bytes`` (the page-size budget's job: its charts draw capacity lines too)."""
    model = document["model"]
    ranks = []
    for rank in model["present_ranks"]:
        series = model["per_rank_timelines"][str(rank)]
        reserved = np.asarray(series["reserved"], dtype=np.int64)
        used = reserved + np.asarray(series["gap"], dtype=np.int64)
        ranks.append({"rank": rank, "host": f"gpu-node-{rank // 8:02d}", "device_id": rank % 8,
                      "samples": len(reserved), "peak_allocated_bytes": int(np.max(series["allocated"])),
                      "peak_reserved_bytes": int(reserved.max()), "peak_device_used_bytes": int(used.max()),
                      "device_total_bytes": capacity_bytes, "hidden_gap_peak_bytes": int(np.abs(series["gap"]).max())})
    coverage = {"expected_ranks": len(ranks), "present_ranks": len(ranks), "missing_ranks": [],
                "ranks_present_percent": 100.0, "sessions": 1, "sessions_without_stop": 0,
                "session_ids_without_stop": [], "schema_versions": {"3": 1}, "collectors": {"stormlog": 1},
                "load_warnings": 0}
    return {**document, "fleet": {"ranks": ranks, "outlier_ranks": [], "coverage": coverage, "regression": None}}


def sixty_four_rank_document(*, samples: int = 20_000) -> dict[str, Any]:
    """A 64-rank model.json (spike on rank 5, drift on rank 11, 100 phases, alerts and an OOM per rank)
    with fleet facts, so every chart draws its capacity: the job the 2 MB page budget is about."""
    return with_fleet_ranks(large_document(ranks=64, samples=samples))
