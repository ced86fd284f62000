"""Threads or processes for the per-job engine work? Measured, side by side, in one run.

Generates a small fleet (``--jobs`` jobs of ``--ranks`` x ``--samples`` with
bench/jobgen.py), then diagnoses every job (load + model + model.json bytes)
sequentially, on a thread pool and on a process pool of ``--workers``, best of
``--repeat``. The audit flow's default task runner follows the winner.

    python bench/parallel_bench.py [--jobs 8] [--ranks 4] [--samples 5000] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormwatch.diagnose import diagnose  # noqa: E402


def diagnose_job(folder: str) -> int:
    """One job end to end, as the audit task does it minus storage; returns model.json size."""
    return len(diagnose([folder], job_id=Path(folder).name, source_name=folder).model_json())


def make_fleet(root: Path, *, jobs: int, ranks: int, samples: int) -> list[str]:
    script = Path(__file__).with_name("jobgen.py")
    folders = []
    for index in range(jobs):
        folder = root / f"job-{index}"
        if not folder.exists():
            command = [sys.executable, str(script), str(folder), "--ranks", str(ranks), "--samples", str(samples),
                       "--seed", str(index), "--hidden-memory", "--no-validate"]
            subprocess.run(command, check=True, capture_output=True)
        folders.append(str(folder))
    return folders


def timed(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def on_pool(make_pool: Callable[[], Executor], folders: Sequence[str]) -> Callable[[], object]:
    def run() -> object:
        with make_pool() as pool:
            return list(pool.map(diagnose_job, folders))

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "stormwatch-parallel-bench"))
    args = parser.parse_args(argv)

    folders = make_fleet(Path(args.dir), jobs=args.jobs, ranks=args.ranks, samples=args.samples)
    size_mb = sum(p.stat().st_size for f in folders for p in Path(f).rglob("*") if p.is_file()) / 1e6
    print(f"fleet: {args.jobs} jobs x {args.ranks} ranks x {args.samples:,} samples, {size_mb:.1f} MB; "
          f"{args.workers} workers on {os.cpu_count()} cores; best of {args.repeat}")
    sequential = timed(lambda: [diagnose_job(f) for f in folders], args.repeat)
    threads = timed(on_pool(lambda: ThreadPoolExecutor(args.workers), folders), args.repeat)
    processes = timed(on_pool(lambda: ProcessPoolExecutor(args.workers), folders), args.repeat)
    for name, seconds in (("sequential", sequential), ("threads", threads), ("processes", processes)):
        print(f"  {name:<11} {seconds:7.2f} s   {sequential / seconds:5.2f}x sequential")
    winner = "threads" if threads <= processes else "processes"
    print(f"winner: {winner} ({min(threads, processes):.2f} s vs {max(threads, processes):.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
