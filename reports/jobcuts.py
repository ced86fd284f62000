"""Files that end mid-record, for the first screen of a job's report (model.json's ``cut_short``).

One :class:`CutShortView` per entry of the document's top-level ``cut_short`` (see
:mod:`stormwatch.outputs.cut_short`), read defensively: an entry that is not an object is left out,
a value of the wrong type reads as absent. File names and session ids are telemetry: plain text
here, escaped by the template. A document written before the member existed shows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.reports.fields import as_int, as_list
from stormwatch.reports.formatting import format_bytes

#: Files named on the first screen; the rest are counted there (the Warnings section has every one).
MAX_SHOWN = 8


@dataclass(frozen=True)
class CutShortView:
    """``when``: ``20.0 s into the job`` (the session the page details), ``20.0 s into attempt 1 of 2``
    or ``20.0 s into another session`` (session ``session``, counted from its first event), or
    ``before its first complete record``; ``dropped``: ``612 B`` or ""."""

    rank: int | None
    file: str
    when: str
    session: str
    dropped: str


@dataclass(frozen=True)
class JobCuts:
    shown: tuple[CutShortView, ...]
    more: int  # files beyond :data:`MAX_SHOWN`


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _attempt_names(document: Mapping[str, Any]) -> dict[str, str]:
    names = {}
    for item in as_list(document.get("attempts")):
        if isinstance(item, Mapping) and isinstance(item.get("session_id"), str):
            number, of = as_int(item.get("attempt")), as_int(item.get("of"))
            if number is not None and of is not None:
                names[item["session_id"]] = f"attempt {number} of {of}"
    return names


def _view(item: Mapping[str, Any], *, selected: Any, attempts: Mapping[str, str]) -> CutShortView:
    group = item.get("session_group")
    at_s = _number(item.get("at_s"))
    session = ""
    if at_s is None:
        when = "before its first complete record" if item.get("last_event_ns") is None else "after its last record"
    elif group == selected:
        when = f"{at_s:.1f} s into the job"
    else:
        session = str(group) if isinstance(group, str) else ""
        when = f"{at_s:.1f} s into {attempts.get(session) or 'another session'}"
    dropped = as_int(item.get("dropped_bytes"))
    return CutShortView(
        rank=as_int(item.get("rank")),
        file=str(item.get("file") or item.get("source") or "a file"),
        when=when,
        session=session,
        dropped=format_bytes(dropped) if dropped else "",
    )


def job_cuts(document: Mapping[str, Any]) -> JobCuts:
    """The cut-short files of a job document, in its order; empty when it has none."""
    items = [item for item in as_list(document.get("cut_short")) if isinstance(item, Mapping)]
    attempts = _attempt_names(document)
    views = tuple(_view(item, selected=document.get("selected_session_id"), attempts=attempts) for item in items)
    return JobCuts(views[:MAX_SHOWN], max(0, len(views) - MAX_SHOWN))
