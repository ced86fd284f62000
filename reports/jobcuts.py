"""Files that end mid-record, for the first screen of a job's report (model.json's ``cut_short``).

One :class:`CutShortView` per entry of the document's top-level ``cut_short`` (see
:mod:`stormwatch.outputs.cut_short`). File names and session ids are telemetry: plain text here,
escaped by the template. A document written before the member existed shows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stormwatch.outputs.cut_short import CutShortEntry
from stormwatch.outputs.document import JobDocument
from stormwatch.reports.formatting import format_bytes
from stormwatch.reports.jobattempts import SessionId

#: Files named on the first screen; the rest are counted there (the Warnings section has every one).
MAX_SHOWN = 8


@dataclass(frozen=True)
class CutShortView:
    """``when``: ``20.0 s into the job`` (the session the page details), ``20.0 s into attempt 1 of 2``
    or ``20.0 s into another session`` (session ``session``, counted from its first event; shown
    shortened), or ``before its first complete record``; ``dropped``: ``612 B`` or ""."""

    rank: int | None
    file: str
    when: str
    session: SessionId | None
    dropped: str


@dataclass(frozen=True)
class JobCuts:
    shown: tuple[CutShortView, ...]
    more: int  # files beyond :data:`MAX_SHOWN`


def _attempt_names(document: JobDocument) -> dict[str, str]:
    return {entry.attempt.session_id: f"attempt {entry.attempt.number} of {entry.attempt.of}"
            for entry in document.attempts or ()}


def _view(item: CutShortEntry, *, selected: str | None, attempts: Mapping[str, str]) -> CutShortView:
    group = item.session_group
    session = None
    if item.at_s is None:
        when = "before its first complete record" if item.last_event_ns is None else "after its last record"
    elif group == selected:
        when = f"{item.at_s:.1f} s into the job"
    else:
        session = SessionId.of(group) if group else None
        when = f"{item.at_s:.1f} s into {attempts.get(group or '') or 'another session'}"
    return CutShortView(
        rank=item.rank,
        file=item.file or item.source or "a file",
        when=when,
        session=session,
        dropped=format_bytes(item.dropped_bytes) if item.dropped_bytes else "",
    )


def job_cuts(document: JobDocument, *, detailed: str | None = None) -> JobCuts:
    """The cut-short files of a job document, in its order; empty when it has none. ``detailed``: the
    session the page details ("into the job" means into it; None: the document's own)."""
    attempts = _attempt_names(document)
    selected = detailed or document.selected_session_id
    views = tuple(_view(item, selected=selected, attempts=attempts) for item in document.cut_short)
    return JobCuts(views[:MAX_SHOWN], max(0, len(views) - MAX_SHOWN))
