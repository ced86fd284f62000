"""Model benchmark: stormlog reference vs stormwatch load+build, the raw-parse floor, peak memory, scaling.

    python bench/model_bench.py [--job DIR] [--ranks 8] [--samples 20000] [--seed 0] [--repeat 3]
                                [--skip-reference] [--skip-memory] [--skip-scaling]
                                [--scaling 10000,30000,100000,300000,1000000] [--reference-scaling 2]

Works on a ``jobgen.py --hidden-memory`` job (8 ranks x 20k samples by default), generated in a
temp dir or into/reused from ``--job DIR``, so that every sample's hidden gap is "significant"
and the reference's collective attribution and gap analysis really run. Prints, in one run:

  time     reference   stormlog load_distributed_artifacts(rank files) + build_distributed_model,
                       in a fresh subprocess (~90-150 s; ``--skip-reference``)
           stormwatch  load_artifacts([job]) + build_model(events) as `diagnose` calls it,
                       in-process, best of --repeat
           floor       min(orjson.loads per line, pyarrow.json.read_json), bytes in memory (load_bench)
                       stormwatch and the floor take turns in every round (load_bench's
                       interleaving), so a busy spell of the shared machine slows both alike
  memory   each side in its own fresh subprocess, after its imports: the resident-set high-water
           mark (VmHWM, reset via /proc/self/clear_refs; else ru_maxrss) minus the RSS then; for
           stormwatch also Arrow's pool peak and, in a third process, the tracemalloc peak; load and
           build are reported separately
  scaling  stormwatch load+build over 8-rank jobs of 10k..1M events (time, us/event, peak RSS),
           and the reference at the smallest sizes
  check    the two models' rows and indicators compared field by field (details text excluded)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]  # jobgen, load_bench; in-tree stormwatch
from jobgen import HIDDEN_SAMPLE_META, write_job  # noqa: E402
from load_bench import floor_candidates, fmt_s, interleaved_best, rank_files  # noqa: E402


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls and the last result (GC outside the timing)."""
    best, result = float("inf"), None
    for _ in range(max(repeat, 1)):
        result = None
        gc.collect()
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


SPEEDUP_TARGET = 80.0  # reference / stormwatch, load + build
FLOOR_TARGET = 1.5  # stormwatch load + build <= FLOOR_TARGET x raw-parse floor
LINEAR_EXPONENT_MAX = 1.15  # time ~ events**k, fitted over the scaling sizes >= FIT_MIN_EVENTS
FIT_MIN_EVENTS = 100_000  # below this, fixed costs (thread pool, small frames) dominate
MIB = 1024**2

# Run in every measuring subprocess right after its imports: the memory baseline, and
# _phase_done(name), which records the RSS high-water mark since the previous phase (minus the
# RSS after imports) and resets it (VmHWM via /proc/self/clear_refs; with the ru_maxrss
# fallback the marks are cumulative).
_MEMORY_PRELUDE = r"""
import resource

def _status_kib(field):
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None

def _reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return "VmHWM"
    except OSError:
        return "ru_maxrss"

def _peak_kib(method):
    if method == "VmHWM":
        return _status_kib("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

_METHOD = _reset_peak()
_RSS0_KIB = _status_kib("VmRSS") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
_PEAKS = {}

def _phase_done(name):
    _PEAKS[name] = (_peak_kib(_METHOD) - _RSS0_KIB) * 1024
    if _METHOD == "VmHWM":
        _reset_peak()

def _memory_report():
    return {"method": _METHOD, "rss_after_imports_bytes": _RSS0_KIB * 1024, "peak_rss_delta_bytes": dict(_PEAKS)}
"""

_REFERENCE_SCRIPT = (
    """
import dataclasses, json, sys, time
from pathlib import Path
import numpy, scipy.stats
import stormlog.tui.distributed_diagnostics as dd
"""
    + _MEMORY_PRELUDE
    + """
tally = {"collective_attributions": {}, "gap_findings": {}}
_attribute, _gaps = dd.attribute_collective_memory, dd.analyze_hidden_memory_gaps

def _counting_attribute(*args, **kwargs):  # one call per build: tally what it found
    found = _attribute(*args, **kwargs)
    for item in found:
        key = f"rank {item.rank}: {item.classification}"
        tally["collective_attributions"][key] = tally["collective_attributions"].get(key, 0) + 1
    return found

def _counting_gaps(*args, **kwargs):  # one call per rank
    found = _gaps(*args, **kwargs)
    for item in found:
        key = f"{item.classification}/{item.severity}"
        tally["gap_findings"][key] = tally["gap_findings"].get(key, 0) + 1
    return found

dd.attribute_collective_memory, dd.analyze_hidden_memory_gaps = _counting_attribute, _counting_gaps
paths = [Path(p) for p in sys.argv[1:]]
t0 = time.perf_counter()
result = dd.load_distributed_artifacts(paths)
t1 = time.perf_counter()
_phase_done("load")
t1b = time.perf_counter()
model = dd.build_distributed_model(result.events)
t2 = time.perf_counter()
_phase_done("build")
print(json.dumps({
    "load_s": t1 - t0, "build_s": t2 - t1b, "seconds": t1 - t0 + t2 - t1b, "events": len(result.events),
    "memory": _memory_report(), "tally": tally,
    "rows": [dataclasses.asdict(row) for row in model.rows],
    "indicators": [dataclasses.asdict(ind) for ind in model.indicators],
    "markers": sum(len(v) for v in model.markers_by_rank.values()),
}))
"""
)

_STORMWATCH_SCRIPT = (
    """
import json, sys, time
from pathlib import Path
import numpy, pandas, pyarrow, pyarrow.compute, pyarrow.json, orjson
import stormwatch
from stormwatch import load_artifacts
from stormwatch.analysis.model import build_model
"""
    + _MEMORY_PRELUDE
    + """
use_tracemalloc = sys.argv[2] == "tracemalloc"
if use_tracemalloc:
    import tracemalloc
    tracemalloc.start()
pools = (pyarrow.system_memory_pool(), pyarrow.default_memory_pool())  # tables, then compute temporaries
out = {"arrow_backend": "+".join(p.backend_name for p in pools), "arrow_pool_peak_bytes": {},
       "tracemalloc_peak_bytes": {}}
t0 = time.perf_counter()
loaded = load_artifacts([Path(sys.argv[1])])
t1 = time.perf_counter()
_phase_done("load")
out["arrow_pool_peak_bytes"]["load"] = sum(p.max_memory() for p in pools)
if use_tracemalloc:
    out["tracemalloc_peak_bytes"]["load"] = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
t1b = time.perf_counter()
model = build_model(loaded.events, selected_ranks=None, collective_preset="medium")
t2 = time.perf_counter()
_phase_done("build")
out["arrow_pool_peak_bytes"]["build"] = sum(p.max_memory() for p in pools)
if use_tracemalloc:
    out["tracemalloc_peak_bytes"]["build"] = tracemalloc.get_traced_memory()[1]
out.update(seconds=t1 - t0 + t2 - t1b, memory=_memory_report())
print(json.dumps(out))
"""
)


def import_model() -> Callable[..., Any]:
    """``stormwatch.analysis.model.build_model``, or exit with a clear message while it does not exist."""
    try:
        from stormwatch.analysis.model import build_model
    except ImportError as exc:  # not a fallback: the bench cannot run without it
        raise SystemExit(
            f"model_bench: cannot import build_model from stormwatch.analysis.model ({exc}).\n"
            "The diagnostics model (issue 3) is not there yet; nothing to benchmark."
        ) from exc
    return build_model


def run_script(script: str, args: list[str]) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter (in-tree stormwatch first); its last stdout line is a JSON object."""
    path = os.pathsep.join(filter(None, [str(BENCH_DIR.parent), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    cmd = [sys.executable, "-c", script, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:] or ["no output"]
        raise RuntimeError(f"subprocess exit {proc.returncode}: {' | '.join(tail)}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def run_reference(files: list[Path]) -> dict[str, Any]:
    """Reference load + build on the rank files, timed and RSS-measured in one fresh process."""
    return run_script(_REFERENCE_SCRIPT, [str(p) for p in files])


def run_stormwatch_memory(job: Path, mode: str) -> dict[str, Any]:
    """stormwatch load + build in a fresh process; ``mode`` is ``rss`` or ``tracemalloc``."""
    return run_script(_STORMWATCH_SCRIPT, [str(job), mode])


def stormwatch_pipeline(job: Path, build_model: Callable[..., Any]) -> Callable[[], Any]:
    from stormwatch import load_artifacts

    def load_and_build() -> Any:
        loaded = load_artifacts([job])
        return build_model(loaded.events, selected_ranks=None, collective_preset="medium")

    return load_and_build


def fmt_mb(n_bytes: float | None) -> str:
    return "-" if n_bytes is None else f"{n_bytes / 1e6:,.0f} MB"


def verdict(ok: bool) -> str:
    return "target met" if ok else "NOT MET"


def as_plain(value: Any) -> Any:
    """A dataclass / object / mapping as plain dicts and lists (for field-by-field comparison)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: as_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return value.item()
    return value


def compare_models(reference: dict[str, Any], model: Any) -> list[str]:
    """Differences between the reference's rows/indicators (asdict) and stormwatch's model."""
    diffs: list[str] = []
    for part in ("rows", "indicators"):
        ref_items = reference[part]
        ours = as_plain(getattr(model, part, None))
        if not isinstance(ours, list):
            return [f"stormwatch model has no list attribute {part!r}"]
        if len(ours) != len(ref_items):
            diffs.append(f"{part}: {len(ours)} vs reference {len(ref_items)}")
            continue
        for i, (mine, theirs) in enumerate(zip(ours, ref_items, strict=True)):
            for key, want in theirs.items():
                got = mine.get(key, "<missing>") if isinstance(mine, dict) else "<not a record>"
                if key != "details" and got != want:
                    diffs.append(f"{part}[{i}].{key}: {got!r} vs reference {want!r}")
    return diffs


def print_reference_model(ref: dict[str, Any]) -> None:
    """What the reference found: evidence that the bench exercises its expensive paths."""
    tally = ref["tally"]
    print("reference model on this job:")
    collective = tally["collective_attributions"]
    total = sum(collective.values())
    print(f"  collective attributions: {total}  " + ", ".join(f"{k}={v}" for k, v in sorted(collective.items())))
    print("  gap findings: " + (", ".join(f"{k}={v}" for k, v in sorted(tally["gap_findings"].items())) or "none"))
    print(f"  timeline markers: {ref['markers']}")
    for row in ref["rows"]:
        print(
            f"  rank {row['rank']}: samples={row['samples']:,}"
            f" gap latest={row['hidden_gap_latest_bytes'] / MIB:,.0f} MiB"
            f" peak={row['hidden_gap_peak_abs_bytes'] / MIB:,.0f} MiB first={row['first_anomaly_signal']}"
            f" @ {row['first_anomaly_phase_path']}"
        )
    for ind in ref["indicators"]:
        print(
            f"  indicator {ind['kind']}: rank {ind['rank']} {ind['severity']} {ind['signal']}"
            f" t={ind['timestamp_ns']} conf={ind['confidence']} reasons={ind['reason_codes']}"
            f" phase={ind['phase_path']}"
        )


def scaling_sizes(text: str) -> list[int]:
    return [int(float(part)) for part in text.split(",") if part.strip()]


def run_scaling(
    sizes: list[int], *, ranks: int, seed: int, repeat: int, reference_sizes: int, build_model: Callable[..., Any]
) -> bool:
    """stormwatch load+build (and the reference at the smallest sizes) over growing jobs."""
    print(f"\nscaling: {ranks}-rank --hidden-memory jobs, stormwatch best of {repeat}, peak RSS in a fresh process")
    print(f"{'events':>11}{'MB':>8}{'stormwatch':>12}{'us/event':>10}{'peak RSS':>10}{'reference':>12}{'us/event':>10}")
    print("-" * 73)
    points: list[tuple[int, float]] = []
    ref_points: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory(prefix="stormwatch-scaling-") as tmp:
        for k, target in enumerate(sizes):
            samples = max(200, round(target / ranks))
            job = Path(tmp) / f"job_{target}"
            files = write_job(job, ranks=ranks, samples=samples, seed=seed, hidden=True)
            events = sum(p.read_bytes().count(b"\n") for p in files)
            size_mb = sum(p.stat().st_size for p in files) / 1e6
            seconds, _ = best_of(repeat, stormwatch_pipeline(job, build_model))
            peak = max(run_stormwatch_memory(job, "rss")["memory"]["peak_rss_delta_bytes"].values())
            points.append((events, seconds))
            ref_cell, ref_rate = "-", "-"
            if k < reference_sizes:
                ref_s = float(run_reference(files)["seconds"])
                ref_points.append((events, ref_s))
                ref_cell, ref_rate = fmt_s(ref_s), f"{ref_s / events * 1e6:.1f}"
            rate = seconds / events * 1e6
            print(
                f"{events:>11,}{size_mb:>8,.0f}{fmt_s(seconds):>12}{rate:>10.2f}{fmt_mb(peak):>10}"
                f"{ref_cell:>12}{ref_rate:>10}"
            )
            for path in files:  # keep the temp dir small: the 1M job is ~1 GB
                path.unlink()
    for label, pts in (("stormwatch", points), ("reference", ref_points)):
        if len(pts) >= 2:
            fitted = [pt for pt in pts if pt[0] >= FIT_MIN_EVENTS]
            fitted = fitted if len(fitted) >= 2 else pts[-2:]
            span = f"{fitted[0][0]:,}..{fitted[-1][0]:,} events"
            print(f"{label}: time ~ events^{loglog_slope(fitted):.2f} (least squares over {span})")
    if len(points) < 2:
        return True
    fitted = [pt for pt in points if pt[0] >= FIT_MIN_EVENTS]
    ok = loglog_slope(fitted if len(fitted) >= 2 else points[-2:]) <= LINEAR_EXPONENT_MAX
    print(f"target stormwatch linear (exponent <= {LINEAR_EXPONENT_MAX} from {FIT_MIN_EVENTS:,} events): {verdict(ok)}")
    return ok


def loglog_slope(points: list[tuple[int, float]]) -> float:
    """Least-squares k of time = c * events**k over (events, seconds) points."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", type=Path, help="reuse (or generate into) this --hidden-memory job folder "
                        "(the null-contexts job goes beside it, in <job>-null-contexts)")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=20_000, help="sample events per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="best-of-N for floor/stormwatch")
    parser.add_argument("--contexts", default="text,null",
                        help='sample contexts of the job(s) to run: text, null ("context": null), or both')
    parser.add_argument("--skip-reference", action="store_true", help="skip stormlog (~90-150 s, plus scaling runs)")
    parser.add_argument("--skip-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--skip-scaling", action="store_true", help="skip the 10k..1M scaling run")
    parser.add_argument("--scaling", default="10000,30000,100000,300000,1000000", help="total events per job")
    parser.add_argument("--reference-scaling", type=int, default=2, help="reference at this many smallest sizes")
    args = parser.parse_args(argv)
    build_model = import_model()
    kinds = [kind.strip() for kind in args.contexts.split(",") if kind.strip()]
    if not kinds or any(kind not in ("text", "null") for kind in kinds):
        parser.error("--contexts takes text, null or text,null")

    tmp = None
    base = args.job
    if base is None:
        tmp = tempfile.TemporaryDirectory(prefix="stormwatch-model-bench-")
        base = Path(tmp.name) / "job"
    base = base.resolve()
    failed = False
    try:
        for number, kind in enumerate(kinds):
            job = base if kind == "text" else base.with_name(base.name + "-null-contexts")
            files = prepare_job(job, args, null_contexts=kind == "null")
            # the scaling run (the same for both) goes with the last job only
            last = number == len(kinds) - 1
            run_args = argparse.Namespace(**{**vars(args), "skip_scaling": args.skip_scaling or not last})
            print(f"\n=== sample contexts: {kind} ===")
            failed |= bench(job, files, run_args, build_model) != 0
        return 1 if failed else 0
    finally:
        if tmp is not None:
            tmp.cleanup()


def prepare_job(job: Path, args: argparse.Namespace, *, null_contexts: bool) -> list[Path]:
    """The job's rank files: reused when ``job`` holds them, else generated (--hidden-memory)."""
    files = rank_files(job)
    if files:
        print(f"job: {job} (reused, {len(files)} rank files)")
        first = json.loads(files[0].read_bytes().split(b"\n", 1)[0])
        if first.get("metadata", {}).get("sampling_source") != HIDDEN_SAMPLE_META["sampling_source"]:
            print("WARNING: not a jobgen --hidden-memory job; the model's expensive paths may not run")
        return files
    t0 = time.perf_counter()
    files = write_job(job, ranks=args.ranks, samples=args.samples, seed=args.seed, hidden=True,
                      null_contexts=null_contexts)
    took = time.perf_counter() - t0
    contexts = "null" if null_contexts else "text"
    print(f"job: {job} (generated {args.ranks}x{args.samples:,} --hidden-memory, {contexts} contexts, in {took:.1f} s)")
    return files


def bench(job: Path, files: list[Path], args: argparse.Namespace, build_model: Callable[..., Any]) -> int:
    from stormwatch import load_artifacts

    blobs = [path.read_bytes() for path in files]
    input_bytes = sum(len(blob) for blob in blobs)
    lines = sum(blob.count(b"\n") for blob in blobs)
    print(f"input: {len(files)} files, {fmt_mb(input_bytes)}, {lines:,} records")
    print(f"timing: best of {args.repeat}; reference once, in a fresh subprocess\n")

    # stormwatch and the floor take turns, round after round, so that both see the same
    # load of this shared machine; each side's best round counts.
    timed = interleaved_best(args.repeat, {"stormwatch": stormwatch_pipeline(job, build_model),
                                           **floor_candidates(blobs)})
    del blobs
    sw_s, _, sw_note = timed.pop("stormwatch")
    if sw_s is None:
        raise SystemExit(f"model_bench: stormwatch {sw_note}")
    floor = timed
    measured = {name: seconds for name, (seconds, _, _) in floor.items() if seconds is not None}
    floor_label = min(measured, key=measured.__getitem__)
    floor_s = measured[floor_label]

    load_s, loaded = best_of(args.repeat, lambda: load_artifacts([job]))
    events = loaded.events
    build_s, model = best_of(
        args.repeat, lambda: build_model(events, selected_ranks=None, collective_preset="medium")
    )

    ref: dict[str, Any] | None = None
    ref_note = "skipped (--skip-reference)"
    if not args.skip_reference:
        try:
            ref = run_reference(files)
            ref_note = f"subprocess: load {fmt_s(ref['load_s'])} + build {fmt_s(ref['build_s'])}"
        except RuntimeError as exc:
            ref_note = f"failed ({exc})"
    ref_s = float(ref["seconds"]) if ref else None

    print(f"{'load + build':<32}{'wall':>10}{'x floor':>9}{'ref / this':>12}  note")
    print("-" * 90)
    rows: list[tuple[str, float | None, str]] = [
        ("reference (stormlog 0.3.5)", ref_s, ref_note),
        ("stormwatch", sw_s, f"load {fmt_s(load_s)} + build {fmt_s(build_s)}, each best of {args.repeat}"),
    ]
    rows += [(name, seconds, "<- floor" if name == floor_label else note) for name, (seconds, _, note) in floor.items()]
    for name, seconds, note in rows:
        x_floor = f"{seconds / floor_s:.2f}x" if seconds else "-"
        speed = f"{ref_s / seconds:,.0f}x" if ref_s and seconds else "-"
        print(f"{name:<32}{fmt_s(seconds):>10}{x_floor:>9}{speed:>12}  {note}")

    ok = True
    print()
    if ref_s:
        speedup = ref_s / sw_s
        met = speedup >= SPEEDUP_TARGET
        ok &= met
        print(f"reference / stormwatch: {speedup:,.1f}x  (target >= {SPEEDUP_TARGET:.0f}x): {verdict(met)}")
    else:
        print("reference / stormwatch: n/a (reference not measured)")
    ratio = sw_s / floor_s
    ok &= ratio <= FLOOR_TARGET
    print(f"stormwatch / floor:     {ratio:.2f}x  (target <= {FLOOR_TARGET}x): {verdict(ratio <= FLOOR_TARGET)}")

    if not args.skip_memory:
        ok &= report_memory(job, input_bytes, ref)
    if ref is not None:
        print()
        print_reference_model(ref)
        diffs = compare_models(ref, model)
        agree = "AGREE" if not diffs else "DIFFER"
        print(f"model check vs reference (rows, indicators; details text excluded): {agree}")
        for line in diffs[:20]:
            print(f"  {line}")
        if len(diffs) > 20:
            print(f"  ... {len(diffs) - 20} more")
        ok &= not diffs
    if not args.skip_scaling:
        sizes = scaling_sizes(args.scaling)
        reference_sizes = 0 if args.skip_reference else args.reference_scaling
        ok &= run_scaling(
            sizes,
            ranks=args.ranks,
            seed=args.seed,
            repeat=args.repeat,
            reference_sizes=reference_sizes,
            build_model=build_model,
        )
    skipped = [name for name, flag in (("reference", args.skip_reference), ("memory", args.skip_memory),
                                       ("scaling", args.skip_scaling)) if flag]
    scope = f"measured targets (skipped: {', '.join(skipped)})" if skipped else "targets"
    print(f"\nall {scope}: {'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


def report_memory(job: Path, input_bytes: int, ref: dict[str, Any] | None) -> bool:
    """Peak memory of each side (fresh subprocesses, per phase) next to the input's size."""
    rss = run_stormwatch_memory(job, "rss")
    traced = run_stormwatch_memory(job, "tracemalloc")
    mem = rss["memory"]
    print(f"\npeak memory, each in a fresh process (input: {fmt_mb(input_bytes)} of JSONL)")
    print(f"  {mem['method']} high-water minus the RSS after imports, reset between load and build")
    print(f"{'':<36}{'load':>9}{'build':>9}{'overall':>9}{'after imports':>15}")
    table: list[tuple[str, dict[str, Any], int | None]] = []
    if ref is not None:
        ref_mem = ref["memory"]
        table.append(("reference      RSS delta", ref_mem["peak_rss_delta_bytes"], ref_mem["rss_after_imports_bytes"]))
    table.append(("stormwatch     RSS delta", mem["peak_rss_delta_bytes"], mem["rss_after_imports_bytes"]))
    table.append(("stormwatch     tracemalloc peak", traced["tracemalloc_peak_bytes"], None))
    table.append(("stormwatch     Arrow pool peak", rss["arrow_pool_peak_bytes"], None))
    for label, peaks, base in table:
        overall = max(peaks.values()) if peaks else None
        cells = "".join(f"{fmt_mb(peaks.get(k)):>9}" for k in ("load", "build"))
        print(f"  {label:<34}{cells}{fmt_mb(overall):>9}{fmt_mb(base):>15}")
    print(f"  (tracemalloc: Python + numpy heap, its own process; Arrow: peaks of its {rss['arrow_backend']} pools "
          "added, cumulative)")
    peak = max(mem["peak_rss_delta_bytes"].values())
    ok = bool(peak < input_bytes)
    print(f"stormwatch peak RSS delta {fmt_mb(peak)} below the input's {fmt_mb(input_bytes)}: {verdict(ok)}")
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
