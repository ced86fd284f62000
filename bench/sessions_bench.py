"""Sessions benchmark (issue 18): diagnosing every session of a job against loading the job once.

    python bench/sessions_bench.py [--sessions 5] [--ranks 8] [--samples 5000] [--repeat 5]
                                   [--plain] [--keep DIR]

Writes one job folder holding ``--sessions`` attempts of a ``--ranks``-rank job, each written by
bench/jobgen.py with its own seed (so its own run id, session ids and start day): stormlog forms
one rank group per attempt. Then times, best of ``--repeat`` interleaved rounds (every round runs
every side once, so all see the same load of the shared machine):

  load once        stormwatch.load_artifacts(job): parse every file, split by session, the default
                   session's markers (what a one-session diagnosis loads)
  all sessions     diagnose_job(job, --all-sessions): the same single parse, then every session's
                   markers, model, verdict, fleet facts and model.json document (one thread, the
                   default) and, for comparison, on a thread pool of one thread per core
  one session      diagnose_job(job): today's default-session diagnosis, for reference

Target: all sessions <= 1.3 x load once. ``--plain``: jobgen's default output (no memory outside
the allocator: less model work); by default ``--hidden-memory`` as model_bench uses it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]  # jobgen, load_bench; in-tree stormwatch
from jobgen import write_job  # noqa: E402
from load_bench import interleaved_best  # noqa: E402

from stormwatch.diagnose import DiagnoseOptions  # noqa: E402
from stormwatch.diagnose_sessions import diagnose_job, session_workers  # noqa: E402
from stormwatch.load.loader import load_artifacts, load_sessions  # noqa: E402

TARGET = 1.3  # diagnosing every session must take at most TARGET x loading the job once
ALL = DiagnoseOptions(all_sessions=True)


def write_sessions(root: Path, *, sessions: int, ranks: int, samples: int, hidden: bool) -> int:
    """``sessions`` jobgen jobs under ``root/attempt-N/``; the bytes written."""
    paths = []
    for seed in range(sessions):
        paths += write_job(root / f"attempt-{seed + 1}", ranks=ranks, samples=samples, seed=seed, hidden=hidden)
    return sum(path.stat().st_size for path in paths)


def _events(job: Path) -> int:
    return sum(len(part.events) for part in load_sessions([job]).groups())


def _seconds(row: tuple[float | None, int | None, str]) -> float:
    best, _, failed = row
    if best is None:
        raise SystemExit(f"a side failed: {failed}")
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plain", action="store_true", help="jobgen's default output (no hidden memory)")
    parser.add_argument("--keep", type=Path, default=None, help="write the job here and keep it")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="sessions-bench-") as temporary:
        job = (args.keep or Path(temporary)) / "job"
        started = time.perf_counter()
        size = write_sessions(job, sessions=args.sessions, ranks=args.ranks, samples=args.samples,
                              hidden=not args.plain)
        print(f"job: {args.sessions} sessions x {args.ranks} ranks x {args.samples:,} samples, "
              f"{size / 1e6:.1f} MB, {_events(job):,} events (written in {time.perf_counter() - started:.1f} s)")
        threads = session_workers(args.sessions, threads=0)
        first = diagnose_job([job], job_id="job", source_name=str(job), options=ALL)
        print(f"sessions diagnosed: {len(first.sessions)}; verdicts "
              + ", ".join(f"{a.number}:{a.verdict}" for a in first.attempts))
        rows = interleaved_best(args.repeat, {
            "load once": lambda: load_artifacts([job]),
            "all sessions": lambda: diagnose_job([job], job_id="job", source_name=str(job), options=ALL),
            f"all sessions, {threads} threads": lambda: diagnose_job([job], job_id="job", source_name=str(job),
                                                                     options=ALL, workers=threads),
            "one session": lambda: diagnose_job([job], job_id="job", source_name=str(job)),
        })
    load = _seconds(rows["load once"])
    print(f"\n{'':24}{'best s':>9}{'x load once':>14}   (best of {args.repeat}, {os.cpu_count()} cores)")
    for name in rows:
        seconds = _seconds(rows[name])
        print(f"{name:<24}{seconds:>9.3f}{seconds / load:>14.2f}")
    ratio = _seconds(rows["all sessions"]) / load
    print(f"\nall sessions / load once = {ratio:.2f} (target <= {TARGET}): {'met' if ratio <= TARGET else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
