"""Jobs grouped into batches by bytes: one Prefect task run per batch, not per job.

A task run costs the orchestrator the same whatever it does (see bench/README.md,
fleet_bench.py), so an audit of thousands of small jobs spends its time on bookkeeping
unless they share runs;
a batch holds jobs up to a byte budget, so task runs grow with the data. A job
over the budget runs alone. Batches are filled largest job first, so the long
ones start early and the small ones fill in behind them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from stormwatch.tasks.storage.inventory import JobInputs

MIB = 1 << 20


@dataclass(frozen=True)
class BatchSizing:
    """Bounds of a batch: at most ``max_bytes`` of inputs (unless one job is larger) and
    ``max_jobs`` jobs. A small audit is cut into ``spread`` batches per parallel worker
    (none below ``min_bytes``), so every worker has work and progress shows."""

    max_bytes: int = 256 * MIB
    min_bytes: int = 8 * MIB
    max_jobs: int = 500
    spread: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.min_bytes <= self.max_bytes:
            raise ValueError(f"batch bytes need 1 <= min ({self.min_bytes}) <= max ({self.max_bytes})")
        if self.max_jobs < 1 or self.spread < 1:
            raise ValueError("a batch holds at least one job, and spread is at least 1")

    def budget_bytes(self, total_bytes: int, *, parallelism: int) -> int:
        """The byte budget of each batch for an audit of ``total_bytes`` on ``parallelism`` workers."""
        share = math.ceil(total_bytes / (max(1, parallelism) * self.spread))
        return min(self.max_bytes, max(self.min_bytes, share))


@dataclass(frozen=True)
class Batch:
    """Jobs diagnosed by one task run; ``number`` counts from 1 in the order batches start;
    ``repairs``: those of its jobs whose outputs are only rewritten (see ``AuditPlan.repairs``)."""

    number: int
    jobs: tuple[JobInputs, ...]
    repairs: Mapping[str, str] = field(default_factory=dict)

    @property
    def size_bytes(self) -> int:
        return sum(job.size_bytes for job in self.jobs)

    @property
    def label(self) -> str:
        return f"{self.number}-{len(self.jobs)}-jobs"


def batch_by_bytes(jobs: Iterable[JobInputs], *, sizing: BatchSizing, parallelism: int,
                   repairs: Mapping[str, str] | None = None) -> list[Batch]:
    """Every job in exactly one batch; each batch within the budget unless it holds one job; each
    batch carries the ``repairs`` of its own jobs."""
    ordered = sorted(jobs, key=lambda job: (-job.size_bytes, job.job_id))
    budget = sizing.budget_bytes(sum(job.size_bytes for job in ordered), parallelism=parallelism)
    groups: list[list[JobInputs]] = []
    filled = 0
    for job in ordered:
        if not groups or filled + job.size_bytes > budget or len(groups[-1]) >= sizing.max_jobs:
            groups.append([])
            filled = 0
        groups[-1].append(job)
        filled += job.size_bytes
    repairs = repairs or {}
    return [Batch(number, tuple(group), {job.job_id: repairs[job.job_id] for job in group if job.job_id in repairs})
            for number, group in enumerate(groups, start=1)]
