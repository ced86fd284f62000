"""A parsed fleet.json as the fleet index's view: one row per job, most severe first, with the
sort keys the inline script orders them by, and the "Needs attention" list above them
(:mod:`stormwatch.reports.attention`).

Rows are in the table's default order: by severity (critical, warning, failed, refused, info,
clean, empty), newest first within one (``diagnosed_at``, else ``committed_at``), then by job id
(as fleet.json orders them).
The page renders only the first :data:`PAGE_SIZE` rows as HTML (readable without
JavaScript); every row goes to the script as the compact JSON block of
:mod:`stormwatch.reports.fleetdata`, so a 10,000-job fleet stays a few MB and opens fast.
A row's cause is the one that made its verdict, in plain words (:mod:`stormwatch.reports.fleetcause`).

Every string may be hostile telemetry (job ids, signals, errors): kept as plain text,
escaped by the template (and set as text by the script). The report link is only ever a
relative path into the reports folder, percent-encoded segment by segment (no scheme, no ``..``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.outputs.fleet import JobStatus
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.reports.alertview import AlertBoard, alert_board
from stormwatch.reports.attention import Attention, attention
from stormwatch.reports.fields import as_int, as_list, as_mapping
from stormwatch.reports.fleetcause import missing_text, other_label, verdict_causes
from stormwatch.reports.formatting import NOT_AVAILABLE, format_iso, short_id
from stormwatch.reports.nightlinks import NightLink, older_nights, window_line
from stormwatch.signals import HIDDEN_GAP_MEANING, SignalText, describe

STATUSES = tuple(status.value for status in JobStatus)
#: What a status is called on the page: a job skipped because its inputs did not change is "unchanged",
#: as the command line says (the stored value stays ``skipped``).
STATUS_LABELS = {**{status: status for status in STATUSES}, JobStatus.SKIPPED.value: "unchanged"}
VERDICT_ORDER = {status.value: status.rank for status in VerdictStatus}
#: The table's default order, most severe first: verdicts, and the jobs not diagnosed where they belong.
TABLE_LEVELS = {VerdictStatus.CRITICAL.value: 6, VerdictStatus.WARNING.value: 5, JobStatus.FAILED.value: 4,
                JobStatus.REFUSED.value: 3, VerdictStatus.INFO.value: 2, VerdictStatus.CLEAN.value: 1,
                VerdictStatus.EMPTY.value: 0}
PAGE_SIZE = 100  # rows per page, server-rendered (page 1) and paged by the script
SORT_KEYS = ("severity", "job", "status", "cause", "ranks", "diagnosed")  # th data-key values
DEFAULT_SORT = "severity"  # the rows' own order: descending on this key
SUMMARY_KEYS = ("jobs", *STATUSES, *(status.value for status in VerdictStatus if status is not VerdictStatus.EMPTY))
#: The index's "Show" choices (value, label) drawn from the statuses: verdicts worst first, then the
#: jobs that were not diagnosed this run (index.js matches a value against a row's verdict or status).
SHOW_OPTIONS: tuple[tuple[str, str], ...] = (
    *((status.value, status.value) for status in sorted(VerdictStatus, key=lambda status: -status.rank)),
    *((status, STATUS_LABELS[status]) for status in (JobStatus.FAILED.value, JobStatus.REFUSED.value,
                                                     JobStatus.SKIPPED.value)),
)
LOAD_WARNINGS_ANCHOR = "load-warnings"  # the job page's section of load warnings
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_SESSION_IN_TEXT = re.compile(r"\(session ([^()\s]+)\)")  # a verdict summary names its attempt's session


@dataclass(frozen=True)
class FleetRow:
    index: int  # position in the default order (the data block's order)
    job_id: str
    status: str  # one of STATUSES, "none" or "other" (a CSS class)
    verdict: str  # a VERDICT_ORDER key, "none" or "other" (a CSS class)
    summary: str
    signal: SignalText | None  # the signal of the cause that made the verdict
    cause_where: str  # after the signal: " on rank 3 (gpu-node-01, GPU 3)", "" for none
    cause_detail: str  # "20.0 s into the job · in train / backward · confidence 51 %"
    also: tuple[str, SignalText, str] | None  # the other first cause: (label, signal, the words after it)
    session: str  # the session of a job of several that the cause comes from (full id), "" for none
    ranks: str
    missing: str
    diagnosed_at: str
    report_href: str | None
    error: str
    outliers: str  # the job's peer outlier ranks ("3,5"), "" for none
    cut_short: str  # its files that end mid-record ("rank 0 rank_0/telemetry.jsonl at 20.0 s"), "" for none
    load_warnings: int  # lines or files the loader skipped or doubted (coverage.load_warnings), 0 for none
    needs_attention: bool  # the "Needs attention" list counts the job (the table's filter of that name)
    sort_keys: tuple[Any, ...]  # per SORT_KEYS name, a value comparable across rows (ascending order)

    @property
    def status_label(self) -> str:
        return STATUS_LABELS.get(self.status, self.status)

    @property
    def session_short(self) -> str:
        return short_id(self.session)

    @property
    def load_href(self) -> str | None:
        """The job page's load warnings, when the job has a page."""
        return None if self.report_href is None else f"{self.report_href}#{LOAD_WARNINGS_ANCHOR}"


@dataclass(frozen=True)
class FleetView:
    generated_at: str
    storage: str
    counts: tuple[tuple[str, str, str], ...]  # (key: a CSS class, label, value)
    rows: tuple[FleetRow, ...]  # every job, in the default order (most severe first)
    attention: Attention
    alerts: AlertBoard | None = None  # per receiver, from fleet.json's ``alerts`` (None: absent)
    folded_at: str | None = None  # when post-job commits were last folded in (None: never said)
    window: str | None = None  # which runs the rows are (fleet.json's ``window``), None: every run
    older: tuple[NightLink, ...] = ()  # nights outside the window, linked to their runs files
    show_options: tuple[tuple[str, str], ...] = SHOW_OPTIONS  # the "Show" filter's (value, label) choices

    @property
    def first_page(self) -> tuple[FleetRow, ...]:
        """The rows rendered as HTML: the first :data:`PAGE_SIZE`."""
        return self.rows[:PAGE_SIZE]

    @property
    def status_column(self) -> bool:
        return status_column(self.rows)

    @property
    def gap_meaning(self) -> str:
        return HIDDEN_GAP_MEANING

    @property
    def gap_note(self) -> str | None:
        """Where the page first speaks of hidden memory and explains it: ``attention`` or ``jobs``; None
        when neither does."""
        if self.attention.mentions_hidden_gap:
            return "attention"
        words = (f"{row.signal.title} {row.signal.meaning}" for row in self.first_page if row.signal is not None)
        return "jobs" if any("hidden" in text.lower() for text in words) else None


def status_column(rows: Sequence[FleetRow]) -> bool:
    """Whether the table has a Status column: only when some job was not diagnosed by this audit."""
    return any(row.status != JobStatus.DIAGNOSED.value for row in rows)


def report_href(value: Any) -> str | None:
    """A relative link to a job's report (``job-1/report.html``), each segment percent-encoded;
    None for anything absolute, with a scheme, or climbing out with ``..``."""
    if not isinstance(value, str) or not value or value.startswith(("/", "\\")) or _SCHEME.match(value):
        return None
    segments = value.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        return None
    return "/".join(quote(segment, safe="") for segment in segments)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _known(value: Any, allowed: Mapping[str, int] | tuple[str, ...]) -> str:
    """``value`` if allowed (it becomes a CSS class), ``none`` for null, else ``other``."""
    if value is None:
        return "none"
    return value if isinstance(value, str) and value in allowed else "other"


CUT_SHORT_NAMED = 3  # files named in a row's cut-short note; the rest are counted


def _cut_short(value: Any) -> str:
    """fleet.json's ``cut_short`` entries as one line: which file of which rank ended mid-record, when."""
    items = [item for item in as_list(value) if isinstance(item, Mapping)]
    named = []
    for item in items[:CUT_SHORT_NAMED]:
        rank, at_s = as_int(item.get("rank")), item.get("at_s")
        when = f" at {at_s:.1f} s" if isinstance(at_s, int | float) and not isinstance(at_s, bool) else ""
        named.append(f"{'' if rank is None else f'rank {rank} '}{_text(item.get('file')) or 'a file'}{when}")
    more = f" (+{len(items) - CUT_SHORT_NAMED} more)" if len(items) > CUT_SHORT_NAMED else ""
    return "; ".join(named) + more


def _when(job: Mapping[str, Any]) -> str:
    """The row's time for "newest first": its diagnosis, else its commit (ISO 8601), "" for none."""
    for name in ("diagnosed_at", "committed_at"):
        if isinstance(job.get(name), str):
            return str(job[name])
    return ""


def _severity_key(job: Mapping[str, Any]) -> tuple[int, str]:
    """The "severity" sort key, ascending: (:data:`TABLE_LEVELS` of its verdict, else its status; the
    row's time, :func:`_when`)."""
    verdict, status = _known(job.get("verdict"), VERDICT_ORDER), _known(job.get("status"), STATUSES)
    return TABLE_LEVELS.get(verdict, TABLE_LEVELS.get(status, -1)), _when(job)


def _row(index: int, job: Mapping[str, Any], attention_ids: frozenset[str]) -> FleetRow:
    status = _known(job.get("status"), STATUSES)
    verdict = _known(job.get("verdict"), VERDICT_ORDER)
    shown, other = verdict_causes(job)
    detail = shown.detail() if shown is not None else ""
    attempt = job.get("worst_attempt")
    if isinstance(attempt, str) and attempt and shown is not None:  # a job of several sessions: which one
        detail = " · ".join(part for part in (detail, f"in {attempt}") if part)
    also = None
    if other is not None:
        words = ", ".join(part for part in (other.where, other.when, other.phase) if part)
        also = (other_label(other), other.signal, f"{' ' if words else ''}{words} ({other.severity})")
    session = job.get("worst_session") if isinstance(attempt, str) and attempt else None
    present, expected = as_int(job.get("ranks_present")), as_int(job.get("ranks_expected"))
    missing = [rank for rank in as_list(job.get("missing_ranks")) if as_int(rank) is not None]
    outliers = {as_int(item.get("rank")) for item in as_list(job.get("outlier_ranks")) if isinstance(item, Mapping)}
    ranks = f"{present}/{expected}" if present is not None and expected is not None else NOT_AVAILABLE
    diagnosed_at = job.get("diagnosed_at") if isinstance(job.get("diagnosed_at"), str) else None
    signal, where = (None, "") if shown is None else (shown.signal, f" {shown.where}" if shown.where else "")
    if shown is None and missing:  # no first cause: the ranks that wrote nothing are the reason
        signal, where = describe("missing_ranks"), f": {missing_text(missing, expected)}"
    title = "" if signal is None else signal.title
    return FleetRow(
        index=index,
        job_id=_text(job.get("job_id")),
        status=status,
        verdict=verdict,
        summary=_SESSION_IN_TEXT.sub(lambda found: f"(session {short_id(found.group(1))})", _text(job.get("summary"))),
        signal=signal,
        cause_where=where,
        cause_detail=detail,
        also=also,
        session=session if isinstance(session, str) else "",
        ranks=ranks,
        missing=format_ranks(missing),
        diagnosed_at=format_iso(diagnosed_at),
        report_href=report_href(job.get("report")),
        error=_text(job.get("error")),
        outliers=format_ranks(rank for rank in outliers if rank is not None),
        cut_short=_cut_short(job.get("cut_short")),
        load_warnings=max(as_int(as_mapping(job.get("coverage")).get("load_warnings")) or 0, 0),
        needs_attention=_text(job.get("job_id")) in attention_ids,
        sort_keys=(
            _severity_key(job),
            _text(job.get("job_id")).casefold(),
            STATUSES.index(status) if status in STATUSES else len(STATUSES),
            title.casefold(),
            (len(missing), present if present is not None else -1),
            diagnosed_at or "",
        ),
    )


def default_order(jobs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``jobs`` (fleet.json rows) most severe first, newest first within a severity, then by job id."""
    ordered = sorted(jobs, key=lambda job: _text(job.get("job_id")))  # fleet.json's order among equals
    ordered.sort(key=_severity_key, reverse=True)  # stable: equal keys keep job id order
    return ordered


def fleet_view(fleet: Mapping[str, Any]) -> FleetView:
    """Rows in the default order (the script re-sorts on demand), the summary counts and what
    needs attention."""
    jobs = [job for job in as_list(fleet.get("jobs")) if isinstance(job, Mapping)]
    summary = as_mapping(fleet.get("summary"))
    counts = tuple((key, STATUS_LABELS.get(key, key), _text(summary.get(key, NOT_AVAILABLE))) for key in SUMMARY_KEYS)
    generated = fleet.get("generated_at") if isinstance(fleet.get("generated_at"), str) else None
    folded = fleet.get("folded_at") if isinstance(fleet.get("folded_at"), str) else None
    listed = [item for item in as_list(fleet.get("attention")) if isinstance(item, Mapping)]
    by_id = {_text(job.get("job_id")): job for job in [*listed, *jobs]}  # a row of the table wins
    needing = attention(fleet, jobs, lambda job_id: report_href(by_id[job_id].get("report")) if job_id in by_id
                        else None)
    rows = [_row(index, job, needing.job_ids) for index, job in enumerate(default_order(jobs))]
    return FleetView(
        generated_at=format_iso(generated),
        storage=_text(fleet.get("storage")) or NOT_AVAILABLE,
        counts=counts,
        rows=tuple(rows),
        attention=needing,
        alerts=alert_board(fleet.get("alerts")),
        folded_at=None if folded is None else format_iso(folded),
        window=window_line(fleet),
        older=older_nights(fleet),
    )
