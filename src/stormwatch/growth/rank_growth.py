"""Each present rank's steady-state memory growth after warm-up: :func:`rank_growth`.

Method, per rank, over its *sample* events only (the model's rule, as
:func:`~stormwatch.peers.rank_facts.sample_mask`: ``event_type`` stripped and lower-cased is
``"sample"``; read here through :class:`~stormwatch.analysis.columns.Coded` directly, since
:mod:`stormwatch.peers` imports this module), in frame order (the loader's: time order):

1. **Processes.** A restart (a new ``pid``, or the judged counter below
   :attr:`GrowthSettings.restart_drop_share` of the previous sample's: an allocator reset) starts a
   new process segment. What a leak held is gone after a restart, and every process warms up
   again, so only the rank's longest-running process (longest steady span; ties: the later) is
   measured. A rank whose counter drops more often than there are windows is emptying its cache
   routinely (``empty_cache``), not restarting: its drops start no segment.
2. **Warm-up.** In each process, the samples in the first :attr:`GrowthSettings.warmup_share` of the
   rank's span (first to last sample) after the process's first sample, at least its first
   :attr:`GrowthSettings.warmup_min_s` seconds and at least its first
   :attr:`GrowthSettings.warmup_min_samples` samples, are dropped: a process fills its caches,
   builds its optimizer state and compiles in its first steps, which is growth but not a leak.
3. **Windows.** The measured process's steady state (first to last steady sample) is cut into
   :attr:`GrowthSettings.window_count` equal-time windows; each keeps the *minimum* of allocated and
   of reserved memory. A training step's sawtooth (activations allocated, then freed at the step's
   end) moves the maxima and the averages; the floor under it moves only when memory is kept,
   which is what a leak is.
4. **Slope.** Theil–Sen over (window mid-time in hours since the rank's first sample, window minimum
   in bytes) per counter (:func:`~stormwatch.growth.slope.theil_sen`): robust to the odd window.
5. **Steady pace.** Growth that slows down is a warm-up still settling (a slow cache fill, a short
   job): ``1 - e^(-t/τ)`` grows fast, then less. The slope over the later half of the windows must
   be at least :attr:`GrowthSettings.min_late_share` of the slope over the earlier half and of the
   slope over the whole; when it is
   not, the earlier half is dropped as warm-up too and the check repeated, up to
   :attr:`GrowthSettings.warmup_trims` times while at least :attr:`GrowthSettings.min_windows`
   windows and :attr:`GrowthSettings.min_span_s` remain. The figure is that of the first part that
   keeps its pace; when none does, that of the whole steady state, and never a leak. A creep that
   slows without ever stopping (an allocator's running peak) keeps its pace over a short stretch, so
   a leak must also still grow at least the leak-min over the shortest part the trims allow.
6. **Verdict.** Judged on reserved memory when the rank recorded it (in at least
   :attr:`GrowthSettings.min_windows` windows), else on allocated: reserved is what the caching
   allocator holds on the device, so it is what runs out, and it is the steadier counter (the
   allocator keeps freed blocks, so the step sawtooth barely shows). A leak is growth at a steady
   pace whose 95% (``1 - significance``) interval has its lower bound above zero and whose slope is
   at least :meth:`GrowthSettings.leak_min_for` the rank's device, there and over the last part;
   when the warm-up had to be trimmed, the interval's lower bound itself must reach
   :attr:`GrowthSettings.trimmed_low_share` times the leak-min (the run was mostly warm-up: a leak
   must be beyond doubt).
7. **Projection.** ``capacity_after_start_s``: seconds from the rank's first sample until the judged
   counter's fitted line (Theil–Sen's: the median intercept, the slope) reaches the device total;
   None when the slope is not above zero. It follows the floor under the sawtooth, so the peaks
   reach capacity somewhat earlier.

A rank gets no figure, but a :class:`~stormwatch.growth.figures.GrowthGap`, when its sample
timestamps go backwards, it has no device total (a CPU tracker: ``device_id`` -1, or no total
recorded), neither counter, too few steady-state samples or windows, or too short a steady state.

Backwards clocks: a rank's clock went backwards when the caller says so
(``clock_backwards_ranks``: for a loaded job the loader's
:attr:`~stormwatch.load.loader.LoadResult.clock_backwards_ranks`, the ranks whose samples step back
by more than :data:`~stormwatch.load.clock_steps.CLOCK_STEP_TOLERANCE_S` in their files' order,
found before the loader sorts each session's events by time and keeps no arrival order), or when its
sample timestamps *in frame order* decrease (a frame a caller built in arrival order). Either way
the rank gets the gap ``CLOCK_BACKWARDS``, never a figure: its samples, sorted by time, overlap,
and a slope over them would measure the step, not the memory.

Cost: one stable sort of the sample rows by rank (a radix sort of small codes), then a handful of
linear numpy passes; ``window_count²/2`` pair slopes per rank, counter and trim. Nothing per event
in Python.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stormwatch.growth.figures import GrowthCounter, GrowthGap, RankGrowth
from stormwatch.growth.leak_min import DEFAULT_LEAK_MIN, LeakMin
from stormwatch.growth.process_windows import (
    COUNTERS,
    S_PER_HOUR,
    Steady,
    device_totals,
    sample_rows,
    steady_rows,
    window_minima,
)
from stormwatch.growth.slope import Slopes, theil_sen

_WHOLE, _EARLY, _LATE = 0, 1, 2


@dataclass(frozen=True, kw_only=True, slots=True)
class GrowthSettings:
    """How growth is measured and judged (see the module docstring)."""

    warmup_share: float = 0.10             # of the rank's span, dropped as warm-up in each process
    warmup_min_samples: int = 10           # at least this many first samples of each process dropped
    warmup_min_s: float = 600.0            # ... and at least this many seconds of it
    window_count: int = 32                 # equal-time windows over the steady state
    min_samples: int = 30                  # steady-state samples a figure needs
    min_windows: int = 8                   # window minima a slope needs
    min_span_s: float = 1800.0             # steady state a figure needs (seconds)
    significance: float = 0.05             # 1 - the interval's confidence
    min_late_share: float = 0.8            # steady pace: later-half slope over earlier-half slope, at least
    warmup_trims: int = 2                  # times the earlier half may be dropped as a slow warm-up
    trimmed_low_share: float = 1.5         # after a trim, the interval's low bound must reach this x leak-min
    restart_drop_share: float = 0.6        # a sample under this share of the previous one is a restart
    leak_min: LeakMin = DEFAULT_LEAK_MIN   # the larger of 256 MiB/h and 0.5 % of the device per hour

    def __post_init__(self) -> None:
        checks = [
            (0.0 <= self.warmup_share < 1.0, f"warmup_share {self.warmup_share} is outside [0, 1)"),
            (self.warmup_min_samples >= 0, f"warmup_min_samples {self.warmup_min_samples} is negative"),
            (self.warmup_min_s >= 0, f"warmup_min_s {self.warmup_min_s} is negative"),
            (4 <= self.window_count <= 200, f"window_count {self.window_count} is outside 4..200"),
            (4 <= self.min_windows <= self.window_count,
             f"min_windows {self.min_windows} is outside 4..window_count ({self.window_count})"),
            (self.min_samples >= self.min_windows, f"min_samples {self.min_samples} is below min_windows"),
            (self.min_span_s > 0, f"min_span_s {self.min_span_s} is not positive"),
            (0.0 < self.significance < 0.5, f"significance {self.significance} is outside (0, 0.5)"),
            (0.0 <= self.min_late_share <= 1.0, f"min_late_share {self.min_late_share} is outside [0, 1]"),
            (0 <= self.warmup_trims <= 4, f"warmup_trims {self.warmup_trims} is outside 0..4"),
            (self.trimmed_low_share >= 0, f"trimmed_low_share {self.trimmed_low_share} is negative"),
            (0.0 <= self.restart_drop_share < 1.0, f"restart_drop_share {self.restart_drop_share} is outside [0, 1)"),
        ]
        for ok, problem in checks:
            if not ok:
                raise ValueError(problem)

    def leak_min_for(self, device_total_bytes: int | None) -> float | None:
        """The growth (bytes per hour) a leak must reach on a device of ``device_total_bytes``
        (:meth:`~stormwatch.growth.leak_min.LeakMin.for_device`: None for a share alone on an unknown device)."""
        return self.leak_min.for_device(device_total_bytes)


DEFAULT_GROWTH_SETTINGS = GrowthSettings()


def _fits(x: np.ndarray, y: np.ndarray, settings: GrowthSettings) -> list[Slopes]:
    """Every counter's fit over each trim's windows, whole and by halves, in one call per counter."""
    width, levels = settings.window_count, settings.warmup_trims + 1
    window = np.arange(width)
    masks = np.zeros((levels, 3, width), dtype=bool)
    for level in range(levels):
        start = width - width // 2**level
        middle = start + (width - start) // 2
        masks[level, _WHOLE] = window >= start
        masks[level, _EARLY] = (window >= start) & (window < middle)
        masks[level, _LATE] = window >= middle
    count = x.shape[0]
    xs = np.broadcast_to(x[:, None, None, :], (count, levels, 3, width)).reshape(-1, width)
    out = []
    for number in range(len(COUNTERS)):
        ys = np.where(masks[None], y[number][:, None, None, :], np.nan).reshape(-1, width)
        # per counter, shaped (ranks, trims + 1, 3): [rank, trim, whole/early/late]
        out.append(theil_sen(xs, ys, significance=settings.significance).reshaped((count, levels, 3)))
    return out


def _level(fit: Slopes, index: int, span_s: float, settings: GrowthSettings) -> tuple[int, bool, int]:
    """(the trim the figure comes from, whether growth there keeps its pace, the last trim that
    leaves enough windows and time): the first trim that keeps its pace, among those leaving enough;
    else the whole steady state, not paced."""
    width, chosen, paced, last = settings.window_count, 0, False, 0
    for level in range(settings.warmup_trims + 1):
        kept = width // 2**level
        if fit.points[index, level, _WHOLE] < settings.min_windows or span_s * kept / width < settings.min_span_s:
            break
        last = level
        early, late, whole = (fit.slope[index, level, part] for part in (_EARLY, _LATE, _WHOLE))
        # the later half grows at least nearly as fast as the earlier half and as the whole (a
        # staircase flat within both halves has a slope only across them: that is not a pace)
        if not paced and np.isfinite(early) and np.isfinite(late) and \
                late >= settings.min_late_share * max(early, whole):
            chosen, paced = level, True
    return chosen, paced, last


def _optional(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _gap(index: int, *, samples: int, steady: Steady, backwards: np.ndarray, total: float, steady_samples: int,
         span_s: float, judged: Slopes, settings: GrowthSettings) -> GrowthGap | None:
    if backwards[index]:
        return GrowthGap.CLOCK_BACKWARDS
    if not samples:  # nothing to judge: no device total would be the lesser reason
        return GrowthGap.TOO_FEW_SAMPLES
    if np.isnan(total):
        return GrowthGap.NO_DEVICE_TOTAL
    if not steady.has_counter[index]:
        return GrowthGap.NO_COUNTER
    if steady_samples < settings.min_samples:
        return GrowthGap.TOO_FEW_SAMPLES
    if span_s < settings.min_span_s:
        return GrowthGap.TOO_SHORT
    if judged.points[index, 0, _WHOLE] < settings.min_windows or not np.isfinite(judged.slope[index, 0, _WHOLE]):
        return GrowthGap.TOO_FEW_SAMPLES
    return None


def rank_growth(
    events: pd.DataFrame,
    present_ranks: Sequence[int],
    *,
    settings: GrowthSettings = DEFAULT_GROWTH_SETTINGS,
    clock_backwards_ranks: Collection[int] = frozenset(),
    device_totals_bytes: Mapping[int, int | None] | None = None,
) -> tuple[RankGrowth, ...]:
    """One :class:`RankGrowth` per rank of ``present_ranks``, in rank order, from ``events`` (the
    loader's events frame, or any frame with its ``rank``, ``event_type``, ``timestamp_ns``,
    ``device_id``, ``device_total_bytes`` and counter columns; ``pid`` when present);
    ``clock_backwards_ranks``: ranks whose clock is known to have gone backwards (the loader's
    :attr:`~stormwatch.load.loader.LoadResult.clock_backwards_ranks`), each given the gap
    ``CLOCK_BACKWARDS``; ``device_totals_bytes``: each rank's device total (None: a CPU rank or none
    recorded) when the caller has them already (:func:`~stormwatch.peers.job_facts.fleet_facts`, from
    the rank facts), else worked out from ``events``. See the module docstring for the method and the gaps."""
    ranks = np.unique(np.asarray([int(rank) for rank in present_ranks], dtype=np.int64))
    count = len(ranks)
    if not count:
        return ()
    all_ranks = events["rank"].to_numpy(dtype=np.int64)
    position = np.minimum(np.searchsorted(ranks, all_ranks), count - 1)
    codes = np.where(ranks[position] == all_ranks, position, -1)
    if device_totals_bytes is None:
        totals = device_totals(events, codes, count)
    else:  # reuse the rank facts' totals: a group-by less per job (bench/README.md, "Growth on every shape")
        totals = np.array([float(known) if (known := device_totals_bytes.get(int(rank))) and known > 0 else np.nan
                           for rank in ranks], dtype=np.float64)
    samples = sample_rows(events, codes, count)
    steady = steady_rows(samples, count, settings)
    backwards = steady.backwards | np.isin(ranks, np.fromiter(clock_backwards_ranks, dtype=np.int64))
    x, y = window_minima(samples, steady, count, settings)
    fits = dict(zip(COUNTERS, _fits(x, y, settings), strict=True))
    sizes = np.diff(samples.starts)
    seconds = samples.seconds
    out = []
    for index in range(count):
        total = float(totals[index])
        rows = (samples.starts[index], samples.starts[index + 1])
        duration = int(samples.stamps[rows[1] - 1] - samples.stamps[rows[0]]) if sizes[index] >= 2 else None
        steady_count = int(steady.end[index] - steady.first[index])
        span = float(seconds[steady.end[index] - 1] - seconds[steady.first[index]]) if steady_count else 0.0
        reserved_windows = fits[GrowthCounter.RESERVED].points[index, 0, _WHOLE]
        judged = GrowthCounter.RESERVED if reserved_windows >= settings.min_windows else GrowthCounter.ALLOCATED
        known_total = None if np.isnan(total) else int(total)
        leak_min = settings.leak_min_for(known_total)
        gap = _gap(index, samples=int(sizes[index]), steady=steady, backwards=backwards, total=total,
                   steady_samples=steady_count, span_s=span, judged=fits[judged], settings=settings)
        if gap is not None:
            out.append(RankGrowth(
                rank=int(ranks[index]), duration_ns=duration, allocated_bytes_per_hour=None,
                reserved_bytes_per_hour=None, judged_counter=None, low_bytes_per_hour=None, high_bytes_per_hour=None,
                confidence=None, leak=False, leak_min_bytes_per_hour=leak_min, device_total_bytes=known_total,
                capacity_after_start_s=None, gap=gap))
            continue
        fit = fits[judged]
        # a figure has a device total, so a threshold; inf (never a leak) only keeps the types honest
        threshold = math.inf if leak_min is None else leak_min
        level, paced, last = _level(fit, index, span, settings)
        at = (index, level, _WHOLE)
        slope, low, intercept = float(fit.slope[at]), float(fit.low[at]), float(fit.intercept[at])
        lasting = bool(fit.slope[index, last, _WHOLE] >= threshold)  # still leaking over the run's last part
        capacity = max(0.0, (total - intercept) / slope * S_PER_HOUR) if slope > 0 and np.isfinite(intercept) else None
        out.append(RankGrowth(
            rank=int(ranks[index]), duration_ns=duration,
            allocated_bytes_per_hour=_optional(fits[GrowthCounter.ALLOCATED].slope[at]),
            reserved_bytes_per_hour=_optional(fits[GrowthCounter.RESERVED].slope[at]),
            judged_counter=judged, low_bytes_per_hour=_optional(low), high_bytes_per_hour=_optional(fit.high[at]),
            confidence=float(fit.confidence[at]),
            # trimmed: a slow warm-up dominated the run, so the interval itself must clear the leak-min
            leak=bool(paced and lasting and low > (settings.trimmed_low_share * threshold if level else 0.0)
                      and slope >= threshold
                      and capacity is not None),
            leak_min_bytes_per_hour=leak_min, device_total_bytes=known_total, capacity_after_start_s=capacity,
            gap=None))
    return tuple(out)
