"""The job page's first causes: the detailed attempt's earliest and most-severe anomalies as cards, and
the one sentence the banner leads with.

The model names two first causes (``earliest``, ``most_severe``); when both are the same finding (same
rank, signal, severity, time and phase) they are one card, headed "Earliest and most severe anomaly".
Each card leads with its signal in plain words (:mod:`.signalview`; an OOM reads "Out of memory", with
what its OOM dump says when model.json has one), the rank with its host and device, and the time
since the job's start.

The banner's cause (:func:`lead_card`) is chosen as the fleet index chooses a row's: an OOM when one
of the causes is one, else the earliest when it is as severe as the most severe, else the most
severe, so a critical job never leads with a warning. Telemetry (phase paths, details, codes) stays
plain text; the template escapes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stormwatch.analysis.model import AnomalyIndicator, DiagnosticsModel, IndicatorKind
from stormwatch.reports.formatting import (
    NOT_AVAILABLE,
    NS_PER_S,
    format_confidence,
    format_elapsed_s,
    format_offset,
    format_utc_ns,
)
from stormwatch.reports.rankplaces import RankPlace
from stormwatch.reports.signalview import SignalView, is_oom, signal_view
from stormwatch.severity import Severity

SEVERITIES = tuple(severity.value for severity in Severity)
_LEVELS = {severity.value: severity.level for severity in Severity}
HEADINGS: dict[IndicatorKind, str] = {IndicatorKind.EARLIEST: "Earliest anomaly",
                                      IndicatorKind.MOST_SEVERE: "Most severe anomaly"}
BOTH_HEADING = "Earliest and most severe anomaly"


@dataclass(frozen=True)
class CauseCard:
    """One card: ``kinds`` the indicator kinds it stands for (both when they are one finding);
    ``severity`` one of :data:`SEVERITIES` or "other" (a CSS class); ``where`` ``gpu-node-00, GPU 3``
    or ""; ``since_start_s`` seconds since the job's start (None: no start known); ``oom_dump`` what
    the rank's OOM dump says, or ""."""

    kinds: tuple[IndicatorKind, ...]
    heading: str
    rank: int
    where: str
    signal: SignalView
    severity: str
    timestamp_ns: int
    since_start_s: float | None
    offset: str
    utc: str
    phase_path: str
    confidence: str
    reason_codes: tuple[str, ...]
    details: str
    oom_dump: str

    @property
    def kind_names(self) -> str:
        """The kinds as the card's ``data-kind``: ``earliest most_severe``."""
        return " ".join(kind.value for kind in self.kinds)

    @property
    def level(self) -> int:
        return _LEVELS.get(self.severity, 0)


def _text(value: str | None) -> str:
    return NOT_AVAILABLE if value is None or value == "" else value


def _same_finding(first: AnomalyIndicator, second: AnomalyIndicator) -> bool:
    return (first.rank, first.signal, first.severity, first.timestamp_ns, first.phase_path, first.details) == (
        second.rank, second.signal, second.severity, second.timestamp_ns, second.phase_path, second.details)


def _card(item: AnomalyIndicator, kinds: tuple[IndicatorKind, ...], *, model: DiagnosticsModel,
          places: Mapping[int, RankPlace], origin_ns: int | None, oom_text: Mapping[int, str]) -> CauseCard:
    oom = is_oom(item.signal, rank=item.rank, timestamp_ns=item.timestamp_ns, markers_by_rank=model.markers_by_rank)
    place = places.get(item.rank)
    return CauseCard(
        kinds=kinds,
        heading=BOTH_HEADING if len(kinds) > 1 else HEADINGS[kinds[0]],
        rank=item.rank,
        where="" if place is None else place.where(),
        signal=signal_view(item.signal, oom=oom),
        severity=item.severity if item.severity in SEVERITIES else "other",
        timestamp_ns=item.timestamp_ns,
        since_start_s=None if origin_ns is None else (item.timestamp_ns - origin_ns) / NS_PER_S,
        offset=format_offset(item.timestamp_ns, origin_ns),
        utc=format_utc_ns(item.timestamp_ns),
        phase_path=_text(item.phase_path),
        confidence=format_confidence(item.confidence),
        reason_codes=item.reason_codes,
        details=_text(item.details),
        oom_dump=oom_text.get(item.rank, "") if oom else "",
    )


def cause_cards(model: DiagnosticsModel, *, places: Mapping[int, RankPlace], origin_ns: int | None,
                oom_text: Mapping[int, str]) -> tuple[CauseCard, ...]:
    """The model's first causes as cards, earliest first; one card when both are the same finding."""
    found: dict[IndicatorKind, AnomalyIndicator] = {}
    for item in model.indicators:
        found.setdefault(item.kind, item)
    earliest, severe = found.get(IndicatorKind.EARLIEST), found.get(IndicatorKind.MOST_SEVERE)
    groups: list[tuple[AnomalyIndicator, tuple[IndicatorKind, ...]]]
    if earliest is not None and severe is not None and _same_finding(earliest, severe):
        groups = [(earliest, (IndicatorKind.EARLIEST, IndicatorKind.MOST_SEVERE))]
    else:
        groups = [(item, (kind,)) for kind, item in ((IndicatorKind.EARLIEST, earliest),
                                                      (IndicatorKind.MOST_SEVERE, severe)) if item is not None]
    return tuple(_card(item, kinds, model=model, places=places, origin_ns=origin_ns, oom_text=oom_text)
                 for item, kinds in groups)


def lead_card(cards: Sequence[CauseCard]) -> CauseCard | None:
    """The cause the banner leads with (the rule in the module docstring)."""
    oom = next((card for card in cards if card.signal.oom), None)
    if oom is not None:
        return oom
    earliest = next((card for card in cards if IndicatorKind.EARLIEST in card.kinds), None)
    severe = next((card for card in cards if IndicatorKind.MOST_SEVERE in card.kinds), None)
    if earliest is not None and (severe is None or earliest.level >= severe.level):
        return earliest
    return severe


def cause_sentence(card: CauseCard, *, into: str = "the job") -> str:
    """What follows the signal's title in the banner: ``on rank 3 (gpu-node-01, GPU 3), 20.0 s into the
    job, in train / backward`` (``into``: ``attempt 1 of 2`` when the job had several)."""
    rank = f"on rank {card.rank}" + (f" ({card.where})" if card.where else "")
    if card.since_start_s is not None and card.since_start_s >= 0:
        when = f"{format_elapsed_s(card.since_start_s)} into {into}"
    else:
        when = f"at {card.utc}"
    phase = "" if card.phase_path == NOT_AVAILABLE else f", in {card.phase_path}"
    return f"{rank}, {when}{phase}"
