"""A job's attempts on its report page (model.json's ``attempts``), and where a page sits.

:func:`job_attempts` reads the ``attempts`` member: one :class:`AttemptView` per attempt in time
order with its status, verdict, first cause and the link to its own report, a timeline (each
attempt's span on one time axis, SVG geometry in viewBox units) and the OOMs of attempts other than
the one the page details, which the page shows at the top. Session ids and signals are telemetry:
plain text here, escaped by the template. Links are only ever
``sessions/<percent-encoded id>/report.html``, relative to the job's report folder; anything else
in the document is not linked.

:class:`PageNav` says where a page sits: the job's page links to the fleet index; a session's page
(``<job>/sessions/<id>/report.html``) to the index, back to its job's page, and names its attempt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stormwatch.outputs.document import JobDocument
from stormwatch.reports.formatting import NOT_AVAILABLE, format_duration_s, format_utc_ns

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


@dataclass(frozen=True)
class AttemptView:
    number: int
    of: int
    session_id: str
    status: str  # an attempt status (a CSS class)
    verdict: str  # a verdict status, or "none" (not diagnosed)
    cause: str
    started: str
    duration: str
    ranks: str
    href: str | None
    error: str
    shown: bool  # the session this page details (the job's default session)
    worst: bool  # the session the job's verdict comes from
    oom: bool
    bar_x: float
    bar_width: float
    open_end: bool


@dataclass(frozen=True)
class EarlierOom:
    """An OOM in an attempt other than the one the page details."""

    text: str  # "attempt 1 of 2, interrupted, OOM on rank 3"
    session_id: str
    href: str | None


@dataclass(frozen=True)
class JobAttempts:
    attempts: tuple[AttemptView, ...]
    earlier_ooms: tuple[EarlierOom, ...]
    shown: str  # "attempt 2 of 2" (the attempt the page details) or ""
    worst: str  # "attempt 1 of 2" (the verdict's) or ""
    axis_start: str
    axis_end: str


def _href(value: str | None) -> str | None:
    return value if value is not None and SESSION_REPORT_HREF.match(value) else None


def job_attempts(document: JobDocument) -> JobAttempts:
    """The attempts view of a job document; empty when it has no ``attempts`` (a one-session document)."""
    attempts = sorted((entry.attempt for entry in document.attempts or ()), key=lambda attempt: attempt.number)
    if not attempts:
        return JobAttempts(attempts=(), earlier_ooms=(), shown="", worst="", axis_start=NOT_AVAILABLE,
                           axis_end=NOT_AVAILABLE)
    worst_id = document.worst_session
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
        ranks = NOT_AVAILABLE if present is None else f"{present} / {expected}"
        views.append(AttemptView(
            number=attempt.number, of=attempt.of, session_id=attempt.session_id,
            status=attempt.status.value,
            verdict="none" if attempt.verdict is None else attempt.verdict.value,
            cause=attempt.cause_text(), started=format_utc_ns(attempt.started_at_ns), duration=duration, ranks=ranks,
            href=_href(attempt.report), error=attempt.error or "", shown=attempt.default,
            worst=attempt.session_id == worst_id, oom=bool(attempt.oom_ranks), bar_x=round(min(x, TIMELINE_WIDTH), 2),
            bar_width=round(max(width, 2.0), 2), open_end=end is None,
        ))
    ooms = tuple(EarlierOom(attempt.describe(), attempt.session_id, _href(attempt.report))
                 for attempt in attempts if attempt.oom_ranks and not attempt.default)
    shown = next((f"attempt {a.number} of {a.of}" for a in attempts if a.default), "")
    worst = next((f"attempt {a.number} of {a.of}" for a in attempts if a.session_id == worst_id), "")
    return JobAttempts(attempts=tuple(views), earlier_ooms=ooms, shown=shown, worst=worst,
                       axis_start=format_utc_ns(axis_start), axis_end=format_utc_ns(axis_end))
