"""Phase attribution: which workload phase was active at an instant of one rank.

Built once per job from the replayed phase spans (:func:`replay_spans`); each
query is a binary search plus a vectorised scan of the spans that started
before the instant, so resolving a few thousand anomaly timestamps stays cheap.
The policy is stormlog 0.3.5's "deepest span per thread":

* a span whose ``scope_id`` is the event's origin scope wins outright, then the
  most recent span on the event's origin thread;
* otherwise each thread contributes its deepest active span; one thread gives
  a ``unique`` attribution, several (or conflicting labels) an ``ambiguous``
  one listing every label, with the most recently entered span as the likely
  winner.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pandas as pd

from stormwatch.analysis.phases import PhaseSpan, format_phase_path, replay_spans


class Resolution(StrEnum):
    UNIQUE = "unique"
    AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class PhaseAttribution:
    """The phase an instant belongs to; ``likely`` is the heuristic winner of an ambiguity."""

    resolution: Resolution
    paths: tuple[str, ...]
    scope_id: str | None = None
    thread_id: int | None = None
    likely: str | None = None

    def summary(self) -> str | None:
        """The label a report shows: the path, ``(likely) …`` or ``(ambiguous) a | b``."""
        if self.likely is not None:
            return f"(likely) {self.likely}"
        labels = [path for path in self.paths if path]
        if self.resolution is Resolution.UNIQUE:
            return labels[0] if labels else None
        return f"(ambiguous) {' | '.join(labels)}" if labels else None


def _unique(span: PhaseSpan) -> PhaseAttribution:
    return PhaseAttribution(resolution=Resolution.UNIQUE, paths=(format_phase_path(span.path),), scope_id=span.scope_id,
                            thread_id=span.thread_id)


def _most_recent(spans: Iterable[PhaseSpan]) -> PhaseSpan:
    return max(spans, key=lambda span: (span.sequence, span.scope_id))


def attribute(
    spans: list[PhaseSpan], *, origin_thread_id: int | None = None, origin_scope_id: str | None = None
) -> PhaseAttribution | None:
    """Collapse the spans active at one instant (in (start, end) order) into one attribution."""
    if not spans:
        return None
    if origin_scope_id:
        exact = [span for span in spans if span.scope_id == origin_scope_id]
        if len(exact) == 1:
            return _unique(exact[0])
    if origin_thread_id is not None:
        on_thread = [span for span in spans if span.thread_id == origin_thread_id]
        if on_thread:
            return _unique(_most_recent(on_thread))
    by_thread: dict[int, list[PhaseSpan]] = {}
    for span in spans:
        by_thread.setdefault(span.thread_id, []).append(span)
    winners: list[PhaseSpan] = []
    conflicting: set[str] = set()
    for thread_spans in by_thread.values():
        depth = max(len(span.path) for span in thread_spans)
        deepest = [span for span in thread_spans if len(span.path) == depth]
        labels = {format_phase_path(span.path) for span in deepest}
        if len(labels) != 1:
            conflicting |= labels
            continue
        winners.append(_most_recent(deepest))
    if not conflicting and len(winners) == 1:
        return _unique(winners[0])
    paths = tuple(sorted(conflicting | {format_phase_path(span.path) for span in winners}))
    likely = None
    if len({path for path in paths if path}) > 1:
        likely = format_phase_path(_most_recent(spans).path) or None
    return PhaseAttribution(resolution=Resolution.AMBIGUOUS, paths=paths, likely=likely)


def merge_attributions(attributions: Iterable[PhaseAttribution | None]) -> PhaseAttribution | None:
    """Fold the attributions of merged intervals without inventing a unique path.

    One attribution stays as it is; several stay the first when all are the same
    unique scope, else become ``ambiguous`` over the union of their paths.
    """
    given = [item for item in attributions if item is not None]
    present = [item for item in given if any(item.paths)]
    if not present:
        return given[0] if given else None
    first = present[0]
    if len(present) == 1:
        return first
    union = tuple(sorted({path for item in present for path in item.paths if path}))
    same_scope = all(
        item.resolution is Resolution.UNIQUE
        and (item.paths, item.scope_id, item.thread_id) == (first.paths, first.scope_id, first.thread_id)
        for item in present
    )
    if len(union) == 1 and same_scope and first.resolution is Resolution.UNIQUE:
        return first
    return PhaseAttribution(resolution=Resolution.AMBIGUOUS, paths=union)


@dataclass(frozen=True)
class _Group:
    """One (session, rank)'s spans in (start, end) order, their starts, and their ends sorted.

    The spans active at ``t`` are the first ``bisect_right(starts_ns, t)`` spans less
    those whose end is below ``t``, so ``(bisect_right(starts_ns, t),
    bisect_left(sorted_ends_ns, t))`` names the active set: instants with equal
    keys share one attribution.
    """

    spans: tuple[PhaseSpan, ...]
    starts_ns: list[int]
    sorted_ends_ns: list[int]


class PhaseIndex:
    """Active-span lookup per (session_id, rank); built once from a job's events."""

    def __init__(self, spans_by_group: Mapping[tuple[str, int], list[PhaseSpan]]) -> None:
        self._groups = {
            key: _Group(tuple(spans), [span.start_ns for span in spans], sorted(span.end_ns for span in spans))
            for key, spans in spans_by_group.items()
        }
        # (session, rank, active-set key, origin thread, origin scope) -> attribution
        self._resolved: dict[tuple[Any, ...], PhaseAttribution | None] = {}

    @classmethod
    def from_events(cls, events: pd.DataFrame) -> PhaseIndex:
        return cls(replay_spans(events))

    def __bool__(self) -> bool:
        return bool(self._groups)

    def active(self, timestamp_ns: int, *, session_id: str, rank: int) -> list[PhaseSpan]:
        """Spans with ``start_ns <= timestamp_ns <= end_ns``, in (start, end) order."""
        group = self._groups.get((session_id, rank))
        if group is None:
            return []
        started = bisect_right(group.starts_ns, timestamp_ns)
        return [span for span in group.spans[:started] if span.end_ns >= timestamp_ns]

    def resolve(
        self, timestamp_ns: int, *, session_id: str, rank: int, metadata: Any = None
    ) -> PhaseAttribution | None:
        """Attribution at one instant; ``metadata`` may name the origin thread or scope.

        Computed once per active set and origin (see :class:`_Group`), then reused.
        """
        group = self._groups.get((session_id, rank))
        if group is None:
            return None
        thread_id, scope_id = _origin(metadata)
        key = (
            session_id,
            rank,
            bisect_right(group.starts_ns, timestamp_ns),
            bisect_left(group.sorted_ends_ns, timestamp_ns),
            thread_id,
            scope_id,
        )
        if key not in self._resolved:
            spans = self.active(timestamp_ns, session_id=session_id, rank=rank)
            self._resolved[key] = (
                attribute(spans, origin_thread_id=thread_id, origin_scope_id=scope_id) if spans else None
            )
        return self._resolved[key]


def _origin(metadata: Any) -> tuple[int | None, str | None]:
    if not isinstance(metadata, dict):
        return None, None
    thread_id = metadata.get("origin_thread_id")
    scope_id = metadata.get("origin_phase_scope_id")
    return (
        thread_id if isinstance(thread_id, int) else None,
        scope_id if isinstance(scope_id, str) and scope_id else None,
    )
