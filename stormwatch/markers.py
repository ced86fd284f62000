"""Timeline markers: lifecycle, collector, alert, OOM and phase landmarks of a session.

Field names and meanings are those of stormlog's ``TimelineMarker``; times in ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.analysis.phases import format_phase_path, replay_spans


class MarkerKind(StrEnum):
    ALERT = "alert"
    COLLECTOR = "collector"
    LIFECYCLE = "lifecycle"
    OOM = "oom"
    PHASE = "phase"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


_POINT_KINDS: dict[str, tuple[MarkerKind, Severity, str]] = {
    "start": (MarkerKind.LIFECYCLE, Severity.INFO, "Tracking started"),
    "stop": (MarkerKind.LIFECYCLE, Severity.INFO, "Tracking stopped"),
    "collector_degraded": (MarkerKind.COLLECTOR, Severity.WARNING, "Collector degraded"),
    "collector_recovered": (MarkerKind.COLLECTOR, Severity.INFO, "Collector recovered"),
    "warning": (MarkerKind.ALERT, Severity.WARNING, "Warning"),
    "critical": (MarkerKind.ALERT, Severity.CRITICAL, "Critical alert"),
    "error": (MarkerKind.ALERT, Severity.CRITICAL, "Error"),
}


@dataclass(frozen=True)
class TimelineMarker:
    """A point (``end_ns`` None) or interval landmark on one rank's timeline."""

    session_id: str
    start_ns: int
    end_ns: int | None
    kind: str
    source: str
    severity: str
    label: str
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    event_type: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def sort_key(self) -> tuple[int, int, int, str, str]:
        end = self.end_ns if self.end_ns is not None else self.start_ns
        return (self.start_ns, end, self.rank if self.rank is not None else -1, self.kind, self.label)


def _point_markers(events: pd.DataFrame) -> list[TimelineMarker]:
    stripped = events["event_type"].str.strip()
    rows = events.loc[stripped.isin(list(_POINT_KINDS)).to_numpy()]
    markers = []
    for row in rows.itertuples(index=False):
        event_type = row.event_type.strip()
        kind, severity, label = _POINT_KINDS[event_type]
        metadata = dict(row.metadata) if isinstance(row.metadata, dict) else {}
        if event_type == "error" and ("oom_reason" in metadata or "oom_dump_path" in metadata):
            kind = MarkerKind.OOM
            reason = metadata.get("oom_reason")
            label = f"OOM detected: {reason.strip()}" if isinstance(reason, str) and reason.strip() else "OOM detected"
        context = row.context
        if isinstance(context, str) and context.strip():
            label = context.strip()
        markers.append(
            TimelineMarker(
                session_id=row.session_id,
                start_ns=int(row.timestamp_ns),
                end_ns=None,
                kind=kind.value,
                source="telemetry_event",
                severity=severity.value,
                label=label,
                rank=int(row.rank),
                local_rank=int(row.local_rank),
                world_size=int(row.world_size),
                event_type=event_type,
                metadata=metadata,
            )
        )
    return markers


def _phase_markers(events: pd.DataFrame) -> list[TimelineMarker]:
    spans = replay_spans(events)
    if not spans:
        return []
    ranks = events["rank"].to_numpy()
    sessions = events["session_id"]
    markers = []
    for (session_id, rank), group in spans.items():
        first = int(np.flatnonzero((ranks == rank) & (sessions == session_id).to_numpy())[0])
        local_rank = int(events["local_rank"].iat[first])
        world_size = int(events["world_size"].iat[first])
        for span in group:
            markers.append(
                TimelineMarker(
                    session_id=session_id,
                    start_ns=span.start_ns,
                    end_ns=span.end_ns,
                    kind=MarkerKind.PHASE.value,
                    source="phase_replay",
                    severity=Severity.INFO.value,
                    label=f"Phase: {format_phase_path(span.path)}",
                    rank=rank,
                    local_rank=local_rank,
                    world_size=world_size,
                    event_type="phase",
                    metadata={
                        "phase_path": list(span.path),
                        "scope_id": span.scope_id,
                        "thread_id": span.thread_id,
                        "thread_name": span.thread_name,
                        "sequence": span.sequence,
                        "synthetic_end": span.synthetic_end,
                    },
                )
            )
    return markers


def derive_markers(events: pd.DataFrame) -> tuple[TimelineMarker, ...]:
    """Point markers from lifecycle/collector/alert events and phase spans, in time order."""
    if events.empty:
        return ()
    return tuple(sorted(_point_markers(events) + _phase_markers(events), key=TimelineMarker.sort_key))
