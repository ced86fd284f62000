"""Sessions: summaries, default selection, accumulation and merging, as stormlog does.

A session is a capture run (one rank of one job, usually). Its summary carries
identity and lifecycle; its events are a slice of canonical rows. The rules
(selection priority, stable ids of merged sessions, what a merged summary holds)
are stormlog 0.3.5's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import pandas as pd

from stormwatch.events.merge import combine_events
from stormwatch.events.schema import INT64_MAX, INT64_MIN
from stormwatch.events.session_ids import stable_legacy_session_id

if TYPE_CHECKING:  # the loader's record, carried through merges only
    from stormwatch.load.clock_steps import ClockStepBack


class SessionStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    INCOMPLETE = "incomplete"


_PRIORITY = {
    SessionStatus.COMPLETED: 0,
    SessionStatus.INTERRUPTED: 1,
    SessionStatus.INCOMPLETE: 2,
    SessionStatus.RUNNING: 3,
}


def parse_status(value: object) -> SessionStatus:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("session status must be a non-empty string")
    try:
        return SessionStatus(value.strip().lower())
    except ValueError as exc:
        raise ValueError(f"unsupported session status: {value}") from exc


@dataclass(frozen=True)
class SessionSummary:
    """Identity and lifecycle of one session; times in ns since the epoch.

    ``event_count`` is the number of distinct events loaded for it.
    """

    session_id: str
    status: SessionStatus
    started_at_ns: int
    ended_at_ns: int | None
    host: str
    pid: int
    job_id: str | None = None
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    source: str = "stormlog.session"
    event_count: int = 0

    def sort_key(self) -> tuple[int, int, int, str]:
        """Selection order: completed first, then latest end, latest start, id."""
        return (
            _PRIORITY.get(self.status, 99),
            -int(self.ended_at_ns or self.started_at_ns),
            -self.started_at_ns,
            self.session_id,
        )


def summary_from_mapping(payload: Mapping[str, Any]) -> SessionSummary:
    """A summary as a sink manifest or diagnose bundle stores it; raises ValueError."""
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id.strip():
        raise ValueError("session_id must be a non-empty string")
    source = payload.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ValueError("source must be a non-empty string")
    status = parse_status(payload.get("status"))
    started = payload.get("started_at_ns")
    if started is None:
        raise ValueError("started_at_ns must be present")
    ended = payload.get("ended_at_ns")
    host = payload.get("host")
    if not isinstance(host, str) or not host.strip():
        raise ValueError("host must be a non-empty string")
    job_id = payload.get("job_id")
    if job_id is not None and not isinstance(job_id, str):
        raise ValueError("job_id must be a string")
    try:
        return SessionSummary(
            session_id=session_id,
            status=status,
            started_at_ns=_int64(started, "started_at_ns"),
            ended_at_ns=None if ended is None else _int64(ended, "ended_at_ns"),
            host=host,
            pid=_int64(payload.get("pid", -1), "pid"),
            job_id=job_id,
            rank=_int64(payload.get("rank", 0), "rank"),
            local_rank=_int64(payload.get("local_rank", 0), "local_rank"),
            world_size=max(1, _int64(payload.get("world_size", 1), "world_size")),
            source=source,
        )
    except (TypeError, OverflowError) as exc:
        raise ValueError(str(exc)) from exc


def _int64(value: Any, name: str) -> int:
    number = int(value)
    if not INT64_MIN <= number <= INT64_MAX:
        raise ValueError(f"{name} is out of the 64-bit range")
    if name == "pid" and number < -1:
        raise ValueError("pid must be >= -1")  # events stamped with it would all be refused
    return number


def infer_summary(session_id: str, events: pd.DataFrame, *, source: str) -> SessionSummary:
    """A summary from events sorted by time: completed when any ``stop`` event exists."""
    def first(name: str) -> Any:
        return events[name].iloc[0]

    stops = events["timestamp_ns"].to_numpy()[(events["event_type"] == "stop").to_numpy()]
    job_id = first("job_id")
    return SessionSummary(
        session_id=session_id,
        status=SessionStatus.COMPLETED if stops.size else SessionStatus.INCOMPLETE,
        started_at_ns=int(first("timestamp_ns")),
        ended_at_ns=int(stops[-1]) if stops.size else None,
        host=str(first("host")),
        pid=int(first("pid")),
        job_id=None if pd.isna(job_id) else str(job_id),
        rank=int(first("rank")),
        local_rank=int(first("local_rank")),
        world_size=max(1, int(first("world_size"))),
        source=source,
    )


def summary_from_last_event(session_id: str, events: pd.DataFrame, *, source: str) -> SessionSummary:
    """A summary from events sorted by time: completed only when the last is ``stop``."""
    summary = infer_summary(session_id, events.iloc[:1], source=source)
    last = events.iloc[-1]
    if last["event_type"] == "stop":
        return replace(summary, status=SessionStatus.COMPLETED, ended_at_ns=int(last["timestamp_ns"]))
    return replace(summary, status=SessionStatus.INCOMPLETE, ended_at_ns=None)


@dataclass(frozen=True)
class SessionPart:
    """A session's events (sorted, distinct), the sources they came from, warnings.

    ``members``: the ids of the single-rank sessions a distributed rank group merges
    (:func:`synthesize_rank_groups`); empty for every other session. ``clock_steps``: where a
    rank's sample clock stepped back in its files' order (:mod:`stormwatch.load.clock_steps`; the
    events, in time order, no longer show it); a merge holds every member's.
    """

    summary: SessionSummary
    events: pd.DataFrame
    sources: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    clock_steps: tuple[ClockStepBack, ...] = ()


@dataclass
class Accumulator:
    """Collects one session's parts across artifacts; the first-ranked summary wins."""

    parts: dict[str, list[SessionPart]] = field(default_factory=dict)
    summaries: dict[str, SessionSummary] = field(default_factory=dict)

    def add(self, parts: Iterable[SessionPart]) -> None:
        for part in parts:
            sid = part.summary.session_id
            known = self.summaries.get(sid)
            if known is None or part.summary.sort_key() < known.sort_key():
                self.summaries[sid] = part.summary
            self.parts.setdefault(sid, []).append(part)

    def finalize(self) -> list[SessionPart]:
        """Merged sessions in selection order, events distinct and sorted."""
        out = []
        for summary in sorted(self.summaries.values(), key=SessionSummary.sort_key):
            parts = self.parts[summary.session_id]
            events = combine_events([p.events for p in parts])
            out.append(
                SessionPart(
                    summary=replace(summary, event_count=len(events)),
                    events=events,
                    sources=tuple(sorted({s for p in parts for s in p.sources})),
                    warnings=unique(w for p in parts for w in p.warnings),
                    clock_steps=_clock_steps(parts),
                )
            )
        return out


def unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def _clock_steps(parts: Iterable[SessionPart]) -> tuple[ClockStepBack, ...]:
    return tuple(dict.fromkeys(step for part in parts for step in part.clock_steps))


def _common(values: Iterable[Any]) -> Any:
    distinct = {value for value in values if value is not None}
    return next(iter(distinct)) if len(distinct) == 1 else None


def merge_parts(parts: Sequence[SessionPart], *, session_id: str, source: str, job_id: str | None) -> SessionPart:
    """Several sessions as one (stormlog's legacy and rank-group merges)."""
    summaries = [p.summary for p in parts]
    events = combine_events([p.events for p in parts], session_id=session_id)
    completed = all(s.status == SessionStatus.COMPLETED for s in summaries)
    ends = [s.ended_at_ns for s in summaries if s.ended_at_ns is not None]
    summary = SessionSummary(
        session_id=session_id,
        status=SessionStatus.COMPLETED if completed else SessionStatus.INCOMPLETE,
        started_at_ns=min(s.started_at_ns for s in summaries),
        ended_at_ns=max(ends) if completed and ends else None,
        host=_common(s.host for s in summaries) or "multiple",
        pid=summaries[0].pid if len({s.pid for s in summaries}) == 1 else -1,
        job_id=job_id,
        rank=min(s.rank for s in summaries),
        local_rank=min(s.local_rank for s in summaries),
        world_size=max(1, max(s.world_size for s in summaries)),
        source=source,
        event_count=len(events),
    )
    return SessionPart(
        summary=summary,
        events=events,
        sources=tuple(sorted({s for p in parts for s in p.sources})),
        warnings=unique(w for p in parts for w in p.warnings),
        clock_steps=_clock_steps(parts),
    )


def merge_legacy(parts: Sequence[SessionPart]) -> SessionPart:
    """Session-less flat files (old exports) of one job as one session."""
    sources = sorted({s for p in parts for s in p.sources})
    return merge_parts(
        parts,
        session_id=stable_legacy_session_id("distributed.legacy", *sources),
        source="stormlog.diagnostics.legacy",
        job_id=_common(p.summary.job_id for p in parts),
    )


def synthesize_rank_groups(parts: Sequence[SessionPart], candidates: set[str]) -> list[SessionPart]:
    """One merged session per (job_id, world_size) of single-rank inputs.

    A group needs 2..world_size members with distinct ranks, each non-empty.
    """
    groups: dict[tuple[str, int], list[SessionPart]] = {}
    for part in parts:
        summary = part.summary
        if summary.session_id not in candidates or summary.job_id is None:
            continue
        if summary.world_size <= 1 or part.events.empty:
            continue
        groups.setdefault((summary.job_id, summary.world_size), []).append(part)
    merged = []
    for (job_id, world_size), group in groups.items():
        ranks = [p.summary.rank for p in group]
        if len(group) <= 1 or len(group) > world_size or len(set(ranks)) != len(ranks):
            continue
        session_id = stable_legacy_session_id(
            "distributed.rank_group", job_id, world_size, *sorted(p.summary.session_id for p in group)
        )
        part = merge_parts(group, session_id=session_id, source="stormlog.diagnostics.distributed", job_id=job_id)
        merged.append(replace(part, members=tuple(p.summary.session_id for p in group)))
    return merged


def session_groups(parts: Sequence[SessionPart]) -> list[SessionPart]:
    """The sessions a job is diagnosed as, in the order of ``parts``: every distributed rank group,
    and every session that is not a member of one (a legacy merge, a multi-rank session, a rank
    whose group stormlog could not form). A group's members are its own, never diagnosed alone."""
    grouped = {member for part in parts for member in part.members}
    return [part for part in parts if part.members or part.summary.session_id not in grouped]


def select_default(parts: Sequence[SessionPart]) -> SessionPart | None:
    """Non-empty sessions first, then the selection order."""
    pool = [p for p in parts if not p.events.empty] or list(parts)
    return min(pool, key=lambda p: p.summary.sort_key(), default=None)
