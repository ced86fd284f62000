"""Phase replay: structured ``phase_enter``/``phase_exit`` events to phase spans.

Per (session, rank, thread) the boundaries form a stack; an exit closes the
innermost open phase only when the scope ids match (otherwise it is ignored),
and phases still open at the end close at the last event of their
(session, rank), marked ``synthetic_end``. Rules are stormlog 0.3.5's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
import pandas as pd

PHASE_ENTER = "phase_enter"
PHASE_EXIT = "phase_exit"
SCOPE_KEY = "phase_scope"


@dataclass(frozen=True)
class Boundary:
    action: str
    path: tuple[str, ...]
    scope_id: str
    thread_id: int
    thread_name: str
    sequence: int
    session_id: str
    timestamp_ns: int


@dataclass(frozen=True)
class PhaseSpan:
    """One phase on one thread of one rank; times in ns, end inclusive."""

    session_id: str
    rank: int
    thread_id: int
    thread_name: str
    scope_id: str
    path: tuple[str, ...]
    start_ns: int
    end_ns: int
    sequence: int
    synthetic_end: bool = False


def format_phase_path(path: tuple[str, ...] | list[str]) -> str:
    return " / ".join(part for part in path if part)


def parse_boundary(event_type: str, session_id: str, timestamp_ns: int, metadata: Any) -> Boundary | None:
    """A phase boundary from one event, or None when its scope payload is malformed."""
    if event_type not in (PHASE_ENTER, PHASE_EXIT) or not isinstance(metadata, Mapping):
        return None
    scope = metadata.get(SCOPE_KEY)
    if not isinstance(scope, Mapping):
        return None
    action, name, scope_id = scope.get("action"), scope.get("name"), scope.get("scope_id")
    path, thread_name = scope.get("path"), scope.get("thread_name")
    if not (
        isinstance(action, str)
        and isinstance(name, str)
        and name.strip()
        and isinstance(scope_id, str)
        and isinstance(thread_name, str)
        and isinstance(path, list)
    ):
        return None
    if action != ("enter" if event_type == PHASE_ENTER else "exit"):
        return None
    parts = tuple(str(part) for part in path if isinstance(part, str) and part)
    sequence, thread_id, parent = scope.get("sequence"), scope.get("thread_id"), scope.get("parent_scope_id")
    if not parts or not _plain_int(sequence) or not _plain_int(thread_id):
        return None
    if parent is not None and not isinstance(parent, str):
        return None
    return Boundary(action=action, path=parts, scope_id=scope_id, thread_id=thread_id, thread_name=thread_name,
                    sequence=sequence, session_id=session_id, timestamp_ns=timestamp_ns)


def _plain_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int)


#: One event as phase replay reads it: event type, session id, timestamp (ns), rank, metadata.
BoundaryRow = tuple[Any, Any, int, int, Any]


def _closed(scope: Boundary, session_id: str, rank: int, *, end_ns: int, closed_by: Boundary | None = None,
            synthetic_end: bool = False) -> PhaseSpan:
    """The span of an opened ``scope`` ending at ``end_ns``; its thread and scope come from the boundary
    that ``closed_by`` it (the reference's choice), else, for a phase never closed, from its opening."""
    thread = closed_by or scope
    return PhaseSpan(session_id=session_id, rank=rank, thread_id=thread.thread_id, thread_name=thread.thread_name,
                     scope_id=thread.scope_id, path=scope.path, start_ns=scope.timestamp_ns, end_ns=end_ns,
                     sequence=scope.sequence, synthetic_end=synthetic_end)


def replay_rows(
    rows: Iterable[BoundaryRow], last_ns: Callable[[str, int], int]
) -> dict[tuple[str, int], list[PhaseSpan]]:
    """Spans per (session_id, rank), each list sorted by (start, end), from the events
    that may be boundaries (others are skipped); ``last_ns(session_id, rank)`` is the
    timestamp of that group's last event, where phases still open are closed."""
    boundaries = []
    for event_type, session_id, stamp, rank, metadata in rows:
        parsed = parse_boundary(event_type, session_id, int(stamp), metadata)
        if parsed is not None:
            boundaries.append((session_id, int(rank), parsed.timestamp_ns, parsed.sequence, parsed.scope_id, parsed))
    if not boundaries:
        return {}
    boundaries.sort(key=lambda item: item[:5])
    stacks: dict[tuple[str, int, int], list[Boundary]] = {}
    spans: dict[tuple[str, int], list[PhaseSpan]] = {}
    for session_id, rank, stamp, _, _, boundary in boundaries:
        key = (session_id, rank, boundary.thread_id)
        stack = stacks.setdefault(key, [])
        if boundary.action == "enter":
            stack.append(boundary)
            continue
        if not stack or stack[-1].scope_id != boundary.scope_id:
            continue
        opened = stack.pop()
        if not stack:
            del stacks[key]
        spans.setdefault((session_id, rank), []).append(_closed(opened, session_id, rank, end_ns=stamp,
                                                                 closed_by=boundary))
    for (session_id, rank, _), stack in stacks.items():
        end = last_ns(session_id, rank)
        for scope in stack:
            spans.setdefault((session_id, rank), []).append(
                _closed(scope, session_id, rank, end_ns=end, synthetic_end=True))
    return {key: sorted(values, key=lambda s: (s.start_ns, s.end_ns)) for key, values in spans.items()}


def replay_spans(events: pd.DataFrame) -> dict[tuple[str, int], list[PhaseSpan]]:
    """Spans per (session_id, rank) of canonical events, each list sorted by (start, end)."""
    positions = np.flatnonzero(events["event_type"].isin([PHASE_ENTER, PHASE_EXIT]).to_numpy(dtype=bool))
    if not positions.size:
        return {}
    columns = [events[name].array.take(positions).tolist()
               for name in ("event_type", "session_id", "timestamp_ns", "rank", "metadata")]
    stamps, ranks = events["timestamp_ns"].to_numpy(), events["rank"].to_numpy()

    def last_ns(session_id: str, rank: int) -> int:
        return int(stamps[(ranks == rank) & (events["session_id"] == session_id).to_numpy()].max())

    return replay_rows(zip(*columns, strict=True), last_ns)
