"""Collective (NCCL) attribution: hidden-gap spikes explained by communication.

stormlog 0.3.5's heuristic, vectorised. Per rank (samples in time order, at
least ``min_samples_per_rank``), a sample is a *spike* when its positive hidden
gap is significant (``>= min_gap_bytes`` or ``>= min_gap_ratio`` of the device
total) and its robust z-score against the rank's whole series (median/MAD,
else mean/std) reaches ``robust_zscore_threshold``. The rank's median and MAD
are computed once (the reference recomputes them per spike: quadratic).

A spike is scored from four signals: a collective-token event of the same rank
within ``marker_window_ns``, the share of other ranks spiking within
``synchrony_window_ns``, the z-score, and the allocator/device divergence;
with penalties for a missing marker, a lone rank and an unknown device total.
Spikes that reach ``min_confidence`` become intervals padded by
``interval_padding_ns``; overlapping intervals of one rank merge.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, IntFlag, StrEnum
from functools import cache

import numpy as np

from stormwatch.analysis.attribution import PhaseAttribution, PhaseIndex, merge_attributions
from stormwatch.analysis.columns import Coded, JobColumns
from stormwatch.analysis.rounding import round_like_python


class CollectivePreset(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class CollectiveClass(IntEnum):
    """Ordered so that a merge keeps the strongest."""

    SUSPECT = 0
    LIKELY = 1
    CONFIDENT = 2

    @property
    def label(self) -> str:
        return f"collective_{self.name.lower()}"


@dataclass(frozen=True)
class CollectiveConfig:
    """Thresholds of one preset; times in ns, ratios as fractions of device total."""

    min_samples_per_rank: int = 6
    min_gap_bytes: int = 128 * 2**20
    min_gap_ratio: float = 0.04
    robust_zscore_threshold: float = 2.5
    marker_window_ns: int = 150_000_000
    interval_padding_ns: int = 120_000_000
    synchrony_window_ns: int = 120_000_000
    min_synchrony_ratio: float = 0.5
    min_confidence: float = 0.5

    def __post_init__(self) -> None:
        problems = [
            name
            for name, ok in (
                ("min_samples_per_rank >= 3", self.min_samples_per_rank >= 3),
                ("min_gap_bytes >= 0", self.min_gap_bytes >= 0),
                ("min_gap_ratio >= 0", self.min_gap_ratio >= 0),
                ("robust_zscore_threshold > 0", self.robust_zscore_threshold > 0),
                ("marker_window_ns >= 0", self.marker_window_ns >= 0),
                ("interval_padding_ns >= 0", self.interval_padding_ns >= 0),
                ("synchrony_window_ns >= 0", self.synchrony_window_ns >= 0),
                ("0 <= min_synchrony_ratio <= 1", 0 <= self.min_synchrony_ratio <= 1),
                ("0 <= min_confidence <= 1", 0 <= self.min_confidence <= 1),
            )
            if not ok
        ]
        if problems:
            raise ValueError("invalid collective attribution config: " + ", ".join(problems))

    @classmethod
    def preset(cls, name: CollectivePreset | str) -> CollectiveConfig:
        return PRESETS[CollectivePreset(str(name).strip().lower())]


PRESETS: dict[CollectivePreset, CollectiveConfig] = {
    CollectivePreset.LOW: CollectiveConfig(
        min_samples_per_rank=8,
        min_gap_bytes=256 * 2**20,
        min_gap_ratio=0.06,
        robust_zscore_threshold=3.0,
        marker_window_ns=120_000_000,
        interval_padding_ns=100_000_000,
        synchrony_window_ns=100_000_000,
        min_synchrony_ratio=0.6,
        min_confidence=0.7,
    ),
    CollectivePreset.MEDIUM: CollectiveConfig(),
    CollectivePreset.HIGH: CollectiveConfig(
        min_samples_per_rank=5,
        min_gap_bytes=64 * 2**20,
        min_gap_ratio=0.025,
        robust_zscore_threshold=1.8,
        marker_window_ns=180_000_000,
        interval_padding_ns=160_000_000,
        synchrony_window_ns=180_000_000,
        min_synchrony_ratio=0.34,
        min_confidence=0.35,
    ),
}


@dataclass(frozen=True)
class CollectiveResult:
    """A communication-attributed interval of one rank (ns); ``confidence`` rounded to 3 places."""

    rank: int
    interval_start_ns: int
    interval_end_ns: int
    classification: CollectiveClass
    confidence: float
    reason_codes: tuple[str, ...]
    attribution: PhaseAttribution | None


@dataclass(frozen=True)
class _Spikes:
    """One entry per spike, ranks in first-sample order, time order within a rank."""

    rank: np.ndarray
    position: np.ndarray  # index into JobColumns
    timestamp_ns: np.ndarray
    gap_bytes: np.ndarray
    gap_ratio: np.ndarray  # NaN: device total unknown
    zscore: np.ndarray  # rounded to 4 places, as the reference stores it
    marker_hits: np.ndarray
    marker_first_ns: np.ndarray
    marker_last_ns: np.ndarray


def _median(values: np.ndarray) -> float:
    """``np.median`` of a non-empty array without NaN, by one partition (``np.median``
    partitions at both middle places); the same float."""
    middle = len(values) // 2
    parted = np.partition(values, middle)
    high = float(parted[middle])
    return high if len(values) % 2 else (float(parted[:middle].max()) + high) / 2


def _robust_zscores(positive: np.ndarray, values: np.ndarray) -> np.ndarray:
    median = _median(positive)
    mad = _median(np.abs(positive - median))
    if mad > 0:
        return np.maximum(0.0, 0.6745 * (values - median) / mad)
    std = float(np.std(positive, ddof=1))
    if std > 0:
        return np.maximum(0.0, (values - float(np.mean(positive))) / std)
    return np.zeros(len(values))


def _detect(columns: JobColumns, usable: np.ndarray, config: CollectiveConfig) -> _Spikes | None:
    per_rank = {}
    for rank, events in columns.rank_positions.items():
        mine = events[usable[events] & columns.is_sample[events]]
        if len(mine):
            per_rank[rank] = mine
    if not per_rank:
        return None
    marker_positions = np.flatnonzero(usable & columns.collective_marker)
    parts: list[tuple[np.ndarray, ...]] = []
    for rank in sorted(per_rank, key=lambda rank: int(per_rank[rank][0])):  # in order of first sample
        mine = per_rank[rank]
        if len(mine) < config.min_samples_per_rank:
            continue
        gap = np.maximum(0, columns.gap_bytes[mine])
        known = columns.has_total[mine] & (columns.total_bytes[mine] > 0)
        ratio = np.full(len(mine), np.nan)
        ratio[known] = np.abs(gap[known]) / columns.total_bytes[mine][known]
        significant = (known & (ratio >= config.min_gap_ratio)) | (gap >= config.min_gap_bytes)
        if not significant.any():
            continue
        positive = gap.astype(np.float64)
        picked = np.flatnonzero(significant)
        zscores = _robust_zscores(positive, positive[picked])
        keep = zscores >= config.robust_zscore_threshold
        picked, zscores = picked[keep], zscores[keep]
        if len(picked) == 0:
            continue
        stamps = columns.timestamp_ns[mine[picked]]
        markers = np.sort(columns.timestamp_ns[marker_positions[columns.rank[marker_positions] == rank]])
        low = np.searchsorted(markers, stamps - config.marker_window_ns, side="left")
        high = np.searchsorted(markers, stamps + config.marker_window_ns, side="right")
        hits = high - low
        first = np.where(hits > 0, markers[np.minimum(low, len(markers) - 1)] if len(markers) else stamps, stamps)
        last = np.where(hits > 0, markers[np.maximum(high - 1, 0)] if len(markers) else stamps, stamps)
        rounded = round_like_python(zscores, 4)
        parts.append((np.full(len(picked), rank), mine[picked], stamps, gap[picked], ratio[picked], rounded,
                      hits, first, last))
    if not parts:
        return None
    return _Spikes(*(np.concatenate(column) for column in zip(*parts, strict=True)))


def _synchronised_ranks(spikes: _Spikes, window_ns: int) -> np.ndarray:
    """For each spike, how many ranks (its own included) spike within ``window_ns`` of it."""
    count = np.zeros(len(spikes.rank), dtype=np.int64)
    for rank in np.unique(spikes.rank):
        stamps = np.sort(spikes.timestamp_ns[spikes.rank == rank])
        low = np.searchsorted(stamps, spikes.timestamp_ns - window_ns, side="left")
        high = np.searchsorted(stamps, spikes.timestamp_ns + window_ns, side="right")
        count += high > low
    return count


def attribute_collective(
    columns: JobColumns, *, config: CollectiveConfig, phases: PhaseIndex
) -> CollectiveIntervals:
    """Communication-attributed intervals, by rank then start time."""
    usable = columns.allocator_complete
    if not usable.any():
        return NO_INTERVALS
    spikes = _detect(columns, usable, config)
    if spikes is None:
        return NO_INTERVALS
    positive_ws = columns.world_size[usable & (columns.world_size > 0)]
    world = int(positive_ws.max()) if len(positive_ws) else max(len(np.unique(columns.rank[usable])), 1)
    trace_start_ns = max(0, int(columns.timestamp_ns[np.flatnonzero(usable)[0]]))

    synced = np.maximum(_synchronised_ranks(spikes, config.synchrony_window_ns), 1)
    synchrony = np.zeros(len(synced)) if world <= 1 else np.minimum(1.0, (synced - 1) / (world - 1))
    z_strength = np.minimum(1.0, spikes.zscore / config.robust_zscore_threshold)
    bytes_strength = (
        np.minimum(1.0, spikes.gap_bytes / config.min_gap_bytes) if config.min_gap_bytes > 0 else np.ones(len(synced))
    )
    ratio_strength = (
        np.minimum(1.0, np.nan_to_num(spikes.gap_ratio, nan=0.0) / config.min_gap_ratio)
        if config.min_gap_ratio > 0
        else np.ones(len(synced))
    )
    divergence = np.maximum(bytes_strength, ratio_strength)
    marked = spikes.marker_hits > 0
    lone = (synced <= 1) | (world <= 1)
    confidence = np.zeros(len(synced))
    confidence = confidence + np.where(marked, 0.34, 0.0)
    confidence = confidence + 0.34 * synchrony
    confidence = confidence + 0.16 * z_strength
    confidence = confidence + 0.16 * divergence
    confidence = np.where(marked, confidence, confidence - 0.15)
    confidence = np.where(lone, confidence - 0.15, confidence)
    confidence = np.where(np.isnan(spikes.gap_ratio), confidence - 0.05, confidence)
    confidence = np.maximum(0.0, np.minimum(1.0, confidence))
    rounded = round_like_python(confidence, 3)
    keep = np.flatnonzero((confidence > 0) & (rounded >= config.min_confidence))
    if len(keep) == 0:
        return NO_INTERVALS

    start = np.maximum(
        max(0, trace_start_ns),
        np.minimum(spikes.marker_first_ns, spikes.timestamp_ns) - config.interval_padding_ns,
    )
    end = np.maximum(spikes.marker_last_ns, spikes.timestamp_ns) + config.interval_padding_ns
    classes = np.where(confidence >= 0.8, 2, np.where(confidence >= 0.6, 1, 0))
    bits = (
        np.where(marked, _Reason.MARKED, _Reason.WEAK_MARKER)
        | np.where(synchrony >= config.min_synchrony_ratio, _Reason.SYNCHRONOUS, 0)
        | np.where(divergence >= 0.5, _Reason.DIVERGENT, 0)
        | np.where(lone, _Reason.LONE, 0)
    ).astype(np.int64)
    order = keep[np.lexsort((start[keep], spikes.rank[keep]))]
    return _merge(order, spikes, start, end, classes, rounded, bits, columns.session_id, phases)


class _Reason(IntFlag):
    """A spike's reasons as bits, so that a merged interval's reasons are one OR."""

    MARKED = 1
    WEAK_MARKER = 2
    SYNCHRONOUS = 4
    DIVERGENT = 8
    LONE = 16


_REASON_CODES: dict[_Reason, tuple[str, ...]] = {
    _Reason.MARKED: ("marker_collective_token", "marker_spike_overlap"),
    _Reason.WEAK_MARKER: ("weak_marker_signal",),
    _Reason.SYNCHRONOUS: ("cross_rank_synchrony",),
    _Reason.DIVERGENT: ("allocator_device_divergence",),
    _Reason.LONE: ("single_rank_only",),
}


@cache
def _reason_codes(bits: int) -> tuple[str, ...]:
    """The sorted reason codes of ``bits`` (every spike is a statistical outlier)."""
    codes = {"gap_spike_statistical_outlier"}
    for flag, names in _REASON_CODES.items():
        if bits & flag:
            codes.update(names)
    return tuple(sorted(codes))


def _group_starts(ranks: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Where each merged interval begins, for intervals sorted by rank then start.

    An interval opens a new group when its rank differs from the previous one or it
    starts after every earlier interval of its rank has ended (touching intervals
    merge): within a rank, the running maximum of ends is the open group's end.
    """
    size = len(ranks)
    opens = np.ones(size, dtype=bool)
    if size < 2:
        return np.flatnonzero(opens)
    bounds = [0, *(np.flatnonzero(ranks[1:] != ranks[:-1]) + 1).tolist(), size]
    for low, high in zip(bounds[:-1], bounds[1:], strict=True):
        reach = np.maximum.accumulate(end[low:high])
        opens[low + 1 : high] = start[low + 1 : high] > reach[:-1]
    return np.flatnonzero(opens)


def _merge(
    order: np.ndarray,
    spikes: _Spikes,
    start: np.ndarray,
    end: np.ndarray,
    classes: np.ndarray,
    confidence: np.ndarray,
    reason_bits: np.ndarray,
    sessions: Coded,
    phases: PhaseIndex,
) -> CollectiveIntervals:
    """Merge each rank's overlapping intervals (``order``: by rank, then start)."""
    ranks = spikes.rank[order]
    starts = _group_starts(ranks, start[order], end[order])
    return CollectiveIntervals(
        rank=ranks[starts],
        start_ns=np.minimum.reduceat(start[order], starts),
        end_ns=np.maximum.reduceat(end[order], starts),
        classification=np.maximum.reduceat(classes[order], starts),
        confidence=np.maximum.reduceat(confidence[order], starts),
        reason_bits=np.bitwise_or.reduceat(reason_bits[order], starts),
        members=tuple(np.split(order, starts[1:])),
        spikes=spikes,
        sessions=sessions,
        phases=phases,
    )


@dataclass(frozen=True, eq=False)
class CollectiveIntervals:
    """A job's merged communication-attributed intervals, as arrays: one entry per
    interval, by rank then start (ns); ``confidence`` rounded to 3 places.

    :meth:`result` materialises one interval with its phase attribution, so that
    only intervals that can become a first cause pay for phase resolution.
    """

    rank: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    classification: np.ndarray  # CollectiveClass values
    confidence: np.ndarray
    reason_bits: np.ndarray
    members: tuple[np.ndarray, ...]  # per interval, its spikes (indices into ``spikes``)
    spikes: _Spikes | None = None
    sessions: Coded | None = None
    phases: PhaseIndex | None = None

    def __len__(self) -> int:
        return len(self.rank)

    def of_rank(self, rank: int) -> np.ndarray:
        """Indices of the rank's intervals, in start order."""
        return np.flatnonzero(self.rank == rank)

    def result(self, index: int) -> CollectiveResult:
        rank = int(self.rank[index])
        return CollectiveResult(
            rank=rank,
            interval_start_ns=int(self.start_ns[index]),
            interval_end_ns=int(self.end_ns[index]),
            classification=CollectiveClass(int(self.classification[index])),
            confidence=float(self.confidence[index]),
            reason_codes=_reason_codes(int(self.reason_bits[index])),
            attribution=self._attribution(index, rank),
        )

    def _attribution(self, index: int, rank: int) -> PhaseAttribution | None:
        spikes, sessions, phases = self.spikes, self.sessions, self.phases
        if spikes is None or sessions is None or phases is None or not phases:
            return None
        return merge_attributions(
            phases.resolve(int(spikes.timestamp_ns[i]), session_id=str(sessions.at(int(spikes.position[i]))),
                           rank=rank)
            for i in self.members[index].tolist()
        )


_EMPTY_INTS = np.zeros(0, dtype=np.int64)
NO_INTERVALS = CollectiveIntervals(rank=_EMPTY_INTS, start_ns=_EMPTY_INTS, end_ns=_EMPTY_INTS,
                                   classification=_EMPTY_INTS, confidence=np.zeros(0), reason_bits=_EMPTY_INTS,
                                   members=())
