"""A job document (:class:`~stormwatch.outputs.document.JobDocument`) as the job report's view:
plain values, formatted units, chart geometry.

The document is typed and was validated when read; its telemetry (ids, hosts, labels) may still be
hostile, so all text stays plain here and the templates escape it. Absent values read as "—".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stormwatch.analysis.model import AnomalyIndicator, IndicatorKind, RankDiagnosticsRow
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.events.sessions import SessionSummary
from stormwatch.formats.oom_dump import OomDump
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.reports.charts import Anomaly, RankChart, chart_buckets, rank_chart
from stormwatch.reports.formatting import (
    NOT_AVAILABLE,
    format_bytes,
    format_confidence,
    format_count,
    format_duration_s,
    format_iso,
    format_offset,
    format_utc_ns,
)
from stormwatch.reports.heatstrip import FirstAnomaly, HeatStrip, heat_strip
from stormwatch.reports.markers import EventRow, event_rows, rank_marks
from stormwatch.reports.timelines import load_timelines
from stormwatch.severity import Severity

SEVERITIES = tuple(severity.value for severity in Severity)
INDICATOR_HEADINGS: dict[str, str] = {IndicatorKind.EARLIEST: "Earliest anomaly",
                                      IndicatorKind.MOST_SEVERE: "Most severe anomaly"}
MAX_CHARTED_RANKS = 64
MAX_EVENT_ROWS = 300


@dataclass(frozen=True)
class IndicatorView:
    heading: str
    rank: int | None
    signal: str
    severity: str  # one of SEVERITIES or "other" (a CSS class)
    offset: str
    utc: str
    phase_path: str
    confidence: str
    reason_codes: tuple[str, ...]
    details: str


@dataclass(frozen=True)
class RowView:
    rank: int | None
    missing: bool
    availability: str
    samples: str
    allocated_delta: str
    reserved_delta: str
    gap_latest: str
    gap_peak: str
    has_anomaly: bool
    first_signal: str
    first_offset: str
    first_phase: str
    charted: bool


@dataclass(frozen=True)
class SessionView:
    session_id: str
    selected: bool
    status: str
    host: str
    pid: str
    rank: str
    world_size: str
    started: str
    duration: str
    events: str
    source: str


@dataclass(frozen=True)
class JobView:
    job_id: str
    source: str
    generated_at: str
    engine_version: str
    fingerprint: str
    selected_session_id: str
    verdict: str  # a verdict status (a CSS class)
    summary: str
    exit_code: str
    present: int
    expected: int
    missing_ranks: str
    job_start: str
    duration: str
    indicators: tuple[IndicatorView, ...]
    rows: tuple[RowView, ...]
    charts: tuple[RankChart, ...]
    charts_note: str
    heat: HeatStrip | None
    sessions: tuple[SessionView, ...]
    sources: tuple[str, ...]
    warnings: tuple[str, ...]
    events: tuple[EventRow, ...]
    events_omitted: int

    @property
    def nothing_loaded(self) -> bool:
        """The verdict says the job held nothing loadable."""
        return self.verdict == VerdictStatus.EMPTY


def _text(value: Any) -> str:
    return NOT_AVAILABLE if value is None or value == "" else str(value)


def _known(value: str, allowed: Sequence[str]) -> str:
    return value if value in allowed else "other"


def _indicator(item: AnomalyIndicator, origin_ns: int | None) -> IndicatorView:
    return IndicatorView(
        heading=INDICATOR_HEADINGS[item.kind],
        rank=item.rank,
        signal=_text(item.signal),
        severity=_known(item.severity, SEVERITIES),
        offset=format_offset(item.timestamp_ns, origin_ns),
        utc=format_utc_ns(item.timestamp_ns),
        phase_path=_text(item.phase_path),
        confidence=format_confidence(item.confidence),
        reason_codes=item.reason_codes,
        details=_text(item.details),
    )


def _row(item: RankDiagnosticsRow, origin_ns: int | None, charted: set[int]) -> RowView:
    missing = item.availability == "missing"
    blank = NOT_AVAILABLE if missing else None
    return RowView(
        rank=item.rank,
        missing=missing,
        availability=_text(item.availability),
        samples=blank or format_count(item.samples),
        allocated_delta=blank or format_bytes(item.allocated_delta_bytes, signed=True),
        reserved_delta=blank or format_bytes(item.reserved_delta_bytes, signed=True),
        gap_latest=blank or format_bytes(item.hidden_gap_latest_bytes),
        gap_peak=blank or format_bytes(item.hidden_gap_peak_abs_bytes),
        has_anomaly=item.has_anomaly,
        first_signal=_text(item.first_anomaly_signal),
        first_offset=format_offset(item.first_anomaly_timestamp_ns, origin_ns),
        first_phase=_text(item.first_anomaly_phase_path),
        charted=item.rank in charted,
    )


def _session(item: SessionSummary, selected_id: str | None) -> SessionView:
    started, ended = item.started_at_ns, item.ended_at_ns
    duration = format_duration_s((ended - started) / 1e9) if ended is not None else ""
    return SessionView(
        session_id=_text(item.session_id),
        selected=item.session_id == selected_id,
        status=_text(item.status.value),
        host=_text(item.host),
        pid=_text(item.pid),
        rank=_text(item.rank),
        world_size=_text(item.world_size),
        started=format_utc_ns(started),
        duration=duration or NOT_AVAILABLE,
        events=format_count(item.event_count),
        source=_text(item.source),
    )


def _charted_ranks(available: Sequence[int], priority: Sequence[int]) -> list[int]:
    """All ranks with a timeline, or the first MAX_CHARTED_RANKS by priority (first causes, anomalies)."""
    if len(available) <= MAX_CHARTED_RANKS:
        return list(available)
    order = list(dict.fromkeys([*[r for r in priority if r in available], *available]))
    return sorted(order[:MAX_CHARTED_RANKS])


def _anomalies(
    rows: Sequence[RankDiagnosticsRow], indicators: Sequence[AnomalyIndicator], origin_ns: int | None
) -> tuple[dict[int, list[Anomaly]], dict[int, FirstAnomaly]]:
    """Per rank, the points to mark on its chart (its first anomaly, the job's first causes on
    it) and, for the heat strip, its first anomaly."""
    anomalies: dict[int, list[Anomaly]] = {}
    first_anomalies: dict[int, FirstAnomaly] = {}
    for row in rows:
        stamp = row.first_anomaly_timestamp_ns
        if stamp is not None:
            title = f"rank {row.rank} first anomaly: {row.first_anomaly_signal} at {format_offset(stamp, origin_ns)}"
            anomalies.setdefault(row.rank, []).append(Anomaly(stamp, "first", title))
            first_anomalies[row.rank] = FirstAnomaly(stamp, title)
    for item in indicators:
        role = item.kind.value
        title = (f"{INDICATOR_HEADINGS[item.kind]}: {item.signal} ({item.severity}) "
                 f"at {format_offset(item.timestamp_ns, origin_ns)}")
        anomalies.setdefault(item.rank, []).append(Anomaly(item.timestamp_ns, role, title))
    return anomalies, first_anomalies


def oom_sentences(dumps: Sequence[OomDump]) -> dict[int, str]:
    """By rank, what its OOM dump says (``Out of memory on rank 3: tried to allocate ...``), for the
    ranks with exactly one dump: with several, which OOM marker each explains is not known."""
    ranks = [dump.rank for dump in dumps]
    sentence = {dump.rank: dump.sentence() for dump in dumps if dump.rank is not None and ranks.count(dump.rank) == 1}
    return {rank: text[:1].upper() + text[1:] for rank, text in sentence.items() if rank is not None}


def job_view(document: JobDocument) -> JobView:
    """Everything the job template shows, computed from one model.json document."""
    model = document.model
    frame, timelines = load_timelines(document)
    origin = frame.origin_ns
    marks = rank_marks(model, frame, oom_text=oom_sentences(document.oom_dumps))
    anomalies, first_anomalies = _anomalies(model.rows, model.indicators, origin)
    indicator_ranks = [item.rank for item in model.indicators]
    anomalous = [row.rank for row in model.rows if row.has_anomaly]
    charted = _charted_ranks(sorted(timelines), [*indicator_ranks, *anomalous])
    buckets = chart_buckets(len(charted))
    charts = tuple(
        rank_chart(rank, timelines[rank], frame=frame, markers=marks[rank].points if rank in marks else (),
                   phases=marks[rank].phases if rank in marks else (), anomalies=anomalies.get(rank, ()),
                   buckets=buckets)
        for rank in charted
    )
    expected, missing = model.expected_ranks, model.missing_ranks
    earliest = next((item for item in model.indicators if item.kind == IndicatorKind.EARLIEST), None)
    heat_ranks = sorted(set(expected) | set(timelines))
    heat = heat_strip(heat_ranks, timelines, missing=set(missing), frame=frame, first_anomalies=first_anomalies,
                      first_cause_rank=earliest.rank if earliest else None) if heat_ranks else None
    events, omitted = event_rows(marks, origin_ns=origin, limit=MAX_EVENT_ROWS)
    verdict = document.verdict
    note = "" if len(charted) == len(timelines) else (
        f"Charts for {len(charted)} of {len(timelines)} ranks (first causes and anomalous ranks first); "
        "the heat strip covers every rank.")
    return JobView(
        job_id=_text(document.job_id),
        source=_text(document.source),
        generated_at=format_iso(document.generated_at.isoformat()),
        engine_version=_text(document.engine_version),
        fingerprint=_text(document.input_fingerprint),
        selected_session_id=_text(document.selected_session_id),
        verdict=verdict.status.value,
        summary=_text(verdict.summary),
        exit_code=str(int(verdict.exit_code)),
        present=len(model.present_ranks),
        expected=len(expected),
        missing_ranks=format_ranks(missing),
        job_start=format_utc_ns(origin),
        duration=format_duration_s((frame.end_ns - origin) / 1e9) if origin is not None and frame.end_ns
        else NOT_AVAILABLE,
        indicators=tuple(_indicator(item, origin) for item in model.indicators),
        rows=tuple(_row(item, origin, set(charted)) for item in model.rows),
        charts=charts,
        charts_note=note,
        heat=heat,
        sessions=tuple(_session(item, document.selected_session_id) for item in document.sessions),
        sources=document.sources_loaded,
        warnings=tuple(dict.fromkeys([*document.warnings, *model.warnings])),
        events=events,
        events_omitted=omitted,
    )
