"""Timeline markers: lifecycle, collector, alert, OOM and phase landmarks of a session.

Field names and meanings are those of stormlog's ``TimelineMarker``; times in ns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.analysis.phases import PhaseSpan, format_phase_path, replay_rows
from stormwatch.severity import Severity


class MarkerKind(StrEnum):
    ALERT = "alert"
    COLLECTOR = "collector"
    LIFECYCLE = "lifecycle"
    OOM = "oom"
    PHASE = "phase"


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


#: The columns markers are made from; :func:`_marker_rows` gives them as lists.
_ROW_COLUMNS = ("session_id", "timestamp_ns", "event_type", "context", "rank", "local_rank", "world_size", "metadata")
Rows = dict[str, list[Any]]


def _point_markers(rows: Rows) -> list[TimelineMarker]:
    markers = []
    for session_id, stamp, raw_type, context, rank, local_rank, world_size, raw_metadata in zip(
        *(rows[name] for name in _ROW_COLUMNS), strict=True
    ):
        event_type = raw_type.strip() if isinstance(raw_type, str) else None
        if event_type not in _POINT_KINDS:
            continue
        kind, severity, label = _POINT_KINDS[event_type]
        metadata: dict[str, Any] = dict(raw_metadata) if isinstance(raw_metadata, dict) else {}
        if event_type == "error" and ("oom_reason" in metadata or "oom_dump_path" in metadata):
            kind = MarkerKind.OOM
            reason = metadata.get("oom_reason")
            label = f"OOM detected: {reason.strip()}" if isinstance(reason, str) and reason.strip() else "OOM detected"
        if isinstance(context, str) and context.strip():
            label = context.strip()
        markers.append(
            TimelineMarker(
                session_id=str(session_id),
                start_ns=int(stamp),
                end_ns=None,
                kind=kind.value,
                source="telemetry_event",
                severity=severity.value,
                label=label,
                rank=int(rank),
                local_rank=int(local_rank),
                world_size=int(world_size),
                event_type=event_type,
                metadata=metadata,
            )
        )
    return markers


def _phase_markers(rows: Rows) -> list[TimelineMarker]:
    latest: dict[tuple[str, int], int] = {}  # the rows hold each (session, rank)'s latest event
    firsts: dict[tuple[str, int], tuple[int, int]] = {}  # (session, rank) -> its first row's local rank, world size
    for session_id, stamp, rank, local_rank, world_size in zip(
        rows["session_id"], rows["timestamp_ns"], rows["rank"], rows["local_rank"], rows["world_size"], strict=True
    ):
        key = (session_id, rank)
        latest[key] = max(latest.get(key, stamp), stamp)
        firsts.setdefault(key, (local_rank, world_size))
    spans = replay_rows(
        zip(rows["event_type"], rows["session_id"], rows["timestamp_ns"], rows["rank"], rows["metadata"], strict=True),
        lambda session_id, rank: latest[(session_id, rank)],
    )
    markers = []
    for (session_id, rank), group in spans.items():
        local_rank, world_size = firsts[(session_id, rank)]
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


#: Ranks up to this bound index arrays directly; larger ones are factorized first.
_DIRECT_RANKS = 1 << 16


def _group_codes(events: pd.DataFrame) -> np.ndarray:
    """A code per row for its (session_id, rank), in ``0..n_groups-1`` (not necessarily dense)."""
    sessions = events["session_id"]
    if (sessions == sessions.iloc[0]).all():
        session_codes = np.zeros(len(events), dtype=np.int64)
    else:
        session_codes = pd.factorize(sessions, use_na_sentinel=False)[0].astype(np.int64)
    ranks = events["rank"].to_numpy()
    if ranks.min() < 0 or ranks.max() >= _DIRECT_RANKS:
        codes, distinct = pd.factorize(ranks)
        ranks, rank_count = codes.astype(np.int64), len(distinct)
    else:
        rank_count = int(ranks.max()) + 1
    return session_codes * rank_count + ranks


def _marker_rows(events: pd.DataFrame) -> Rows:
    """The rows markers are made from, in their order: every event that is not a
    sample (lifecycle, alerts, phase boundaries ...), plus, per (session, rank), the
    first row (phase markers take local rank and world size from it) and the rows
    with the latest timestamp (where phases still open at the end are closed)."""
    keep = np.array(events["event_type"] != "sample", dtype=bool)
    groups = _group_codes(events)
    count = int(groups.max()) + 1
    positions = np.arange(len(events), dtype=np.int64)
    first = np.full(count, len(events), dtype=np.int64)
    np.minimum.at(first, groups, positions)
    keep[first[first < len(events)]] = True
    stamps = events["timestamp_ns"].to_numpy()
    if (stamps[1:] >= stamps[:-1]).all():  # time order (the loader's): the last row is the latest
        last = np.full(count, -1, dtype=np.int64)
        np.maximum.at(last, groups, positions)
        keep[last[last >= 0]] = True
    else:
        latest = np.full(count, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(latest, groups, stamps)
        keep |= stamps == latest[groups]
    chosen = np.flatnonzero(keep)
    return {name: events[name].array.take(chosen).tolist() for name in _ROW_COLUMNS}


def derive_markers(events: pd.DataFrame) -> tuple[TimelineMarker, ...]:
    """Point markers from lifecycle/collector/alert events and phase spans, in time order."""
    if events.empty:
        return ()
    rows = _marker_rows(events)
    return tuple(sorted(_point_markers(rows) + _phase_markers(rows), key=TimelineMarker.sort_key))


def spans_from_markers(markers: Sequence[TimelineMarker]) -> dict[tuple[str, int], list[PhaseSpan]]:
    """The phase spans behind :func:`derive_markers`' phase markers, per (session_id, rank),
    each list sorted by (start, end): what :func:`replay_spans` gives for the same events."""
    spans: dict[tuple[str, int], list[PhaseSpan]] = {}
    for marker in markers:
        if marker.kind != MarkerKind.PHASE.value or marker.rank is None or marker.end_ns is None:
            continue
        meta = marker.metadata
        spans.setdefault((marker.session_id, marker.rank), []).append(
            PhaseSpan(
                session_id=marker.session_id,
                rank=marker.rank,
                thread_id=meta["thread_id"],
                thread_name=meta["thread_name"],
                scope_id=meta["scope_id"],
                path=tuple(meta["phase_path"]),
                start_ns=marker.start_ns,
                end_ns=marker.end_ns,
                sequence=meta["sequence"],
                synthetic_end=meta["synthetic_end"],
            )
        )
    return {key: sorted(values, key=lambda span: (span.start_ns, span.end_ns)) for key, values in spans.items()}
