"""Anomaly candidates of one rank, in stormlog's order, reduced to those that can win.

The reference lists every alert, every gap-ratio breach, every gap finding and
every collective interval of a rank, then picks the earliest (ties: first
listed) and the most severe (ties: earliest, then first listed). Only a few of
them can ever be picked: the first alert overall and the first of each alert
severity, the first breach (breaches are all warnings), every gap finding, and
the earliest and the most severe collective interval. Keeping just those, in
the same relative order, picks the same winners without a Python object per
breaching sample or interval; phase paths are resolved for the kept ones only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stormwatch.analysis.attribution import PhaseAttribution, PhaseIndex
from stormwatch.analysis.capabilities import fragmentation_ratios
from stormwatch.analysis.collective import CollectiveIntervals, CollectiveResult
from stormwatch.analysis.columns import JobColumns
from stormwatch.analysis.gaps import GapThresholds, classify_gaps
from stormwatch.analysis.rounding import round_like_python
from stormwatch.severity import Severity

ALERT_SEVERITY = {"warning": Severity.WARNING, "critical": Severity.CRITICAL, "error": Severity.CRITICAL}


@dataclass(frozen=True)
class Candidate:
    """One possible first cause; ``timestamp_ns`` in ns since the epoch."""

    rank: int
    severity: Severity
    timestamp_ns: int
    signal: str
    details: str
    confidence: float | None = None
    reason_codes: tuple[str, ...] = ()
    phase_path: str | None = None


def earliest(candidates: Sequence[Candidate]) -> Candidate | None:
    return min(candidates, key=lambda item: item.timestamp_ns, default=None)


def most_severe(candidates: Sequence[Candidate]) -> Candidate | None:
    return min(candidates, key=lambda item: (-item.severity.level, item.timestamp_ns), default=None)


@dataclass(frozen=True)
class RankEvents:
    """Positions (into :class:`JobColumns`, time order) of one rank's events and samples."""

    rank: int
    events: np.ndarray
    samples: np.ndarray

    @property
    def anchor(self) -> int:
        """Position of the first sample, else of the first event: where undated findings land."""
        return int(self.samples[0] if len(self.samples) else self.events[0])


def _phase_path(columns: JobColumns, phases: PhaseIndex, position: int, rank: int) -> str | None:
    if not phases:
        return None
    attribution = phases.resolve(
        int(columns.timestamp_ns[position]),
        session_id=str(columns.session_id.at(position)),
        rank=rank,
        metadata=columns.metadata[position],
    )
    return attribution.summary() if attribution is not None else None


def _alerts(columns: JobColumns, phases: PhaseIndex, rank: RankEvents) -> list[Candidate]:
    positions = rank.events[columns.is_alert[rank.events]]
    if not len(positions):
        return []
    kinds = columns.event_type.codes[positions]
    _, first_of_kind = np.unique(kinds, return_index=True)
    severities = {index: ALERT_SEVERITY[str(columns.event_type.values[kinds[index]])] for index in first_of_kind}
    first_of_level: dict[Severity, int] = {}
    for index in sorted(severities):
        first_of_level.setdefault(severities[index], index)
    out = []
    for index in sorted({0, *first_of_level.values()}):
        position = int(positions[index])
        kind = str(columns.event_type.values[kinds[index]])
        context = columns.context.at(position)
        out.append(Candidate(
            rank=rank.rank,
            severity=severities[index],
            timestamp_ns=int(columns.timestamp_ns[position]),
            signal=f"alert:{kind}",
            details=context if context else "Alert event",
            phase_path=_phase_path(columns, phases, position, rank.rank),
        ))
    return out


def _breaches(columns: JobColumns, samples: np.ndarray, ratio: float) -> np.ndarray:
    known = columns.has_total[samples] & (columns.total_bytes[samples] > 0)
    known &= columns.has_used[samples] & columns.has_reserved[samples]
    where = samples[known]
    ratios = np.abs(columns.gap_bytes[where]) / columns.total_bytes[where]
    return where[ratios >= ratio]


def rank_candidates(
    columns: JobColumns,
    rank: RankEvents,
    collective: CollectiveIntervals,
    *,
    phases: PhaseIndex,
    thresholds: GapThresholds,
) -> list[Candidate]:
    """The rank's candidates that can become its or the job's first cause, in reference order."""
    out = _alerts(columns, phases, rank)
    breaches = _breaches(columns, rank.samples, thresholds.gap_ratio)
    first_breach_ns: int | None = None
    if len(breaches):
        position = int(breaches[0])
        first_breach_ns = int(columns.timestamp_ns[position])
        ratio = abs(int(columns.gap_bytes[position])) / int(columns.total_bytes[position])
        out.append(Candidate(rank=rank.rank, severity=Severity.WARNING, timestamp_ns=first_breach_ns,
                             signal="gap_ratio_breach",
                             details=f"hidden gap reached {ratio:.1%} of device memory",
                             phase_path=_phase_path(columns, phases, position, rank.rank)))
    fallback_ns = first_breach_ns or int(columns.timestamp_ns[rank.anchor])
    usable = rank.samples[
        columns.allocator_complete[rank.samples]
        & columns.has_total[rank.samples]
        & (columns.total_bytes[rank.samples] > 0)
    ]
    findings = classify_gaps(
        columns.timestamp_ns[usable],
        columns.gap_bytes[usable],
        totals_bytes=columns.total_bytes[usable],
        fragmentation=fragmentation_ratios(columns, usable),
        thresholds=thresholds,
    )
    for finding in findings:
        position = int(usable[finding.position])
        out.append(Candidate(
            rank=rank.rank, severity=finding.severity, timestamp_ns=int(columns.timestamp_ns[position]) or fallback_ns,
            signal=f"gap:{finding.classification.value}", details=finding.description,
            phase_path=_phase_path(columns, phases, position, rank.rank),
        ))
    anchor_ns = int(columns.timestamp_ns[rank.anchor])
    for index in _collective_winners(collective, rank.rank, anchor_ns):
        out.append(_collective_candidate(collective.result(index), anchor_ns))
    return out


def _collective_severity(confidence: float) -> Severity:
    rounded = round(confidence, 3)
    return Severity.CRITICAL if rounded >= 0.8 else Severity.WARNING if rounded >= 0.6 else Severity.INFO


def _collective_winners(collective: CollectiveIntervals, rank: int, anchor_ns: int) -> list[int]:
    """The rank's intervals that can win, in their order: the earliest (first on ties) and
    the most severe (then earliest, then first). Any other interval loses both races
    to one of these, which is listed before it, so the winners stay the same."""
    indices = collective.of_rank(rank)
    if not len(indices):
        return []
    starts_ns = np.maximum(collective.start_ns[indices], anchor_ns)
    rounded = round_like_python(collective.confidence[indices], 3)
    levels = np.select([rounded >= 0.8, rounded >= 0.6], [Severity.CRITICAL.level, Severity.WARNING.level],
                       Severity.INFO.level)
    earliest_index = int(indices[np.argmin(starts_ns)])  # argmin and lexsort keep the first of ties
    severe_index = int(indices[np.lexsort((starts_ns, -levels))[0]])
    return sorted({earliest_index, severe_index})


def _collective_candidate(result: CollectiveResult, anchor_ns: int) -> Candidate:
    confidence = round(result.confidence, 3)
    severity = _collective_severity(result.confidence)
    reasons = ", ".join(result.reason_codes) or "none"
    attribution: PhaseAttribution | None = result.attribution
    return Candidate(
        rank=result.rank,
        severity=severity,
        timestamp_ns=max(result.interval_start_ns, anchor_ns),
        signal=f"collective:{result.classification.label}",
        details=f"Hidden-memory spike attributed to collective communication (confidence {confidence:.2f}; "
        f"reasons: {reasons}).",
        confidence=confidence,
        reason_codes=result.reason_codes,
        phase_path=attribution.summary() if attribution is not None else None,
    )
