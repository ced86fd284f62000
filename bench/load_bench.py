"""Load benchmark: stormlog reference vs stormwatch vs the raw JSON-parse floor.

    python bench/load_bench.py [--job DIR] [--ranks 8] [--samples 20000] [--seed 0]
                               [--repeat 5] [--reference-repeat 1] [--skip-reference]

Generates an 8x20k job with bench/jobgen.py in a temp dir (or reuses ``--job DIR``;
an empty/missing DIR is generated into and kept), then times, best of N rounds (each
round runs every in-process candidate once, so all see the same load of a shared machine):
  reference   stormlog.tui.distributed_diagnostics.load_distributed_artifacts on every
              rank file, in a fresh subprocess (only the call is timed)
  stormwatch  stormwatch.load_artifacts([job_dir]) and load_artifacts(rank files)
  floor       min(orjson.loads per line, pyarrow.json.read_json), bytes already in memory
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]  # jobgen; in-tree stormwatch
from jobgen import write_job  # noqa: E402

TARGET = 1.5  # stormwatch load time must be <= TARGET x floor

_REFERENCE_SCRIPT = """
import json, sys, time
from pathlib import Path
from stormlog.tui.distributed_diagnostics import load_distributed_artifacts
paths = [Path(p) for p in sys.argv[1:]]
t0 = time.perf_counter()
result = load_distributed_artifacts(paths)
elapsed = time.perf_counter() - t0
print(json.dumps({"seconds": elapsed, "events": len(result.events),
                  "sessions": len(result.sessions), "warnings": len(result.warnings)}))
"""


def interleaved_best(repeat: int, candidates: dict[str, Callable[[], Any]]) -> dict[str, Row]:
    """Best wall time of each candidate over ``repeat`` rounds, and the event count of its last call.

    Every round calls every candidate once, in turn, so that all of them see the same
    load of a shared machine (GC runs outside the timing). A candidate that raises is
    reported as failed and left out of later rounds.
    """
    best: dict[str, float] = {}
    counts: dict[str, int | None] = {}
    failed: dict[str, str] = {}
    for _ in range(max(repeat, 1)):
        for name, fn in candidates.items():
            if name in failed:
                continue
            gc.collect()
            t0 = time.perf_counter()
            try:
                result = fn()
            except Exception as exc:  # pyarrow missing, its schema inference gave up, a loader bug
                failed[name] = f"failed ({type(exc).__name__}: {exc})"
                continue
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
            counts[name] = result if isinstance(result, int) else count_events(result)
            del result
    return {
        name: (None, None, failed[name]) if name in failed else (best[name], counts[name], "") for name in candidates
    }


def count_events(result: Any) -> int | None:
    """Event count of a stormwatch result, whatever container it turns out to be."""
    for attr in ("events", "table", "frame", "df"):
        inner = getattr(result, attr, None)
        if inner is not None and not callable(inner):
            result = inner
            break
    for attr in ("num_rows", "n_events", "event_count"):
        value = getattr(result, attr, None)
        if isinstance(value, int):
            return value
    try:
        return len(result)
    except TypeError:
        return None


def rank_files(job: Path) -> list[Path]:
    files = list(job.glob("rank_*/telemetry.jsonl"))
    return sorted(files, key=lambda p: int(p.parent.name.removeprefix("rank_")))


Row = tuple[float | None, int | None, str]  # (best seconds, events, note)


def floor_candidates(blobs: list[bytes]) -> dict[str, Callable[[], Any]]:
    """The raw-parse floor: every record parsed, bytes already in memory."""

    def orjson_all() -> int:
        loads = orjson.loads
        return sum(len([loads(line) for line in blob.splitlines()]) for blob in blobs)

    def arrow_all() -> int:  # imports happen before the timed call (see below)
        import pyarrow as pa
        import pyarrow.json as pj

        return sum(pj.read_json(pa.py_buffer(blob)).num_rows for blob in blobs)

    with contextlib.suppress(ImportError):
        import pyarrow.json  # noqa: F401  (warm import outside the timing)
    return {"raw parse: orjson.loads/line": orjson_all, "raw parse: pyarrow read_json": arrow_all}


def stormwatch_candidates(job: Path, files: list[Path]) -> tuple[dict[str, Callable[[], Any]], dict[str, Row]]:
    """stormwatch on the job folder and on the rank files; or why it cannot run."""
    labels = ("stormwatch [job dir]", "stormwatch [rank files]")
    try:
        from stormwatch import load_artifacts
    except Exception as exc:
        return {}, dict.fromkeys(labels, (None, None, f"not available ({type(exc).__name__}: {exc})"))

    def loader(paths: list[Path]) -> Callable[[], Any]:
        return lambda: load_artifacts(paths)

    return {labels[0]: loader([job]), labels[1]: loader(list(files))}, {}


def run_reference(files: list[Path], repeat: int) -> Row:
    runs = []
    for _ in range(max(repeat, 1)):
        cmd = [sys.executable, "-c", _REFERENCE_SCRIPT, *map(str, files)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            return (None, None, f"failed (exit {proc.returncode}): {tail[0]}")
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda run: run["seconds"])
    return (best["seconds"], best["events"], "subprocess, load call only")


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.0f} ms"


def fmt_n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", type=Path, help="reuse (or generate into) this job folder")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=20_000, help="sample events per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5, help="rounds (best of N) for floor/stormwatch")
    parser.add_argument("--reference-repeat", type=int, default=1, help="best-of-N, reference")
    parser.add_argument("--skip-reference", action="store_true", help="skip stormlog (~10-25 s)")
    args = parser.parse_args(argv)

    tmp = None
    job = args.job
    if job is None:
        tmp = tempfile.TemporaryDirectory(prefix="stormwatch-bench-")
        job = Path(tmp.name) / "job"
    job = job.resolve()
    try:
        files = rank_files(job)
        if files:
            print(f"job: {job} (reused, {len(files)} rank files)")
        else:
            t0 = time.perf_counter()
            files = write_job(job, ranks=args.ranks, samples=args.samples, seed=args.seed)
            took = time.perf_counter() - t0
            print(f"job: {job} (generated {args.ranks}x{args.samples:,} in {took:.1f} s)")
        return bench(job, files, args)
    finally:
        if tmp is not None:
            tmp.cleanup()


def bench(job: Path, files: list[Path], args: argparse.Namespace) -> int:
    blobs = [path.read_bytes() for path in files]
    size_mb = sum(len(blob) for blob in blobs) / 1e6
    lines = sum(blob.count(b"\n") for blob in blobs)
    print(f"input: {len(files)} files, {size_mb:.1f} MB, {lines:,} records")
    print(f"timing: best of {args.repeat} interleaved rounds, reference best of {args.reference_repeat}\n")

    floors = floor_candidates(blobs)
    loaders, unavailable = stormwatch_candidates(job, files)
    timed = interleaved_best(args.repeat, {**loaders, **floors})
    floor = {name: timed[name] for name in floors}
    sw = {**unavailable, **{name: (*timed[name][:2], timed[name][2] or "in-process") for name in loaders}}
    ref_label = "reference [rank files]"
    skipped: Row = (None, None, "skipped (--skip-reference)")
    rows = {
        ref_label: skipped if args.skip_reference else run_reference(files, args.reference_repeat)
    }
    rows.update(sw)
    rows.update(floor)

    measured = {name: seconds for name, (seconds, _, _) in floor.items() if seconds is not None}
    if not measured:
        print("no floor could be measured")
        return 1
    floor_label = min(measured, key=measured.__getitem__)
    floor_s, floor_n = measured[floor_label], floor[floor_label][1]
    rows[floor_label] = (floor_s, floor_n, "<- floor")
    print(f"{'loader':<34}{'wall':>10}{'MB/s':>9}{'events':>11}{'x floor':>9}  note")
    print("-" * 86)
    for name, (seconds, events, note) in rows.items():
        rate = f"{size_mb / seconds:,.0f}" if seconds else "-"
        ratio = f"{seconds / floor_s:.2f}x" if seconds else "-"
        print(f"{name:<34}{fmt_s(seconds):>10}{rate:>9}{fmt_n(events):>11}{ratio:>9}  {note}")

    ref_s, sw_s = rows[ref_label][0], sw[next(iter(sw))][0]
    floor_name = floor_label.removeprefix("raw parse: ")
    print(f"\nfloor ({floor_name}, bytes in memory): {fmt_s(floor_s)} for {size_mb:.1f} MB")
    for name, (seconds, _, _) in sw.items():
        ratio = f"{seconds / floor_s:.2f}x" if seconds else "n/a (not measured)"
        print(f"{name.replace('stormwatch', 'stormwatch / floor'):<42}{ratio}  (target <= {TARGET}x)")
    speedup = f"{ref_s / sw_s:.1f}x" if ref_s and sw_s else "n/a"
    print(f"reference / stormwatch: {speedup}")

    counts = {name: events for name, (_, events, _) in rows.items() if events is not None}
    agree = len(set(counts.values())) <= 1
    listing = ", ".join(f"{name}={n:,}" for name, n in counts.items())
    print(f"event-count check: {'AGREE' if agree else 'MISMATCH'} ({listing})")

    met = agree and all(seconds is not None and seconds <= TARGET * floor_s for seconds, _, _ in sw.values())
    print(f"target load <= {TARGET}x floor (job dir and rank files): {'MET' if met else 'NOT MET'}")
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
