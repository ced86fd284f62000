"""model.json timeline markers as chart marks and event-table rows.

``model.markers_by_rank`` maps a rank to stormlog ``TimelineMarker`` records: points
(alerts, OOM, collector, lifecycle; ``end_ns`` None) and phase intervals. Labels and
metadata are telemetry: kept as plain text here, escaped by the templates.
``kind``/``severity`` become CSS classes, so only known values pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from stormwatch.analysis.markers import MarkerKind, TimelineMarker
from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.reports.fields import as_list
from stormwatch.reports.formatting import format_offset
from stormwatch.reports.signalview import SignalView, marker_signal
from stormwatch.reports.timelines import TimeFrame
from stormwatch.severity import Severity

KNOWN_KINDS = tuple(kind.value for kind in MarkerKind)
KNOWN_SEVERITIES = tuple(severity.value for severity in Severity)
METADATA_TEXT_LIMIT = 240
_PRIORITY = {(MarkerKind.OOM.value, Severity.CRITICAL.value): 6, (MarkerKind.ALERT.value, Severity.CRITICAL.value): 5,
             (MarkerKind.OOM.value, Severity.WARNING.value): 5, (MarkerKind.ALERT.value, Severity.WARNING.value): 4,
             (MarkerKind.COLLECTOR.value, Severity.WARNING.value): 3}


@dataclass(frozen=True)
class MarkerView:
    """A point marker of one rank; ``start_s`` seconds since job start."""

    rank: int
    start_ns: int
    start_s: float
    kind: str  # one of KNOWN_KINDS or "other"
    severity: str  # one of KNOWN_SEVERITIES or "other"
    label: str
    metadata_text: str
    offset: str  # "+2.000 s"
    event_type: str | None = None  # the telemetry event type (an alert's ``alert:<type>`` signal)

    @property
    def priority(self) -> int:
        return _PRIORITY.get((self.kind, self.severity), 2 if self.kind in (MarkerKind.ALERT, MarkerKind.OOM) else 1)

    @property
    def tag(self) -> str:
        return "OOM" if self.kind == MarkerKind.OOM else ""

    @property
    def title(self) -> str:
        text = f"{self.label} ({self.kind}, {self.severity}) at {self.offset} on rank {self.rank}"
        return f"{text}; metadata {self.metadata_text}" if self.metadata_text else text


@dataclass(frozen=True)
class PhaseView:
    """A phase interval of one rank; ``depth`` 1 for a top-level phase."""

    start_s: float
    end_s: float
    depth: int
    title: str


@dataclass(frozen=True)
class RankMarks:
    points: tuple[MarkerView, ...]
    phases: tuple[PhaseView, ...]


def _known(value: Any, allowed: tuple[str, ...]) -> str:
    return value if isinstance(value, str) and value in allowed else "other"


def metadata_text(metadata: Any) -> str:
    """Marker metadata as compact JSON text (truncated), for display as text."""
    if not metadata:
        return ""
    try:
        text = orjson.dumps(metadata, default=str, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        text = str(metadata)
    return text if len(text) <= METADATA_TEXT_LIMIT else text[: METADATA_TEXT_LIMIT - 1] + "…"


def _depth(marker: TimelineMarker) -> int:
    path = as_list(marker.metadata.get("phase_path"))
    if path:
        return len(path)
    return marker.label.count(" / ") + 1


def rank_marks(model: DiagnosticsModel, frame: TimeFrame, *, oom_text: Mapping[int, str] | None = None
               ) -> dict[int, RankMarks]:
    """Every rank's point markers and phases, in time order; ``oom_text``: by rank, what its OOM
    flight-recorder dump says, which labels that rank's OOM markers."""
    out: dict[int, RankMarks] = {}
    said = oom_text or {}
    for rank, markers in model.markers_by_rank.items():
        points, phases = [], []
        for marker in markers:
            start_ns, end_ns, label = marker.start_ns, marker.end_ns, marker.label
            kind = _known(marker.kind, KNOWN_KINDS)
            if kind == MarkerKind.PHASE and end_ns is not None:
                duration = format_offset(end_ns, start_ns).lstrip("+")
                phases.append(PhaseView(start_s=frame.seconds(start_ns), end_s=frame.seconds(end_ns),
                                        depth=_depth(marker),
                                        title=f"{label} from {format_offset(start_ns, frame.origin_ns)}, {duration}"))
                continue
            if kind == MarkerKind.OOM and rank in said:
                label = said[rank]
            points.append(MarkerView(
                rank=rank, start_ns=start_ns, start_s=frame.seconds(start_ns), kind=kind,
                severity=_known(marker.severity, KNOWN_SEVERITIES), label=label,
                metadata_text=metadata_text(marker.metadata), offset=format_offset(start_ns, frame.origin_ns),
                event_type=marker.event_type,
            ))
        out[rank] = RankMarks(tuple(sorted(points, key=lambda m: m.start_ns)),
                              tuple(sorted(phases, key=lambda p: p.start_s)))
    return out


@dataclass(frozen=True)
class EventRow:
    """One row of the events table: a point marker, with every rank it was seen on; ``signal``: the
    finding it stands for (an OOM, an alert), None for collector events."""

    offset: str
    ranks: str
    kind: str
    severity: str
    label: str
    metadata_text: str
    signal: SignalView | None = None


def event_rows(
    marks: Mapping[int, RankMarks], *, origin_ns: int | None, limit: int
) -> tuple[tuple[EventRow, ...], int]:
    """Alert, OOM and collector markers of all ranks (lifecycle left out), time order, at most
    ``limit`` rows (the most important first when over it), and how many were left out."""
    grouped: dict[tuple[int, str, str, str, str, str], list[int]] = {}
    for rank, marks_of_rank in marks.items():
        for point in marks_of_rank.points:
            if point.kind == MarkerKind.LIFECYCLE:
                continue
            key = (point.start_ns, point.kind, point.severity, point.label, point.metadata_text,
                   point.event_type or "")
            grouped.setdefault(key, []).append(rank)
    items = sorted(grouped.items(), key=lambda item: item[0][0])
    omitted = max(0, len(items) - limit)
    if omitted:
        kept = sorted(items, key=lambda item: (-_PRIORITY.get((item[0][1], item[0][2]), 0), item[0][0]))[:limit]
        items = sorted(kept, key=lambda item: item[0][0])
    rows = tuple(
        EventRow(offset=format_offset(key[0], origin_ns), ranks=format_ranks(ranks), kind=key[1], severity=key[2],
                 label=key[3], metadata_text=key[4], signal=marker_signal(key[1], key[5] or None))
        for key, ranks in items
    )
    return rows, omitted
