"""Growth and leak detection (issue 30): stormwatch.growth.rank_growth on generated training memory.

    python bench/growth_bench.py [--short] [--clean-jobs 500] [--leak-jobs 60] [--ranks 8]
                                 [--cost-samples 20000] [--cost-repeat 3] [--seed 0]

    --short   CI's form (tests/test_growth_bench.py): 60 clean jobs, 12 leak jobs per rate, a 5,000-sample
              cost job (well under a minute); sizes given on the command line still apply

Every rank is generated columnar (numpy, no Python object per sample) as a training job's memory looks
to stormlog's CUDA tracker:

  duration    1-48 h (log-uniform); sample interval 1, 2, 5, 10 or 30 s, coarser where needed to keep a
              rank under 12,000 samples; device total 40 or 80 GiB
  warm-up     the allocator's floor (weights, optimizer state, caches) ramps from ~35 % to its steady
              level, exponentially with a 2-20 min time constant
  steps       a step of 0.4-8 s: activations allocated through the step and freed at its end
              (allocated = floor + activations x phase in the step), 10-45 % of the device in all
  noise       ~0.3 % of the floor, Gaussian, per sample
  reserved    what the caching allocator holds: the running maximum of (each step's true peak + slack)
              in 2 MiB blocks, so it creeps up with new highs and never gives back (until a restart)
  restarts    on a third of the ranks, 1-3 process restarts (a new pid, allocator reset: memory back
              to the warm-up's start, a 1-5 min gap in samples, then the warm-up ramp again)
  device used reserved + a 300-600 MiB CUDA context
  leaks       a planted leak adds rate x time to the floor (kept across steps, lost at a restart); rates
              0.25, 0.5, 1 and 5 % of the device per hour. A leaking rank's job ends before the floor
              would reach the device (it would have run out), at 90 % of that time at most; leak jobs
              have no restarts, so the planted line is the truth the projection is measured against

Measured, printed as it runs:
  false leaks       over --clean-jobs clean jobs of --ranks ranks (target 0), and how many ranks got a
                    figure and which gaps the others got
  detection         per planted rate, the share of leaking ranks flagged (``leak``), and the share whose
                    slope alone was significant (lower 95 % bound above zero). 0.25 %/h is below the
                    default leak-min of an 80 GiB device (0.5 %/h, 410 MiB/h; 40 GiB: 256 MiB/h, 0.625 %/h),
                    so its flag rate is expected low; 0.5 %/h sits at the threshold
  projection        median and p90 relative error of ``capacity_after_start_s`` against the planted line's
                    crossing of the device total, over flagged ranks
  cost per job      a bench/jobgen.py job (--ranks x --cost-samples) diagnosed with stormwatch.diagnose
                    (loader + model + document, best of --cost-repeat) against rank_growth on its loaded
                    events frame (best of --cost-repeat). Target: under 5 %
  capacity series   the hook below: bench/capacity_series.py's ``capacity_series(print_line, seed=)``,
                    when that file exists (false and missed capacity warnings over simulated run series)

Exit code 0 whatever the targets (the targets block says met / UNMET); 2 when a run failed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import jobgen  # noqa: E402  (bench/ on the path: the job writer the other benches use)

from stormwatch.diagnose import diagnose  # noqa: E402
from stormwatch.growth.figures import RankGrowth  # noqa: E402
from stormwatch.growth.rank_growth import DEFAULT_GROWTH_SETTINGS, rank_growth  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20
NS_PER_S = 1_000_000_000
START_NS = 1_767_225_600 * NS_PER_S  # 2026-01-01T00:00:00Z
LEAK_RATES_PERCENT = (0.25, 0.5, 1.0, 5.0)
MAX_SAMPLES = 12_000
COST_TARGET_PERCENT = 5.0
TAU_RANGE_S = (60.0, 900.0)  # warm-up time constant (s): settled in 3-45 min


@dataclass(frozen=True, kw_only=True, slots=True)
class Planted:
    """What a generated rank holds: its leak (bytes per hour, 0: none) and when the planted floor line
    of reserved memory reaches the device (seconds after the first sample; None without a leak)."""

    leak_bytes_per_hour: float
    capacity_after_start_s: float | None
    restarts: int


def _rank_frame(rng: np.random.Generator, rank: int, *, leak_percent: float) -> tuple[pd.DataFrame, Planted]:
    total = int(rng.choice((40, 80))) * GIB
    floor = rng.uniform(0.15, 0.45) * total
    activations = rng.uniform(0.10, 0.45) * total
    slack = rng.uniform(0.01, 0.05) * total
    leak = leak_percent / 100.0 * total  # bytes per hour
    steady_reserved = floor + activations + slack
    duration_h = float(np.exp(rng.uniform(np.log(1.0), np.log(48.0))))
    crossing_h = None if leak == 0 else (total - steady_reserved) / leak
    if crossing_h is not None:
        duration_h = min(duration_h, 0.9 * crossing_h)
    duration_s = duration_h * 3600
    interval_s = max(float(rng.choice((1, 2, 5, 10, 30))), duration_s / MAX_SAMPLES)
    offsets = np.arange(0.0, duration_s, interval_s)
    offsets = offsets + rng.uniform(0, 0.05 * interval_s, len(offsets))  # sampling jitter
    restarts = 0 if leak or rng.random() >= 1 / 3 else int(rng.integers(1, 4))
    cuts = np.sort(rng.uniform(0.05, 0.95, restarts)) * duration_s
    pauses = rng.uniform(60, 300, restarts)
    kept = np.ones(len(offsets), dtype=bool)
    since = offsets.copy()  # seconds since the process (last restart) began
    for cut, pause in zip(cuts, pauses, strict=True):
        kept &= ~((offsets >= cut) & (offsets < cut + pause))
        since = np.where(offsets >= cut + pause, offsets - (cut + pause), since)
    offsets, since = offsets[kept], since[kept]
    tau_s = rng.uniform(*TAU_RANGE_S)
    ramp = 1 - 0.65 * np.exp(-since / tau_s)
    step_s = rng.uniform(0.4, 8.0)
    phase = (offsets / step_s) % 1.0
    noise = rng.normal(0, 0.003 * floor, len(offsets))
    kept_bytes = floor * ramp + leak * since / 3600 + noise          # what outlives a step
    step_peak = activations * np.minimum(ramp * 1.2, 1)              # the step's activations at their peak
    allocated = np.clip(kept_bytes + step_peak * phase, 0, total)
    process = np.cumsum(np.r_[0, np.diff(since) < 0])  # which process (restart segment) a sample is in
    reserved = np.empty(len(offsets))
    # the allocator sees every step's true peak (not the sampled phase), rounded up to its 2 MiB blocks
    blocks = np.ceil((np.clip(kept_bytes + step_peak, 0, total) + slack) / (2 * MIB)) * (2 * MIB)
    for segment in np.unique(process):  # a handful of segments: the running max restarts at each
        rows = process == segment
        reserved[rows] = np.maximum.accumulate(blocks[rows])
    reserved = np.minimum(reserved, total)
    used = np.minimum(reserved + rng.uniform(300, 600) * MIB, total)
    frame = pd.DataFrame({
        "rank": np.full(len(offsets), rank, dtype=np.int64),
        "event_type": "sample",
        "timestamp_ns": START_NS + (offsets * NS_PER_S).astype(np.int64),
        "device_id": np.full(len(offsets), rank % 8, dtype=np.int64),
        "pid": (4000 + 100 * rank + process).astype(np.int64),  # a restart is a new process
        "device_total_bytes": np.full(len(offsets), total, dtype=np.int64),
        "allocator_allocated_bytes": allocated.astype(np.int64),
        "allocator_reserved_bytes": reserved.astype(np.int64),
        "device_used_bytes": used.astype(np.int64),
    })
    planted = Planted(leak_bytes_per_hour=leak, restarts=restarts,
                      capacity_after_start_s=None if crossing_h is None else crossing_h * 3600)
    return frame, planted


def job_frame(rng: np.random.Generator, ranks: int, *, leak_percent: float = 0.0) -> tuple[pd.DataFrame, list[Planted]]:
    """One job's sample events (time order, as the loader gives them) and each rank's plant."""
    parts = [_rank_frame(rng, rank, leak_percent=leak_percent) for rank in range(ranks)]
    frame = pd.concat([part for part, _ in parts], ignore_index=True)
    frame = frame.iloc[np.argsort(frame["timestamp_ns"].to_numpy(), kind="stable")].reset_index(drop=True)
    return frame, [planted for _, planted in parts]


def false_leaks(print_line: Callable[[str], None], *, jobs: int, ranks: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    flagged, figures, significant = 0, 0, 0
    gaps: dict[str, int] = {}
    started = time.perf_counter()
    for job in range(jobs):
        frame, _ = job_frame(rng, ranks)
        growth = rank_growth(frame, range(ranks), settings=DEFAULT_GROWTH_SETTINGS)
        flagged += sum(item.leak for item in growth)
        figures += sum(item.gap is None for item in growth)
        significant += sum(item.low_bytes_per_hour is not None and item.low_bytes_per_hour > 0 for item in growth)
        for item in growth:
            if item.gap is not None:
                gaps[item.gap.value] = gaps.get(item.gap.value, 0) + 1
        if (job + 1) % max(1, jobs // 5) == 0 or job + 1 == jobs:
            print_line(f"  {job + 1:5d} clean jobs  {figures:6d} ranks measured  {flagged:3d} false leaks  "
                       f"({time.perf_counter() - started:6.1f} s)")
    print_line(f"  ranks without a figure: {gaps or 'none'}; slope significant (no leak) on {significant} ranks")
    return flagged


@dataclass(frozen=True, kw_only=True, slots=True)
class Detection:
    rate_percent: float
    ranks: int
    flagged: int
    significant: int
    errors: tuple[float, ...]


def detection(print_line: Callable[[str], None], *, jobs: int, ranks: int, seed: int) -> list[Detection]:
    out = []
    print_line(f"  {'rate %/h':>8}  {'ranks':>6}  {'flagged':>8}  {'significant':>11}  {'proj. median err':>16}  "
               f"{'p90 err':>8}")
    for number, rate in enumerate(LEAK_RATES_PERCENT):
        rng = np.random.default_rng(seed * 100 + number + 1)
        flagged, significant, errors, total = 0, 0, [], 0
        for _ in range(jobs):
            frame, planted = job_frame(rng, ranks, leak_percent=rate)
            growth: tuple[RankGrowth, ...] = rank_growth(frame, range(ranks), settings=DEFAULT_GROWTH_SETTINGS)
            for item, plant in zip(growth, planted, strict=True):
                total += 1
                significant += item.low_bytes_per_hour is not None and item.low_bytes_per_hour > 0
                if item.leak and item.capacity_after_start_s is not None and plant.capacity_after_start_s:
                    flagged += 1
                    errors.append(abs(item.capacity_after_start_s - plant.capacity_after_start_s)
                                  / plant.capacity_after_start_s)
        result = Detection(rate_percent=rate, ranks=total, flagged=flagged, significant=significant,
                           errors=tuple(errors))
        median = f"{np.median(errors) * 100:15.1f}%" if errors else f"{'-':>16}"
        p90 = f"{np.percentile(errors, 90) * 100:7.1f}%" if errors else f"{'-':>8}"
        print_line(f"  {rate:8.2f}  {total:6d}  {flagged / total * 100:7.1f}%  {significant / total * 100:10.1f}%  "
                   f"{median}  {p90}")
        out.append(result)
    return out


def cost(print_line: Callable[[str], None], *, ranks: int, samples: int, repeat: int, seed: int) -> float:
    """rank_growth's time as a percentage of the job's diagnose time (best of ``repeat`` each)."""
    with tempfile.TemporaryDirectory() as work:
        job = Path(work) / "job"
        jobgen.write_job(job, ranks=ranks, samples=samples, seed=seed)
        diagnosed, best_diagnose = None, float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            diagnosed = diagnose([job], job_id="growth-cost", source_name="growth-cost")
            best_diagnose = min(best_diagnose, time.perf_counter() - started)
        assert diagnosed is not None
        events, present = diagnosed.loaded.events, [int(rank) for rank in diagnosed.model.present_ranks]
        best_growth = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            rank_growth(events, present, settings=DEFAULT_GROWTH_SETTINGS)
            best_growth = min(best_growth, time.perf_counter() - started)
    share = best_growth / best_diagnose * 100
    print_line(f"  job {ranks} ranks x {samples:,} samples ({len(events):,} events): diagnose {best_diagnose:.3f} s "
               f"(includes growth), rank_growth {best_growth * 1000:.1f} ms = {share:.2f} %")
    return share


def capacity_hook(print_line: Callable[[str], None], *, seed: int) -> bool | None:
    """HOOK (issue 30, part 3): bench/capacity_series.py, when it exists, defines
    ``capacity_series(print_line, *, seed) -> bool`` (its targets met); None when it does not exist."""
    if not (BENCH / "capacity_series.py").exists():
        return None
    try:  # another part's bench: a failure there is reported as its target unmet, not a crash here
        module = importlib.import_module("capacity_series")  # bench/ is on sys.path
        run = getattr(module, "capacity_series", None)
        return None if run is None else bool(run(print_line, seed=seed))
    except Exception as error:  # noqa: BLE001
        print_line(f"  bench/capacity_series.py failed: {type(error).__name__}: {error}")
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="CI's form (well under a minute)")
    parser.add_argument("--clean-jobs", type=int)
    parser.add_argument("--leak-jobs", type=int, help="jobs per planted rate")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--cost-samples", type=int)
    parser.add_argument("--cost-repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    clean = args.clean_jobs or (60 if args.short else 500)
    leak_jobs = args.leak_jobs or (12 if args.short else 60)
    cost_samples = args.cost_samples or (5_000 if args.short else 20_000)

    def say(line: str) -> None:
        print(line, flush=True)

    settings = DEFAULT_GROWTH_SETTINGS
    say(f"growth settings: warm-up {settings.warmup_share:.0%} of the span (>= {settings.warmup_min_s:.0f} s, "
        f">= {settings.warmup_min_samples} samples) per process, {settings.window_count} windows, "
        f">= {settings.min_samples} samples, >= {settings.min_windows} windows, >= {settings.min_span_s:.0f} s, "
        f"pace >= {settings.min_late_share:g} (<= {settings.warmup_trims} trims), 95 % interval, "
        "leak-min max(256 MiB/h, 0.5 % of the device/h)")
    say(f"\n== false leaks: {clean} clean jobs x {args.ranks} ranks (sawtooth, noise, warm-up, restarts)")
    false = false_leaks(say, jobs=clean, ranks=args.ranks, seed=args.seed)
    say(f"\n== detection: {leak_jobs} jobs x {args.ranks} ranks per planted rate (% of the device per hour)")
    say("   (0.25 %/h is below the default leak-min of an 80 GiB device, 0.5 %/h: its flag rate is expected "
        "low; 'significant' is the slope's own test)")
    found = detection(say, jobs=leak_jobs, ranks=args.ranks, seed=args.seed)
    say(f"\n== cost per job: growth vs the job's full diagnose (best of {args.cost_repeat})")
    share = cost(say, ranks=args.ranks, samples=cost_samples, repeat=args.cost_repeat, seed=args.seed)
    say("\n== capacity warnings over run series (bench/capacity_series.py)")
    capacity = capacity_hook(say, seed=args.seed)
    if capacity is None:
        say("  bench/capacity_series.py not present: skipped")

    by_rate = {item.rate_percent: item for item in found}
    errors = [error for item in found for error in item.errors]
    median = float(np.median(errors)) * 100 if errors else float("nan")
    p90 = float(np.percentile(errors, 90)) * 100 if errors else float("nan")
    targets = [
        (f"false leaks over {clean} clean jobs: {false} (target 0)", false == 0),
        (f"planted 1 %/h flagged: {by_rate[1.0].flagged / by_rate[1.0].ranks:.0%} (target >= 85 %)",
         by_rate[1.0].flagged >= 0.85 * by_rate[1.0].ranks),
        (f"planted 5 %/h flagged: {by_rate[5.0].flagged / by_rate[5.0].ranks:.0%} (target >= 95 %)",
         by_rate[5.0].flagged >= 0.95 * by_rate[5.0].ranks),
        (f"projection error: median {median:.1f} %, p90 {p90:.1f} % (target median <= 10 %, p90 <= 25 %)",
         bool(errors) and median <= 10 and p90 <= 25),
        (f"cost per job: {share:.2f} % of diagnose (target < {COST_TARGET_PERCENT:g} %)", share < COST_TARGET_PERCENT),
    ]
    if capacity is not None:
        targets.append(("capacity warnings over run series (bench/capacity_series.py)", capacity))
    say("\ntargets (" + ("short form" if args.short else "full form") + ")")
    for text, met in targets:
        say(f"  {text:<100} {'met' if met else 'UNMET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
