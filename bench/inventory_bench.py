"""Inventory benchmark: ``LocalStorage.take_inventory`` over a generated root of N job folders.

    python bench/inventory_bench.py [--jobs 3000,30000] [--files 2] [--reports] [--repeat 5]

Each job folder holds ``--files`` small rank files (two folders deep for every other job, as
rotated sinks are); with ``--reports`` every job also has its model.json and report.html, as after
an audit. Prints, per size, the best of ``--repeat`` walks of each part (listing the jobs folder,
every job's files and stats, every job's report files) and of the whole inventory, in seconds and
in microseconds per job; then the sweep of killed writes' temporary files walking every report
folder ("all") and walking only those the inventory did not look into ("rest", as the audit
does). The unchanged audit lists every stored job each night, so this is the part of it that
grows with what is stored (issue 26). Figures in bench/README.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from stormwatch.tasks.storage.local import LocalStorage
from stormwatch.tasks.storage.protocol import StorageSettings


def build_root(root: Path, jobs: int, files: int, reports: bool) -> None:
    for number in range(jobs):
        job = root / "jobs" / f"run-{number:06d}"
        folder = job / "sink" / "rotated" if number % 2 else job
        folder.mkdir(parents=True)
        for rank in range(files):
            (folder / f"rank_{rank}.jsonl").write_bytes(b'{"x": 1}\n' * (rank + 1))
        if reports:
            out = root / "reports" / job.name
            out.mkdir(parents=True)
            (out / "model.json").write_bytes(b"{}")
            (out / "report.html").write_bytes(b"<html></html>")


def best(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(root: Path, jobs: int, files: int, repeat: int) -> str:
    storage = LocalStorage(StorageSettings(uri=str(root)))
    listing = storage.list_jobs()
    assert len(listing.job_ids) == jobs
    jobs_dir = storage.jobs_dir.resolve()
    listed = best(storage.list_jobs, repeat)
    walked = best(lambda: [storage._entries(jobs_dir / job) for job in listing.job_ids], repeat)
    reported = best(lambda: storage._report_keys(listing.job_ids), repeat)
    whole = best(storage.take_inventory, repeat)
    inventory = storage.take_inventory()
    assert sum(len(job.entries) for job in inventory.jobs) == jobs * files
    full = best(storage.sweep_temporaries, repeat)
    merged = best(lambda: storage.sweep_temporaries(looked=inventory.job_ids, found=inventory.temporaries), repeat)
    return (f"{jobs:>7} {listed:>8.3f} {walked:>8.3f} {reported:>10.3f} {whole:>12.3f} {whole / jobs * 1e6:>8.0f} "
            f"{full:>12.3f} {merged:>13.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="3000,30000", help="comma list of root sizes (job folders)")
    parser.add_argument("--files", type=int, default=2, help="rank files per job")
    parser.add_argument("--reports", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'jobs':>7} {'list s':>8} {'files s':>8} {'reports s':>10} {'inventory s':>12} {'us/job':>8} "
          f"{'sweep, all s':>12} {'sweep, rest s':>13}")
    for jobs in (int(item) for item in args.jobs.split(",")):
        with tempfile.TemporaryDirectory(prefix="inventory-bench-") as tmp:
            build_root(Path(tmp), jobs, args.files, args.reports)
            print(measure(Path(tmp), jobs, args.files, args.repeat), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
