"""A parsed fleet.json as the fleet index's view: one row per job, in the pipeline's order
(job id), with the sort keys the inline script orders them by.

The page renders only the first :data:`PAGE_SIZE` rows as HTML (readable without
JavaScript); every row goes to the script as the compact JSON block of
:mod:`stormwatch.reports.fleetdata`, so a 10,000-job fleet stays a few MB and opens fast.

Every string may be hostile telemetry (job ids, signals, errors): kept as plain text,
escaped by the template (and set as text by the script). The report link is only ever a
relative path into the reports folder, percent-encoded segment by segment (no scheme, no ``..``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from stormwatch.analysis.model import IndicatorKind
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.outputs.fleet import JobStatus
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.reports.alertview import AlertBoard, alert_board
from stormwatch.reports.fields import as_int, as_list, as_mapping
from stormwatch.reports.formatting import NOT_AVAILABLE, format_confidence, format_iso, format_utc_ns
from stormwatch.reports.nightlinks import NightLink, older_nights, window_line
from stormwatch.severity import Severity

STATUSES = tuple(status.value for status in JobStatus)
VERDICT_ORDER = {status.value: status.rank for status in VerdictStatus}
SEVERITY_ORDER = {severity.value: severity.level for severity in Severity}
PAGE_SIZE = 100  # rows per page, server-rendered (page 1) and paged by the script
SORT_KEYS = ("job", "status", "verdict", "worst", "cause", "ranks", "diagnosed")  # th data-key values
SUMMARY_KEYS = ("jobs", *STATUSES, *(status.value for status in VerdictStatus if status is not VerdictStatus.EMPTY))
#: The index's "Show" choices (value, label) drawn from the statuses: verdicts worst first, then the
#: jobs that were not diagnosed this run (index.js matches a value against a row's verdict or status).
SHOW_OPTIONS: tuple[tuple[str, str], ...] = (
    *((status.value, status.value) for status in sorted(VerdictStatus, key=lambda status: -status.rank)),
    (JobStatus.FAILED.value, JobStatus.FAILED.value), (JobStatus.REFUSED.value, JobStatus.REFUSED.value),
    (JobStatus.SKIPPED.value, f"unchanged ({JobStatus.SKIPPED.value})"),
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class FleetRow:
    index: int
    job_id: str
    status: str  # one of STATUSES, "none" or "other" (a CSS class)
    verdict: str  # a VERDICT_ORDER key, "none" or "other" (a CSS class)
    worst: str  # a SEVERITY_ORDER key or "none" (a CSS class)
    summary: str
    first_cause: str
    first_cause_detail: str
    most_severe: str
    ranks: str
    missing: str
    diagnosed_at: str
    report_href: str | None
    error: str
    outliers: str  # the job's peer outlier ranks ("3,5"), "" for none
    cut_short: str  # its files that end mid-record ("rank 0 rank_0/telemetry.jsonl at 20.0 s"), "" for none
    sort_keys: tuple[Any, ...]  # per SORT_KEYS name, a value comparable across rows (ascending order)


@dataclass(frozen=True)
class FleetView:
    generated_at: str
    storage: str
    counts: tuple[tuple[str, str], ...]  # (label, value)
    rows: tuple[FleetRow, ...]  # every job, in fleet.json's order
    alerts: AlertBoard | None = None  # per receiver, from fleet.json's ``alerts`` (None: absent)
    folded_at: str | None = None  # when post-job commits were last folded in (None: never said)
    window: str | None = None  # which runs the rows are (fleet.json's ``window``), None: every run
    older: tuple[NightLink, ...] = ()  # nights outside the window, linked to their runs files
    show_options: tuple[tuple[str, str], ...] = SHOW_OPTIONS  # the "Show" filter's (value, label) choices

    @property
    def first_page(self) -> tuple[FleetRow, ...]:
        """The rows rendered as HTML: the first :data:`PAGE_SIZE`."""
        return self.rows[:PAGE_SIZE]


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


def _cause(item: Any) -> tuple[str, str]:
    """``signal on rank r`` and ``severity · phase · confidence · UTC time`` of an indicator."""
    if not isinstance(item, Mapping):
        return "", ""
    headline = f"{_text(item.get('signal'))} on rank {_text(item.get('rank'))}"
    confidence = item.get("confidence")
    parts = [
        _text(item.get("severity")),
        _text(item.get("phase_path")),
        f"confidence {format_confidence(confidence)}" if isinstance(confidence, int | float) else "",
        format_utc_ns(as_int(item.get("timestamp_ns"))) if as_int(item.get("timestamp_ns")) is not None else "",
    ]
    return headline, " · ".join(part for part in parts if part)


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


def _row(index: int, job: Mapping[str, Any]) -> FleetRow:
    status = _known(job.get("status"), STATUSES)
    verdict = _known(job.get("verdict"), VERDICT_ORDER)
    most_severe = job.get(IndicatorKind.MOST_SEVERE)
    most_severe = most_severe if isinstance(most_severe, Mapping) else None
    worst = _known(most_severe.get("severity") if most_severe else None, SEVERITY_ORDER)
    cause, detail = _cause(job.get(IndicatorKind.EARLIEST))
    attempt = job.get("worst_attempt")
    if isinstance(attempt, str) and attempt and cause:  # a job of several sessions: which one the cause is from
        detail = " · ".join(part for part in (detail, f"in {attempt}") if part)
    severe, _ = _cause(most_severe)
    present, expected = as_int(job.get("ranks_present")), as_int(job.get("ranks_expected"))
    missing = [rank for rank in as_list(job.get("missing_ranks")) if as_int(rank) is not None]
    outliers = {as_int(item.get("rank")) for item in as_list(job.get("outlier_ranks")) if isinstance(item, Mapping)}
    ranks = f"{present}/{expected}" if present is not None and expected is not None else NOT_AVAILABLE
    diagnosed_at = job.get("diagnosed_at") if isinstance(job.get("diagnosed_at"), str) else None
    return FleetRow(
        index=index,
        job_id=_text(job.get("job_id")),
        status=status,
        verdict=verdict,
        worst=worst,
        summary=_text(job.get("summary")),
        first_cause=cause,
        first_cause_detail=detail,
        most_severe=severe if severe != cause else "",
        ranks=ranks,
        missing=format_ranks(missing),
        diagnosed_at=format_iso(diagnosed_at),
        report_href=report_href(job.get("report")),
        error=_text(job.get("error")),
        outliers=format_ranks(rank for rank in outliers if rank is not None),
        cut_short=_cut_short(job.get("cut_short")),
        sort_keys=(
            _text(job.get("job_id")).casefold(),
            STATUSES.index(status) if status in STATUSES else len(STATUSES),
            VERDICT_ORDER.get(verdict, -1),
            SEVERITY_ORDER.get(worst, 0),
            cause.casefold(),
            (len(missing), present if present is not None else -1),
            diagnosed_at or "",
        ),
    )


def fleet_view(fleet: Mapping[str, Any]) -> FleetView:
    """Rows in the pipeline's order (the script re-sorts on demand) and the summary counts."""
    jobs = [job for job in as_list(fleet.get("jobs")) if isinstance(job, Mapping)]
    summary = as_mapping(fleet.get("summary"))
    counts = tuple((key, _text(summary.get(key, NOT_AVAILABLE))) for key in SUMMARY_KEYS)
    generated = fleet.get("generated_at") if isinstance(fleet.get("generated_at"), str) else None
    folded = fleet.get("folded_at") if isinstance(fleet.get("folded_at"), str) else None
    return FleetView(
        generated_at=format_iso(generated),
        storage=_text(fleet.get("storage")) or NOT_AVAILABLE,
        counts=counts,
        rows=tuple(_row(index, job) for index, job in enumerate(jobs)),
        alerts=alert_board(fleet.get("alerts")),
        folded_at=None if folded is None else format_iso(folded),
        window=window_line(fleet),
        older=older_nights(fleet),
    )
