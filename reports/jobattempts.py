"""A job's attempts on its report page (model.json's ``attempts``), and where a page sits.

:func:`job_attempts` reads the ``attempts`` member: one :class:`AttemptView` per attempt in time
order with its status, verdict, first cause (its signal in plain words) and the link to its own
report, a timeline (each attempt's span on one time axis, SVG geometry in viewBox units) and the
OOMs of attempts other than the one the page details, which the page shows at the top.

The page details one attempt (``detailed``: the worst attempt's session when its document was
given, see :mod:`stormwatch.reports.jobdetail`; else the default session's, the job document's own);
the others are one click away, each on its own page. Session ids and signals are telemetry: plain
text here, escaped by the template. Links are only ever ``sessions/<percent-encoded id>/report.html``,
relative to the job's report folder; anything else in the document is not linked.

:class:`PageNav` says where a page sits: the job's page links to the fleet index; a session's page
(``<job>/sessions/<id>/report.html``) to the index, back to its job's page, and names its attempt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.outputs.attempts import OOM_SIGNAL, Attempt
from stormwatch.outputs.document import JobDocument
from stormwatch.reports.formatting import NOT_AVAILABLE, format_duration_s, format_utc_ns, short_id
from stormwatch.reports.signalview import SignalView, signal_view

SESSION_REPORT_HREF = re.compile(r"^sessions/[A-Za-z0-9._~%-]+/report\.html$")
TIMELINE_WIDTH = 1000.0  # viewBox units of the timeline's bar area
OPEN_END_FRACTION = 0.01  # an attempt without an end is drawn this share of the axis long


@dataclass(frozen=True)
class PageNav:
    """``index_href``: the fleet index; ``job_href``: the job's own page (a session's page only);
    ``attempt``: the attempt a session's page details (``attempt 1 of 2, interrupted, ...``)."""

    index_href: str = "../index.html"
    job_href: str | None = None
    attempt: str | None = None

    @classmethod
    def for_session(cls, *, depth: int, attempt: str | None) -> PageNav:
        """A session's page ``depth`` folders below its job's report folder (2 for ``sessions/<id>``)."""
        up = "../" * depth
        return cls(index_href=f"{up}../index.html", job_href=f"{up}report.html", attempt=attempt)


#: Session ids up to this many characters are shown whole (``train-run1-rank0``); longer ones are cut.
MAX_WHOLE_ID_CHARS = 20


@dataclass(frozen=True)
class SessionId:
    """A session id as the page shows it: ``short`` (``legacy-10513d62…``, as the fleet index cuts it;
    ids of at most :data:`MAX_WHOLE_ID_CHARS` characters whole), the full id on hover."""

    full: str
    short: str

    @classmethod
    def of(cls, value: str) -> SessionId:
        return cls(full=value, short=value if len(value) <= MAX_WHOLE_ID_CHARS else short_id(value))


@dataclass(frozen=True)
class AttemptView:
    number: int
    of: int
    session: SessionId
    status: str  # an attempt status (a CSS class)
    verdict: str  # a verdict status, or "none" (not diagnosed)
    signal: SignalView | None  # what the attempt came to, when a signal says it
    cause: str  # the rest: "on rank 3", or the whole cause ("no anomaly", "nothing loaded"...)
    started: str
    duration: str
    ranks: str
    href: str | None
    error: str
    shown: bool  # the session this page details
    worst: bool  # the session the job's verdict comes from
    oom: bool
    bar_x: float
    bar_width: float
    open_end: bool

    @property
    def name(self) -> str:
        return f"attempt {self.number} of {self.of}"


@dataclass(frozen=True)
class OtherOom:
    """An OOM in an attempt other than the one the page details."""

    text: str  # "attempt 1 of 2, interrupted, OOM on rank 3"
    session: SessionId
    href: str | None


@dataclass(frozen=True)
class JobAttempts:
    attempts: tuple[AttemptView, ...]
    other_ooms: tuple[OtherOom, ...]
    shown: AttemptView | None  # the attempt the page details (None: a one-session document)
    worst: AttemptView | None  # the attempt the verdict comes from
    axis_start: str
    axis_end: str

    @property
    def others(self) -> tuple[AttemptView, ...]:
        """The attempts the page does not detail, each one click away."""
        return tuple(attempt for attempt in self.attempts if not attempt.shown)


def _href(value: str | None) -> str | None:
    return value if value is not None and SESSION_REPORT_HREF.match(value) else None


def _cause(attempt: Attempt) -> tuple[SignalView | None, str]:
    """The attempt's outcome as (signal, the words after it): an OOM on its ranks, else its most
    severe first cause, else :meth:`Attempt.cause_text` alone."""
    if attempt.verdict is not None and attempt.oom_ranks:
        plural = "s" if len(attempt.oom_ranks) > 1 else ""
        return signal_view(OOM_SIGNAL, oom=True), f"on rank{plural} {format_ranks(attempt.oom_ranks)}"
    cause = attempt.most_severe
    if attempt.verdict is not None and cause is not None:
        return signal_view(cause.signal, oom=cause.oom), f"on rank {cause.rank}"
    return None, attempt.cause_text()


def job_attempts(document: JobDocument, *, detailed: str | None = None) -> JobAttempts:
    """The attempts view of a job document; empty when it has no ``attempts`` (a one-session document).
    ``detailed``: the session id the page details (None: the job's default session)."""
    attempts = sorted((entry.attempt for entry in document.attempts or ()), key=lambda attempt: attempt.number)
    if not attempts:
        return JobAttempts(attempts=(), other_ooms=(), shown=None, worst=None, axis_start=NOT_AVAILABLE,
                           axis_end=NOT_AVAILABLE)
    worst_id = document.worst_session
    shown_id = detailed or next((attempt.session_id for attempt in attempts if attempt.default), None)
    starts = [attempt.started_at_ns for attempt in attempts]
    ends = [attempt.ended_at_ns for attempt in attempts if attempt.ended_at_ns is not None]
    axis_start, axis_end = min(starts), max([*starts, *ends])
    span = max(axis_end - axis_start, 1)
    views = []
    for attempt in attempts:
        x = (attempt.started_at_ns - axis_start) / span * TIMELINE_WIDTH
        end = attempt.ended_at_ns
        length = OPEN_END_FRACTION * span if end is None else end - attempt.started_at_ns
        width = length / span * TIMELINE_WIDTH
        duration = NOT_AVAILABLE if end is None else format_duration_s((end - attempt.started_at_ns) / 1e9)
        present, expected = attempt.ranks_present, attempt.ranks_expected
        signal, cause = _cause(attempt)
        views.append(AttemptView(
            number=attempt.number, of=attempt.of, session=SessionId.of(attempt.session_id),
            status=attempt.status.value, verdict="none" if attempt.verdict is None else attempt.verdict.value,
            signal=signal, cause=cause, started=format_utc_ns(attempt.started_at_ns), duration=duration,
            ranks=NOT_AVAILABLE if present is None else f"{present} / {expected}",
            href=_href(attempt.report), error=attempt.error or "", shown=attempt.session_id == shown_id,
            worst=attempt.session_id == worst_id, oom=bool(attempt.oom_ranks), bar_x=round(min(x, TIMELINE_WIDTH), 2),
            bar_width=round(max(width, 2.0), 2), open_end=end is None,
        ))
    ooms = tuple(OtherOom(attempt.describe(), SessionId.of(attempt.session_id), _href(attempt.report))
                 for attempt in attempts if attempt.oom_ranks and attempt.session_id != shown_id)
    return JobAttempts(attempts=tuple(views), other_ooms=ooms, shown=next((v for v in views if v.shown), None),
                       worst=next((v for v in views if v.worst), None), axis_start=format_utc_ns(axis_start),
                       axis_end=format_utc_ns(axis_end))
