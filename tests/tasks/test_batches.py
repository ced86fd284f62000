"""Batches by bytes: every job once, within the budget unless alone, largest first."""

from __future__ import annotations

import pytest

from stormwatch.load.tree import Entry
from stormwatch.tasks.batches import MIB, BatchSizing, batch_by_bytes
from stormwatch.tasks.storage.inventory import JobInputs


def make_job(job_id: str, size_bytes: int) -> JobInputs:
    return JobInputs(job_id, (Entry("rank_0/events.jsonl", size_bytes, "v"),))


SIZING = BatchSizing(max_bytes=10 * MIB, min_bytes=1 * MIB, max_jobs=3, spread=1)


@pytest.mark.parametrize(
    ("sizes_mib", "parallelism", "expected"),
    [
        ([], 2, []),
        ([1], 2, [["j0"]]),
        # total 20 MiB on 2 workers: a 10 MiB budget; the 12 MiB job runs alone
        ([12, 3, 3, 2], 2, [["j0"], ["j1", "j2", "j3"]]),
        # at most three jobs a batch
        ([1, 1, 1, 1, 1], 1, [["j0", "j1", "j2"], ["j3", "j4"]]),
        # a small audit spreads over the workers, no batch under min_bytes
        ([2, 2, 2, 2], 4, [["j0"], ["j1"], ["j2"], ["j3"]]),
    ],
)
def test_batches_hold_every_job_once(sizes_mib: list[int], parallelism: int, expected: list[list[str]]) -> None:
    jobs = [make_job(f"j{index}", size * MIB) for index, size in enumerate(sizes_mib)]
    batches = batch_by_bytes(jobs, sizing=SIZING, parallelism=parallelism)
    assert [[job.job_id for job in batch.jobs] for batch in batches] == expected
    assert [batch.number for batch in batches] == list(range(1, len(expected) + 1))


def test_task_runs_grow_with_bytes_not_with_jobs() -> None:
    sizing = BatchSizing()
    tiny = [make_job(f"tiny-{index:05d}", 20_000) for index in range(12_000)]
    batches = batch_by_bytes(tiny, sizing=sizing, parallelism=2)
    assert sum(len(batch.jobs) for batch in batches) == 12_000
    assert len(batches) == 24  # 500 jobs a batch, not 12,000 task runs
    big = [make_job(f"big-{index}", 300 * MIB) for index in range(3)]
    assert [len(batch.jobs) for batch in batch_by_bytes(big, sizing=sizing, parallelism=2)] == [1, 1, 1]


def test_each_batch_carries_the_repairs_of_its_own_jobs() -> None:
    jobs = [make_job(f"j{index}", size * MIB) for index, size in enumerate([12, 3, 3, 2])]
    repairs = {"j0": "history/a.parquet", "j2": "history/b.parquet", "elsewhere": "history/c.parquet"}
    batches = batch_by_bytes(jobs, sizing=SIZING, parallelism=2, repairs=repairs)
    assert [dict(batch.repairs) for batch in batches] == [{"j0": "history/a.parquet"}, {"j2": "history/b.parquet"}]


def test_sizing_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="min"):
        BatchSizing(max_bytes=1, min_bytes=2)
    with pytest.raises(ValueError, match="at least one job"):
        BatchSizing(max_jobs=0)
