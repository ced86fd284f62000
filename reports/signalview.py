"""Signals on the job page in plain words, the code second (issue 28).

Every signal the page shows goes through :func:`signal_view`, which takes its title and meaning from
the one table in :mod:`stormwatch.signals`; the template draws it as
``<span class="signal" title="MEANING">Title <code>code</code></span>``. A signal code is telemetry
(a newer engine's, or a tracker's own event type): plain text here, escaped by the template.

An OOM is an ``alert:error`` event whose rank's OOM marker sits at the same instant
(:func:`is_oom`); it reads "Out of memory", with the code it carries beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stormwatch.analysis.markers import MarkerKind, TimelineMarker
from stormwatch.outputs.attempts import OOM_SIGNAL
from stormwatch.signals import describe


@dataclass(frozen=True)
class SignalView:
    """``title`` (a few plain words), ``code`` (as model.json carries it), ``meaning`` (one sentence,
    the hover text); ``oom``: the finding is an out-of-memory error."""

    title: str
    code: str
    meaning: str
    oom: bool = False


def signal_view(code: str, *, oom: bool = False) -> SignalView:
    """The plain words of ``code`` (``oom``: it stands for an out-of-memory error)."""
    text = describe(code, oom=oom)
    return SignalView(title=text.title, code=code, meaning=text.meaning, oom=oom)


def is_oom(signal: str | None, *, rank: int | None, timestamp_ns: int | None,
           markers_by_rank: Mapping[int, Sequence[TimelineMarker]]) -> bool:
    """Whether the finding ``signal`` on ``rank`` at ``timestamp_ns`` is an OOM: an ``alert:error``
    with an OOM marker of that rank at that instant (the rule :mod:`stormwatch.outputs.attempts` uses)."""
    if signal != OOM_SIGNAL or rank is None or timestamp_ns is None:
        return False
    return any(marker.kind == MarkerKind.OOM and marker.start_ns == timestamp_ns
               for marker in markers_by_rank.get(rank, ()))


def marker_signal(kind: str, event_type: str | None) -> SignalView | None:
    """The signal a point marker of ``kind`` stands for in the events table: an OOM, or an alert
    (``alert:<event type>``); None for collector and lifecycle markers, which are not findings."""
    if kind == MarkerKind.OOM:
        return signal_view(OOM_SIGNAL, oom=True)
    if kind == MarkerKind.ALERT:
        kind_of_event = (event_type or "").strip().lower() or "alert"
        return signal_view(f"alert:{kind_of_event}")
    return None
