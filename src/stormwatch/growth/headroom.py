"""How much of its devices' memory a rank, a job and the fleet left unused.

A rank's *peak use* is its peak device use (``peak_device_used_bytes``: what the device reported in
use, the allocator's pool plus the CUDA context and anything else on the device), else, when the
tracker recorded no device counter, its peak reserved memory (``peak_reserved_bytes``: the
allocator's pool alone, so it understates use by the context's few hundred MiB). Against its
device's total:

* ``used_percent = peak use / device total × 100`` (may pass 100 when a counter overshoots);
* ``unused_gib_hours = max(total - peak use, 0) / GiB × duration / hour``: memory the rank held a
  device for and never used, over the rank's duration (first to last sample).

A job's used percent is that of its fullest rank: ranks of a job run on devices of one kind, so
the fullest rank says how much device the job needs; "under half" means every rank used under 50 %
of its device. A rank without a device total (CPU) or without a peak counts in neither figure;
one without a duration counts in the percentages but adds no GiB·hours.

Units: bytes, nanoseconds, GiB·hours (GiB = 2³⁰ bytes), percent in [0, ∞).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stormwatch.peers.rank_facts import RankFacts

GIB = 1 << 30
NS_PER_HOUR = 3_600_000_000_000
#: A job whose used percent is below this is listed as using under half of its devices.
UNDER_HALF_PERCENT = 50.0


@dataclass(frozen=True, kw_only=True, slots=True)
class RankHeadroom:
    """One rank's peak use against its device (None: no device total or no peak)."""

    rank: int
    peak_used_bytes: int | None
    device_total_bytes: int | None
    used_percent: float | None
    unused_gib_hours: float | None     # None also when the rank has no duration


@dataclass(frozen=True, kw_only=True, slots=True)
class JobHeadroom:
    """A job's ranks' headroom: ``used_percent`` of its fullest rank, ``unused_gib_hours`` summed."""

    ranks: tuple[RankHeadroom, ...]
    used_percent: float | None
    unused_gib_hours: float
    ranks_counted: int                 # ranks with a used percent


def peak_used_bytes(fact: RankFacts) -> int | None:
    """The rank's peak use: peak device use, else peak reserved (see the module docstring)."""
    return fact.peak_device_used_bytes if fact.peak_device_used_bytes is not None else fact.peak_reserved_bytes


def rank_headroom(fact: RankFacts, duration_ns: int | None) -> RankHeadroom:
    """``fact``'s headroom over ``duration_ns`` (first to last sample; None: unknown)."""
    peak, total = peak_used_bytes(fact), fact.device_total_bytes
    if peak is None or total is None or total <= 0:
        return RankHeadroom(rank=fact.rank, peak_used_bytes=peak, device_total_bytes=total,
                            used_percent=None, unused_gib_hours=None)
    unused = None if duration_ns is None else max(total - peak, 0) / GIB * duration_ns / NS_PER_HOUR
    return RankHeadroom(rank=fact.rank, peak_used_bytes=peak, device_total_bytes=total,
                        used_percent=peak / total * 100.0, unused_gib_hours=unused)


def job_headroom(facts: Sequence[RankFacts], durations_ns: Mapping[int, int | None]) -> JobHeadroom:
    """The headroom of a job's ranks ``facts``; ``durations_ns``: rank -> its duration (absent: unknown)."""
    ranks = tuple(rank_headroom(fact, durations_ns.get(fact.rank)) for fact in facts)
    percents = [rank.used_percent for rank in ranks if rank.used_percent is not None]
    return JobHeadroom(ranks=ranks, used_percent=max(percents) if percents else None,
                       unused_gib_hours=float(sum(rank.unused_gib_hours or 0.0 for rank in ranks)),
                       ranks_counted=len(percents))


def headroom_arrays(*, device_used: np.ndarray, reserved: np.ndarray, total: np.ndarray,
                    duration_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per rank row (float arrays, NaN = unknown): ``(used percent, unused GiB·hours)``, the rules of
    :func:`rank_headroom` over the history's columns, vectorised."""
    peak = np.where(np.isnan(device_used), reserved, device_used)
    known = np.isfinite(peak) & (total > 0)
    percent = np.where(known, peak / np.where(known, total, 1.0) * 100.0, np.nan)
    unused = np.where(known, np.maximum(total - peak, 0.0) / GIB * duration_ns / NS_PER_HOUR, np.nan)
    return percent, unused
