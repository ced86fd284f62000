"""The engine pool: real worker processes, and a worker killed midway costs only its own job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stormwatch.tasks.engine_pool import EngineMode, EnginePool, EngineSettings, WorkerDied, describe_exit
from tests.tasks.crashing import exit_midway, pid_of_worker, read_size, square_or_die


def died(item: int, error: WorkerDied) -> int:
    return -1


@pytest.mark.parametrize("mode", list(EngineMode))
def test_results_come_back_in_item_order(mode: EngineMode) -> None:
    pool: EnginePool[int, int] = EnginePool(EngineSettings(mode=mode, workers=2))
    try:
        assert pool.map(square_or_die, list(range(12)), -1, on_death=died) == [n * n for n in range(12)]
    finally:
        pool.close()


def test_processes_mode_runs_in_other_processes() -> None:
    pool: EnginePool[int, int] = EnginePool(EngineSettings(mode=EngineMode.PROCESSES, workers=2))
    try:
        pids = set(pool.map(pid_of_worker, list(range(8)), on_death=died))
    finally:
        pool.close()
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_a_job_that_kills_its_worker_fails_alone_and_the_pool_goes_on() -> None:
    pool: EnginePool[int, int] = EnginePool(EngineSettings(mode=EngineMode.PROCESSES, workers=2))
    deaths: list[tuple[int, str]] = []

    def record(item: int, error: WorkerDied) -> int:
        deaths.append((item, str(error)))
        return -1

    try:
        results = pool.map(square_or_die, list(range(10)), 4, on_death=record)
        again = pool.map(square_or_die, [2, 3], -1, on_death=record)  # a fresh pool replaced the broken one
    finally:
        pool.close()
    assert results == [n * n if n != 4 else -1 for n in range(10)]
    assert deaths == [(4, "the worker process diagnosing this job was killed by SIGKILL (out of memory?)")]
    assert again == [4, 9]


def test_a_worker_that_exits_is_described_by_its_code() -> None:
    pool: EnginePool[int, int] = EnginePool(EngineSettings(mode=EngineMode.PROCESSES, workers=1))
    messages: list[str] = []
    try:
        pool.map(exit_midway, [1], on_death=lambda item, error: messages.append(str(error)) or 0)
    finally:
        pool.close()
    assert messages == ["the worker process diagnosing this job exited with code 3"]


def test_describe_exit() -> None:
    assert describe_exit(-15) == "was killed by SIGTERM"
    assert describe_exit(None) == "ended without an exit status"


def test_settings_refuse_zero_workers() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EngineSettings(workers=0)
    assert EngineSettings(mode=EngineMode.INLINE, workers=8).parallelism == 1


def timed_out(item: str, error: WorkerDied) -> str:
    return str(error)


def test_a_job_reading_a_fifo_is_killed_at_its_timeout_and_the_others_complete(tmp_path: Path) -> None:
    fifo = tmp_path / "rank_1.jsonl"
    os.mkfifo(fifo)  # opening it for reading blocks forever: nobody writes
    files = [tmp_path / f"{name}.jsonl" for name in ("a", "b", "c")]
    for number, path in enumerate(files):
        path.write_bytes(b"x" * (number + 1))
    items = [str(files[0]), str(fifo), str(files[1]), str(files[2])]
    pool: EnginePool[str, object] = EnginePool(EngineSettings(mode=EngineMode.PROCESSES, workers=2,
                                                              job_timeout_s=2))
    try:
        results = pool.map(read_size, items, on_death=timed_out)
        again = pool.map(read_size, [str(files[2])], on_death=timed_out)  # a fresh pool replaced the killed one
    finally:
        pool.close()
    assert results == [1, "timed out after 2 s", 2, 3]
    assert again == [3]


def test_threads_abandon_a_job_past_its_timeout_and_the_pool_goes_on(tmp_path: Path) -> None:
    fifo = tmp_path / "stuck.jsonl"
    os.mkfifo(fifo)
    done = tmp_path / "done.jsonl"
    done.write_bytes(b"abc")
    pool: EnginePool[str, object] = EnginePool(EngineSettings(mode=EngineMode.THREADS, workers=1, job_timeout_s=1))
    try:
        results = pool.map(read_size, [str(fifo), str(done)], on_death=timed_out)
    finally:
        pool.close()
        with open(fifo, "wb"):  # lets the abandoned thread's open return, so the test process can exit
            pass
    assert results == ["timed out after 1 s", 3]


@pytest.mark.parametrize("timeout_s", [0, -1.0])
def test_the_job_timeout_is_positive(timeout_s: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        EngineSettings(job_timeout_s=timeout_s)
