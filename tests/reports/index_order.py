"""The fleet index table's default order (issue 28), spelled out independently of reports/fleetview.py:
most severe first (critical, warning, failed, refused, info, clean, empty), newest first within a
severity (``diagnosed_at``, else ``committed_at``), then by job id."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

LEVELS = {"critical": 6, "warning": 5, "failed": 4, "refused": 3, "info": 2, "clean": 1, "empty": 0}


def level(job: Mapping[str, Any]) -> int:
    verdict = job.get("verdict")
    return LEVELS[verdict] if verdict in LEVELS else LEVELS.get(job.get("status"), -1)  # type: ignore[arg-type]


def default_order(jobs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``jobs`` (fleet.json rows) in the order the index's table first shows them."""
    ordered = sorted(jobs, key=lambda job: str(job["job_id"]))
    ordered.sort(key=lambda job: (level(job), job.get("diagnosed_at") or job.get("committed_at") or ""), reverse=True)
    return ordered
