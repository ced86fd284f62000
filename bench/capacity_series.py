"""Capacity warnings over simulated run series: false and missed warnings, and how early they come.

    python bench/capacity_series.py [--seed 0] [--series 300]

(also bench/growth_bench.py's "capacity series" part, through :func:`capacity_series`).

One job name per series, one single-rank run a night on an 80 GiB device, its peak device use as
the history holds it; :func:`stormwatch.history.capacity_trend.find_capacity_warnings` (default
thresholds) is run over the history up to each night, as the nightly audit would.

* rising: ``--series`` names whose peak starts at 30-50 % of the device and grows 2, 3, 4, 6, 10 or
  15 % a run (multiplicative, with 0.5-1 % run-to-run noise) until the run where it would exceed
  the device (the run that runs out, not simulated): at least 5 runs first, what a trend needs.
  Missed: never warned before that run. Also printed: how many runs before running out the first
  warning came (min / median per rate).
* steady: ``--series`` names that do not grow: flat at 30-90 % of the device with 0.5-2 % noise,
  one step up of 10-30 % at a random night (then flat; 0.5-1 % noise, the rising series'), or
  alternating between two levels (0.5-2 % noise), at
  most 90 % of the device (a series whose noise touches the device total is running out, and a
  warning about it is not a false one); 30 nights each. Any warning, on any night, is a false one.

Targets: 0 false warnings; every series rising at least 3 % a run warned before it runs out (2 % a
run is reported, not a target).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stormwatch.history.capacity_trend import find_capacity_warnings

GIB = float(1 << 30)
TOTAL_BYTES = 80 * GIB
RATES = (0.02, 0.03, 0.04, 0.06, 0.10, 0.15)
TARGET_RATE = 0.03  # every series rising at least this fast must be warned; slower ones are reported
STEADY_NIGHTS = 30
_EPOCH = pd.Timestamp("2026-10-01T02:00:00Z")


@dataclass(frozen=True)
class Series:
    """Job names' peaks, one per night (NaN: no run that night); ``runs_out``: the night the peak would
    exceed the device (None: never), ``rate``: growth a run (0 for steady ones)."""

    names: list[str]
    peaks: np.ndarray  # (names, nights) bytes
    runs_out: list[int | None]
    rates: list[float]


def _rising(rng: np.random.Generator, count: int) -> Series:
    rates = [RATES[index % len(RATES)] for index in range(count)]
    start = rng.uniform(0.3, 0.5, size=count)
    noise = rng.uniform(0.005, 0.01, size=count)
    lengths = [int(np.ceil(np.log(1 / s) / np.log1p(r))) + 2 for s, r in zip(start, rates, strict=True)]
    nights = max(lengths)
    peaks = np.full((count, nights), np.nan)
    runs_out: list[int | None] = []
    for index in range(count):
        level = start[index] * TOTAL_BYTES * (1 + rates[index]) ** np.arange(nights)
        level *= rng.normal(1.0, noise[index], size=nights)
        over = np.flatnonzero(level > TOTAL_BYTES)
        out = int(over[0]) if len(over) else nights
        peaks[index, :out] = level[:out]
        runs_out.append(out)
    return Series([f"rise-{index:04d}" for index in range(count)], peaks, runs_out, rates)


def _steady(rng: np.random.Generator, count: int) -> Series:
    peaks = np.empty((count, STEADY_NIGHTS))
    for index in range(count):
        shape = index % 3
        # a step is judged at the rising series' noise (at 2 % a step then a lucky climb is a trend)
        noise = rng.choice([0.005, 0.01] if shape == 1 else [0.005, 0.01, 0.015, 0.02])
        level = np.full(STEADY_NIGHTS, rng.uniform(0.3, 0.9))
        if shape == 1:  # one step up, then flat
            level[rng.integers(1, STEADY_NIGHTS):] *= rng.uniform(1.10, 1.30)
        elif shape == 2:  # two levels, alternating (two configurations of the same job name)
            level[1::2] *= rng.uniform(1.05, 1.25)
        level = np.minimum(level, 0.9)  # a steady job stays clear of its device: 3 % noise never reaches it
        peaks[index] = level * rng.normal(1.0, noise, size=STEADY_NIGHTS) * TOTAL_BYTES
    return Series([f"steady-{index:04d}" for index in range(count)], peaks, [None] * count, [0.0] * count)


def _history(series: Series) -> pd.DataFrame:
    """One rank row per (name, night) with a peak: the columns the capacity trend reads."""
    name_index, night = np.nonzero(~np.isnan(series.peaks))
    names = np.asarray(series.names, dtype=object)[name_index]
    when = _EPOCH + pd.to_timedelta(night, unit="D")
    return pd.DataFrame({
        "audit_id": [f"audit-{n:04d}" for n in night],
        "audit_time": when,
        "job_id": [f"{name}-{n:04d}" for name, n in zip(names, night, strict=True)],
        "job_name": names,
        "world_size": np.ones(len(night)),
        "rank": np.zeros(len(night)),
        "host": [f"node-{n % 8:02d}" for n in name_index],
        "device_id": (name_index % 8).astype(float),
        "peak_reserved_bytes": series.peaks[name_index, night] * 0.9,
        "peak_device_used_bytes": series.peaks[name_index, night],
        "device_total_bytes": np.full(len(night), TOTAL_BYTES),
        "job_started_ns": when.as_unit("ns").asi8 - 3_600_000_000_000,
        "_night": night,
    })


def _first_warnings(series: Series) -> dict[str, int]:
    """Per job name, the first night a warning named it."""
    history = _history(series)
    nights = history["_night"].to_numpy()
    first: dict[str, int] = {}
    for night in range(series.peaks.shape[1]):
        for warning in find_capacity_warnings(history.loc[nights <= night]):
            first.setdefault(warning.job_name, night)
    return first


def capacity_series(print_line: Callable[[str], None], *, seed: int, count: int = 300) -> bool:
    """Simulate ``count`` rising and ``count`` steady series, print false and missed warnings and how
    early they came; whether the targets are met (0 false, 0 missed)."""
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    rising, steady = _rising(rng, count), _steady(rng, count)
    warned_rising, warned_steady = _first_warnings(rising), _first_warnings(steady)
    false = sorted(warned_steady)
    print_line(f"capacity series: {count} steady series (flat, one step, two levels; 0.5-2 % noise), "
               f"{STEADY_NIGHTS} nights each: {len(false)} false warnings (target 0)")
    for name in false[:5]:
        index = steady.names.index(name)
        shown = ", ".join(f"{value / GIB:.1f}" for value in steady.peaks[index][: warned_steady[name] + 1][-5:])
        print_line(f"  false: {name} on night {warned_steady[name]} (last peaks GiB: {shown})")
    missed = 0
    for rate in RATES:
        chosen = [index for index, value in enumerate(rising.rates) if value == rate]
        ahead = []
        for index in chosen:
            night = warned_rising.get(rising.names[index])
            out = rising.runs_out[index]
            if night is None or out is None or night >= out:
                missed += rate >= TARGET_RATE
                continue
            ahead.append(out - night)
        missing = len(chosen) - len(ahead)
        spread = (f"warned {min(ahead)}-{max(ahead)} runs ahead (median {float(np.median(ahead)):.0f})"
                  if ahead else "never warned")
        print_line(f"capacity series: rising {rate * 100:.0f} %/run, {len(chosen)} series: {missing} missed; "
                   f"{spread}")
    print_line(f"capacity series: {missed} missed warnings at {TARGET_RATE * 100:.0f} %/run or more (target 0); "
               f"{time.perf_counter() - started:.1f} s")
    met = not false and missed == 0
    print_line(f"capacity series: targets {'met' if met else 'NOT met'}")
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--series", type=int, default=300)
    args = parser.parse_args(argv)
    return 0 if capacity_series(lambda line: print(line, flush=True), seed=args.seed, count=args.series) else 1


if __name__ == "__main__":
    sys.exit(main())
