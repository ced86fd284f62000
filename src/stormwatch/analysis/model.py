"""``build_model``: a job's events to per-rank diagnostics and first-cause indicators.

Field names and meanings are those of stormlog 0.3.5's
``DistributedDiagnosticsModel``, ``RankDiagnosticsRow`` and ``AnomalyIndicator``,
so a tool written for the reference reads ``dataclasses.asdict`` of this model
unchanged; values equal the reference's on the same events. Schema-v4 data
(nullable counters) degrades as stormlog 0.4.3 does: counters a rank lacks give
``None`` rather than 0, a rank without allocator counters gets a device-memory
timeline (``timestamps_ns``, ``device_used``), and capability warnings explain why.

Bytes are bytes, times are ns since the epoch. Timelines are numpy arrays
(``int64``; ``object`` holding ``None`` where a v4 counter is missing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import pandas as pd

from stormwatch.analysis.attribution import PhaseIndex
from stormwatch.analysis.candidates import Candidate, RankEvents, earliest, most_severe, rank_candidates
from stormwatch.analysis.capabilities import capability_warnings
from stormwatch.analysis.collective import CollectiveConfig, CollectivePreset, attribute_collective
from stormwatch.analysis.columns import JobColumns, distinct_ints
from stormwatch.analysis.gaps import GapThresholds
from stormwatch.analysis.markers import TimelineMarker, derive_markers, spans_from_markers

DEFAULT_GAP_THRESHOLDS = GapThresholds()
NO_EVENTS_WARNING = "No telemetry events loaded."
WORLD_SIZE_WARNING = "Inconsistent world_size values detected; using the largest world_size seen."
#: No job runs more ranks; larger world sizes come from damaged records (see :func:`expected_ranks`).
MAX_WORLD_SIZE = 1 << 17


@dataclass(frozen=True)
class RankDiagnosticsRow:
    """One expected rank; ``availability`` is ``present`` or ``missing``."""

    rank: int
    availability: str
    samples: int
    allocated_delta_bytes: int | None
    reserved_delta_bytes: int | None
    hidden_gap_latest_bytes: int | None
    hidden_gap_peak_abs_bytes: int | None
    has_anomaly: bool
    first_anomaly_timestamp_ns: int | None = None
    first_anomaly_signal: str | None = None
    first_anomaly_phase_path: str | None = None


class IndicatorKind(StrEnum):
    """The two first causes a model names (stormlog's ``AnomalyIndicator.kind`` strings, which these
    equal): the rank whose anomaly came first, and the rank with the worst one."""

    EARLIEST = "earliest"
    MOST_SEVERE = "most_severe"


@dataclass(frozen=True)
class AnomalyIndicator:
    """A first cause of the job, of kind :class:`IndicatorKind` (equal to stormlog's kind strings)."""

    kind: IndicatorKind
    rank: int
    severity: str
    timestamp_ns: int
    signal: str
    details: str
    confidence: float | None = None
    reason_codes: tuple[str, ...] = ()
    phase_path: str | None = None


@dataclass(frozen=True)
class DiagnosticsModel:
    rows: tuple[RankDiagnosticsRow, ...]
    indicators: tuple[AnomalyIndicator, ...]
    expected_ranks: tuple[int, ...]
    present_ranks: tuple[int, ...]
    missing_ranks: tuple[int, ...]
    per_rank_timelines: dict[int, dict[str, np.ndarray]]
    warnings: tuple[str, ...] = ()
    markers_by_rank: dict[int, tuple[TimelineMarker, ...]] = field(default_factory=dict)


def _missing_row(rank: int, *, nullable: bool) -> RankDiagnosticsRow:
    """An expected rank without events: no counters, so 0.4.3's ``None`` (``nullable``,
    see :attr:`JobColumns.nullable_counters`) or 0.3.5's 0 bytes."""
    nothing = None if nullable else 0
    return RankDiagnosticsRow(rank=rank, availability="missing", samples=0, allocated_delta_bytes=nothing,
                              reserved_delta_bytes=nothing, hidden_gap_latest_bytes=nothing,
                              hidden_gap_peak_abs_bytes=nothing, has_anomaly=False)


def _delta(values: np.ndarray, present: np.ndarray, first: int, last: int) -> int | None:
    return int(values[last] - values[first]) if present[first] and present[last] else None


def _column(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """``values`` (a fresh array: gathered for this timeline), None where not ``present``."""
    if present.all():
        return values
    out = values.astype(object)
    out[~present] = None
    return out


def _rank_summary(columns: JobColumns, group: RankEvents, candidates: Sequence[Candidate]) -> RankDiagnosticsRow:
    samples = group.samples
    first_cause = earliest(candidates)
    # Without samples 0.3.5 reports 0 bytes and 0.4.3 None; with samples a counter a rank lacks is None.
    allocated = reserved = gap_latest = gap_peak = None if columns.nullable_counters or len(samples) else 0
    if len(samples):
        first, last = int(samples[0]), int(samples[-1])
        allocated = _delta(columns.allocated_bytes, columns.has_allocated, first, last)
        reserved = _delta(columns.reserved_bytes, columns.has_reserved, first, last)
        paired = samples[columns.has_used[samples] & columns.has_reserved[samples]]
        if len(paired):
            gaps = columns.gap_bytes[paired]
            gap_latest, gap_peak = int(gaps[-1]), int(np.abs(gaps).max())
    return RankDiagnosticsRow(
        rank=group.rank,
        availability="present",
        samples=len(samples),
        allocated_delta_bytes=allocated,
        reserved_delta_bytes=reserved,
        hidden_gap_latest_bytes=gap_latest,
        hidden_gap_peak_abs_bytes=gap_peak,
        has_anomaly=bool(candidates),
        first_anomaly_timestamp_ns=first_cause.timestamp_ns if first_cause else None,
        first_anomaly_signal=first_cause.signal if first_cause else None,
        first_anomaly_phase_path=first_cause.phase_path if first_cause else None,
    )


def _timeline(columns: JobColumns, samples: np.ndarray) -> dict[str, np.ndarray]:
    """The allocator timeline when any sample has an allocated counter, else device memory.
    A rank without samples gets 0.3.5's (empty) allocator timeline, or 0.4.3's device one."""
    allocator = columns.has_allocated[samples].any() if len(samples) else not columns.nullable_counters
    if allocator:
        paired = columns.has_used[samples] & columns.has_reserved[samples]
        return {
            "timestamps_ns": columns.timestamp_ns[samples],
            "allocated": _column(columns.allocated_bytes[samples], columns.has_allocated[samples]),
            "reserved": _column(columns.reserved_bytes[samples], columns.has_reserved[samples]),
            "gap": _column(columns.gap_bytes[samples], paired),
        }
    with_device = samples[columns.has_used[samples]]
    return {"timestamps_ns": columns.timestamp_ns[with_device], "device_used": columns.used_bytes[with_device]}


def _indicator(kind: IndicatorKind, candidate: Candidate) -> AnomalyIndicator:
    details = f"{candidate.details} Phase: {candidate.phase_path}." if candidate.phase_path else candidate.details
    return AnomalyIndicator(
        kind=kind,
        rank=candidate.rank,
        severity=candidate.severity.value,
        timestamp_ns=candidate.timestamp_ns,
        signal=candidate.signal,
        details=details,
        confidence=candidate.confidence,
        reason_codes=candidate.reason_codes,
        phase_path=candidate.phase_path,
    )


def _rank_groups(columns: JobColumns) -> dict[int, RankEvents]:
    return {
        rank: RankEvents(rank, events, events[columns.is_sample[events]])
        for rank, events in columns.rank_positions.items()
    }


def expected_ranks(ranks: np.ndarray, world_sizes: np.ndarray) -> list[int]:
    """Ranks present, plus every rank below the largest plausible world size (else the count present).

    World sizes above :data:`MAX_WORLD_SIZE` are ignored: a damaged record may claim
    ``2**63 - 1`` ranks, and listing them would exhaust memory.
    """
    present = distinct_ints(ranks).tolist()
    positive = world_sizes[(world_sizes > 0) & (world_sizes <= MAX_WORLD_SIZE)]
    world = int(positive.max()) if len(positive) else len(present)
    return sorted(set(present) | set(range(world)))


def _implausible_world_size_warnings(world_sizes: np.ndarray) -> list[str]:
    too_large = world_sizes[world_sizes > MAX_WORLD_SIZE]
    if not len(too_large):
        return []
    return [f"world_size {int(too_large.max())} is implausible (more than {MAX_WORLD_SIZE} ranks); "
            "world sizes that large are ignored when listing expected ranks."]


def build_model(
    events: pd.DataFrame,
    selected_ranks: set[int] | None = None,
    *,
    collective_preset: CollectivePreset | str = CollectivePreset.MEDIUM,
    gap_thresholds: GapThresholds = DEFAULT_GAP_THRESHOLDS,
) -> DiagnosticsModel:
    """Diagnose one job's events (a :class:`~stormwatch.LoadResult` ``events`` frame).

    ``selected_ranks`` keeps only those ranks in rows, rank lists, timelines and
    markers (candidates of other ranks are still computed but not reported).
    The phase spans behind the attributions are those of the model's own markers.
    """
    config = CollectiveConfig.preset(collective_preset)
    if events.empty:
        return DiagnosticsModel(rows=(), indicators=(), expected_ranks=(), present_ranks=(), missing_ranks=(),
                                per_rank_timelines={}, warnings=(NO_EVENTS_WARNING,))
    columns = JobColumns.from_events(events)
    groups = _rank_groups(columns)
    present = sorted(groups)
    expected = expected_ranks(columns.rank, columns.world_size)
    positive_sizes = columns.world_size[columns.world_size > 0]
    mixed = positive_sizes.size > 0 and int(positive_sizes.min()) != int(positive_sizes.max())
    warnings = [WORLD_SIZE_WARNING] if mixed else []
    warnings += _implausible_world_size_warnings(columns.world_size)
    warnings += capability_warnings(columns)
    if selected_ranks is not None:
        expected = [rank for rank in expected if rank in selected_ranks]
        present = [rank for rank in present if rank in selected_ranks]

    markers = derive_markers(events)
    phases = PhaseIndex(spans_from_markers(markers))
    collective = attribute_collective(columns, config=config, phases=phases)

    rows: list[RankDiagnosticsRow] = []
    timelines: dict[int, dict[str, np.ndarray]] = {}
    candidates: list[Candidate] = []
    for rank in expected:
        group = groups.get(rank)
        if group is None:
            rows.append(_missing_row(rank, nullable=columns.nullable_counters))
            continue
        found = rank_candidates(columns, group, collective, phases=phases, thresholds=gap_thresholds)
        rows.append(_rank_summary(columns, group, found))
        candidates.extend(found)
        timelines[rank] = _timeline(columns, group.samples)

    first, worst = earliest(candidates), most_severe(candidates)
    indicators = ((_indicator(IndicatorKind.EARLIEST, first), _indicator(IndicatorKind.MOST_SEVERE, worst))
                  if first and worst else ())
    return DiagnosticsModel(
        rows=tuple(rows),
        indicators=indicators,
        expected_ranks=tuple(expected),
        present_ranks=tuple(present),
        missing_ranks=tuple(sorted(set(expected) - set(present))),
        per_rank_timelines=timelines,
        warnings=tuple(warnings),
        markers_by_rank=_markers_by_rank(markers, present),
    )


def _markers_by_rank(markers: Sequence[TimelineMarker], ranks: Sequence[int]) -> dict[int, tuple[TimelineMarker, ...]]:
    grouped: dict[int, list[TimelineMarker]] = {rank: [] for rank in ranks}
    for marker in markers:
        targets = ranks if marker.rank is None else [marker.rank] if marker.rank in grouped else []
        for rank in targets:
            grouped[rank].append(marker)
    return {rank: tuple(values) for rank, values in grouped.items() if values}
