"""The rows a rank's growth is measured on: its samples by process, the warm-up dropped, the longest
process's steady state cut into equal-time windows and each window's minimum (the method is
:mod:`stormwatch.growth.rank_growth`'s, steps 1 to 3).

Columnar throughout: one stable sort of the sample rows by rank (a radix sort of int16 codes), then
linear numpy passes; within a rank, rows keep frame order (the loader's: time order, so
:attr:`Steady.backwards` sees a clock step back only in a frame built in arrival order; the
loader finds them in file order, see :mod:`stormwatch.load.clock_steps`). Units:
seconds (float, since the frame's earliest sample) and bytes; x in hours since each rank's first
sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from stormwatch.analysis.columns import Coded
from stormwatch.growth.figures import GrowthCounter

if TYPE_CHECKING:  # rank_growth imports this module: the settings' type only
    from stormwatch.growth.rank_growth import GrowthSettings

NS_PER_S = 1_000_000_000
S_PER_HOUR = 3600.0
CPU_DEVICE_ID = -1
UNKNOWN_PID = -1
#: The counters measured, in the order of every ``counters`` array's first axis.
COUNTERS = (GrowthCounter.ALLOCATED, GrowthCounter.RESERVED)


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleRows:
    """The present ranks' samples sorted by rank (stable: frame order within a rank); ``starts``:
    each rank's first row (``len(ranks) + 1`` entries, the last the row count)."""

    codes: np.ndarray
    seconds: np.ndarray          # since the earliest sample
    stamps: np.ndarray           # int64 ns
    counters: np.ndarray         # (2, rows) float: allocated, reserved (NaN: missing)
    pids: np.ndarray | None      # float (NaN: unknown)
    starts: np.ndarray


def device_totals(frame: pd.DataFrame, codes: np.ndarray, count: int) -> np.ndarray:
    """Largest device total over each rank's events (NaN: none, or every device id is the CPU's)."""
    kept = codes >= 0
    values = pd.DataFrame({
        "total": frame["device_total_bytes"].to_numpy(dtype=np.float64, na_value=np.nan)[kept],
        "device": frame["device_id"].to_numpy(dtype=np.float64, na_value=np.nan)[kept],
    }).groupby(codes[kept]).max().reindex(range(count))
    total, device = values["total"].to_numpy(), values["device"].to_numpy()
    cpu = device == CPU_DEVICE_ID   # the largest device id is -1: every event is the CPU tracker's
    return np.where(cpu | ~(total > 0), np.nan, total)


def sample_rows(frame: pd.DataFrame, codes: np.ndarray, count: int) -> SampleRows:
    is_sample = Coded.of(frame["event_type"]).where(lambda kind: kind.strip().lower() == "sample")
    kept = np.flatnonzero((codes >= 0) & is_sample)
    small = codes[kept].astype(np.int16 if count < 2**15 else np.int64)
    order = kept[np.argsort(small, kind="stable")]  # a radix sort of int16 codes
    sorted_codes = codes[order]
    stamps = frame["timestamp_ns"].to_numpy(dtype=np.int64)[order]
    base = int(stamps.min()) if len(stamps) else 0
    counters = np.stack([frame[counter.value].to_numpy(dtype=np.float64, na_value=np.nan)[order]
                         for counter in COUNTERS])
    pids = None
    if "pid" in frame.columns:
        pids = frame["pid"].to_numpy(dtype=np.float64, na_value=np.nan)[order]
        pids[pids == UNKNOWN_PID] = np.nan
    starts = np.searchsorted(sorted_codes, np.arange(count + 1))
    return SampleRows(codes=sorted_codes, seconds=(stamps - base) / NS_PER_S, stamps=stamps, counters=counters,
                    pids=pids, starts=starts)


def _forward_filled(values: np.ndarray, firsts: np.ndarray) -> np.ndarray:
    """``values`` with NaN replaced by the last value before it in its rank (rank starts: ``firsts``)."""
    index = np.where(np.isfinite(values) | firsts, np.arange(len(values)), 0)
    return values[np.maximum.accumulate(index)] if len(values) else values


def _segments(samples: SampleRows, level: np.ndarray, count: int, settings: GrowthSettings) -> np.ndarray:
    """Each sample's process segment, numbered over all ranks (see the module docstring)."""
    rows = len(level)
    firsts = np.zeros(rows, dtype=bool)
    firsts[samples.starts[:-1][samples.starts[:-1] < rows]] = True
    previous = np.r_[np.nan, _forward_filled(level, firsts)[:-1]] if rows else level
    with np.errstate(invalid="ignore"):
        drops = (level < settings.restart_drop_share * previous) & ~firsts
    routine = np.bincount(samples.codes[drops], minlength=count) > settings.window_count  # empty_cache
    boundary = drops & ~routine[samples.codes]
    if samples.pids is not None and rows:
        before = np.r_[np.nan, samples.pids[:-1]]
        boundary |= np.isfinite(samples.pids) & np.isfinite(before) & (samples.pids != before) & ~firsts
    return np.cumsum(boundary | firsts) - 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Steady:
    """Per rank: the measured process's steady rows ``[first, end)`` of the sorted samples."""

    first: np.ndarray
    end: np.ndarray
    backwards: np.ndarray
    has_counter: np.ndarray


def steady_rows(samples: SampleRows, count: int, settings: GrowthSettings) -> Steady:
    rows, starts = len(samples.codes), samples.starts
    present = np.isfinite(samples.counters)
    has = [np.bincount(samples.codes[row], minlength=count) > 0 for row in present]
    level = np.where(has[1][samples.codes], samples.counters[1], samples.counters[0]) if rows else np.empty(0)
    segment = _segments(samples, level, count, settings)
    segments = int(segment[-1]) + 1 if rows else 0
    seg_first = np.searchsorted(segment, np.arange(segments + 1))  # segments are ascending runs
    seg_rank = samples.codes[seg_first[:-1]]
    span = np.zeros(count)
    nonempty = starts[1:] > starts[:-1]
    span[nonempty] = samples.seconds[starts[1:][nonempty] - 1] - samples.seconds[starts[:-1][nonempty]]
    # a process's steady rows are a suffix of it: times ascend within it (else the clock went back)
    position = np.arange(rows) - seg_first[segment]
    segment_start = samples.seconds[seg_first[:-1]][segment] if rows else np.empty(0)
    steady = (position >= settings.warmup_min_samples) & \
        (samples.seconds >= segment_start + np.maximum(settings.warmup_share * span[samples.codes],
                                                       settings.warmup_min_s))
    first = seg_first[:-1] + np.bincount(segment[~steady], minlength=segments)
    end = seg_first[1:]
    has_steady = first < end
    if rows:
        length = np.where(has_steady, samples.seconds[np.minimum(end, rows) - 1]
                          - samples.seconds[np.minimum(first, rows - 1)], -1.0)
    else:
        length = np.empty(0)
    pick = np.lexsort((np.arange(segments), length, seg_rank))  # per rank: the longest (ties: later) last
    chosen_first, chosen_end = starts[:-1].copy(), starts[:-1].copy()  # empty unless a process has steady rows
    last_of_rank = pick[np.r_[seg_rank[pick][1:] != seg_rank[pick][:-1], True]] if segments else pick
    usable = has_steady[last_of_rank]
    chosen_first[seg_rank[last_of_rank][usable]] = first[last_of_rank][usable]
    chosen_end[seg_rank[last_of_rank][usable]] = end[last_of_rank][usable]
    stamps_back = np.r_[False, np.diff(samples.stamps) < 0] if rows else np.zeros(0, dtype=bool)
    firsts = np.zeros(rows, dtype=bool)
    firsts[starts[:-1][nonempty]] = True
    backwards = np.bincount(samples.codes[stamps_back & ~firsts], minlength=count) > 0
    return Steady(first=chosen_first, end=chosen_end, backwards=backwards, has_counter=has[0] | has[1])


def window_minima(
    samples: SampleRows, steady: Steady, count: int, settings: GrowthSettings
) -> tuple[np.ndarray, np.ndarray]:
    """(x: window mid-times in hours since each rank's first sample, ``(ranks, windows)``; y: the
    windows' minima per counter, ``(counters, ranks, windows)``, NaN where a window has no value)."""
    width = settings.window_count
    lengths = steady.end - steady.first
    offsets = np.cumsum(lengths) - lengths
    rows = np.arange(int(lengths.sum())) + np.repeat(steady.first - offsets, lengths)
    codes = np.repeat(np.arange(count), lengths)
    rank_first = samples.seconds[np.minimum(samples.starts[:-1], max(len(samples.seconds) - 1, 0))] \
        if len(samples.seconds) else np.zeros(count)
    begin = np.where(lengths > 0, samples.seconds[np.minimum(steady.first, len(samples.seconds) - 1)], np.nan) \
        if len(samples.seconds) else np.full(count, np.nan)
    finish = np.where(lengths > 0, samples.seconds[np.maximum(steady.end - 1, 0)], np.nan) \
        if len(samples.seconds) else np.full(count, np.nan)
    span = np.maximum(finish - begin, 1e-9)
    window = np.minimum((samples.seconds[rows] - begin[codes]) / span[codes] * width, width - 1).astype(np.int64)
    keys = codes * width + window  # ascending: times ascend within a process
    y = np.full((len(COUNTERS), count * width), np.nan)
    if len(keys):
        runs = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        for number in range(len(COUNTERS)):
            y[number, keys[runs]] = np.fmin.reduceat(samples.counters[number, rows], runs)
    mids = (np.arange(width) + 0.5) / width
    x = (begin - rank_first)[:, None] + (finish - begin)[:, None] * mids[None, :]
    return x / S_PER_HOUR, y.reshape(len(COUNTERS), count, width)
