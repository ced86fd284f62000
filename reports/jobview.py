"""A parsed model.json as the job report's view: plain values, formatted units, chart geometry.

Reads the document defensively (wrong types become "—", never an exception) since
it may come from any engine version or carry hostile telemetry. All text stays
plain here; the templates escape it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stormwatch.analysis.model import IndicatorKind
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.reports.charts import Anomaly, RankChart, chart_buckets, rank_chart
from stormwatch.reports.fields import as_int, as_list, as_mapping
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

VERDICTS = tuple(status.value for status in VerdictStatus)
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
    verdict: str  # one of VERDICTS or "other" (a CSS class)
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


def _known(value: Any, allowed: Sequence[str]) -> str:
    return value if isinstance(value, str) and value in allowed else "other"


def _ints(value: Any) -> list[int]:
    return [item for item in as_list(value) if as_int(item) is not None]


def _bytes(value: Any, *, signed: bool = False) -> str:
    return format_bytes(value if isinstance(value, int | float) and not isinstance(value, bool) else None,
                        signed=signed)


def _indicator(item: Mapping[str, Any], origin_ns: int | None) -> IndicatorView:
    stamp = as_int(item.get("timestamp_ns"))
    kind = item.get("kind")
    confidence = item.get("confidence")
    return IndicatorView(
        heading=INDICATOR_HEADINGS.get(kind, _text(kind)) if isinstance(kind, str) else "Anomaly",
        rank=as_int(item.get("rank")),
        signal=_text(item.get("signal")),
        severity=_known(item.get("severity"), SEVERITIES),
        offset=format_offset(stamp, origin_ns),
        utc=format_utc_ns(stamp),
        phase_path=_text(item.get("phase_path")),
        confidence=format_confidence(confidence if isinstance(confidence, int | float) else None),
        reason_codes=tuple(str(code) for code in as_list(item.get("reason_codes"))),
        details=_text(item.get("details")),
    )


def _row(item: Mapping[str, Any], origin_ns: int | None, charted: set[int]) -> RowView:
    missing = item.get("availability") == "missing"
    rank = as_int(item.get("rank"))
    blank = NOT_AVAILABLE if missing else None
    return RowView(
        rank=rank,
        missing=missing,
        availability=_text(item.get("availability")),
        samples=blank or format_count(as_int(item.get("samples"))),
        allocated_delta=blank or _bytes(item.get("allocated_delta_bytes"), signed=True),
        reserved_delta=blank or _bytes(item.get("reserved_delta_bytes"), signed=True),
        gap_latest=blank or _bytes(item.get("hidden_gap_latest_bytes")),
        gap_peak=blank or _bytes(item.get("hidden_gap_peak_abs_bytes")),
        has_anomaly=item.get("has_anomaly") is True,
        first_signal=_text(item.get("first_anomaly_signal")),
        first_offset=format_offset(as_int(item.get("first_anomaly_timestamp_ns")), origin_ns),
        first_phase=_text(item.get("first_anomaly_phase_path")),
        charted=rank in charted,
    )


def _session(item: Mapping[str, Any], selected_id: Any) -> SessionView:
    started, ended = as_int(item.get("started_at_ns")), as_int(item.get("ended_at_ns"))
    duration = format_duration_s((ended - started) / 1e9) if started is not None and ended is not None else ""
    return SessionView(
        session_id=_text(item.get("session_id")),
        selected=item.get("session_id") == selected_id,
        status=_text(item.get("status")),
        host=_text(item.get("host")),
        pid=_text(item.get("pid")),
        rank=_text(item.get("rank")),
        world_size=_text(item.get("world_size")),
        started=format_utc_ns(started),
        duration=duration or NOT_AVAILABLE,
        events=format_count(as_int(item.get("events"))),
        source=_text(item.get("source")),
    )


def _charted_ranks(available: Sequence[int], priority: Sequence[int]) -> list[int]:
    """All ranks with a timeline, or the first MAX_CHARTED_RANKS by priority (first causes, anomalies)."""
    if len(available) <= MAX_CHARTED_RANKS:
        return list(available)
    order = list(dict.fromkeys([*[r for r in priority if r in available], *available]))
    return sorted(order[:MAX_CHARTED_RANKS])


def _anomalies(
    rows: Sequence[Mapping[str, Any]], indicators: Sequence[Mapping[str, Any]], origin_ns: int | None
) -> tuple[dict[int, list[Anomaly]], dict[int, FirstAnomaly]]:
    """Per rank, the points to mark on its chart (its first anomaly, the job's first causes on
    it) and, for the heat strip, its first anomaly."""
    anomalies: dict[int, list[Anomaly]] = {}
    first_anomalies: dict[int, FirstAnomaly] = {}
    for item in rows:
        rank, stamp = as_int(item.get("rank")), as_int(item.get("first_anomaly_timestamp_ns"))
        if rank is not None and stamp is not None:
            signal = item.get("first_anomaly_signal")
            title = f"rank {rank} first anomaly: {signal} at {format_offset(stamp, origin_ns)}"
            anomalies.setdefault(rank, []).append(Anomaly(stamp, "first", title))
            first_anomalies[rank] = FirstAnomaly(stamp, title)
    for item in indicators:
        rank, stamp = as_int(item.get("rank")), as_int(item.get("timestamp_ns"))
        if rank is not None and stamp is not None:
            role = _known(item.get("kind"), tuple(IndicatorKind))
            title = (f"{INDICATOR_HEADINGS.get(role, 'anomaly')}: {item.get('signal')} ({item.get('severity')}) "
                     f"at {format_offset(stamp, origin_ns)}")
            anomalies.setdefault(rank, []).append(Anomaly(stamp, role, title))
    return anomalies, first_anomalies


def job_view(document: Mapping[str, Any]) -> JobView:
    """Everything the job template shows, computed from one model.json document."""
    model = as_mapping(document.get("model"))
    frame, timelines = load_timelines(document)
    origin = frame.origin_ns
    marks = rank_marks(model, frame)
    indicator_items = [item for item in as_list(model.get("indicators")) if isinstance(item, Mapping)]
    row_items = [item for item in as_list(model.get("rows")) if isinstance(item, Mapping)]
    anomalies, first_anomalies = _anomalies(row_items, indicator_items, origin)
    indicator_ranks = [r for r in (as_int(item.get("rank")) for item in indicator_items) if r is not None]
    anomalous = [r for r in (as_int(item.get("rank")) for item in row_items if item.get("has_anomaly") is True)
                 if r is not None]
    charted = _charted_ranks(sorted(timelines), [*indicator_ranks, *anomalous])
    buckets = chart_buckets(len(charted))
    charts = tuple(
        rank_chart(rank, timelines[rank], frame=frame, markers=marks[rank].points if rank in marks else (),
                   phases=marks[rank].phases if rank in marks else (), anomalies=anomalies.get(rank, ()),
                   buckets=buckets)
        for rank in charted
    )
    expected = _ints(model.get("expected_ranks"))
    missing = _ints(model.get("missing_ranks"))
    earliest = next((item for item in indicator_items if item.get("kind") == IndicatorKind.EARLIEST), None)
    heat_ranks = sorted(set(expected) | set(timelines))
    heat = heat_strip(heat_ranks, timelines, missing=set(missing), frame=frame, first_anomalies=first_anomalies,
                      first_cause_rank=as_int(earliest.get("rank")) if earliest else None) if heat_ranks else None
    events, omitted = event_rows(marks, origin_ns=origin, limit=MAX_EVENT_ROWS)
    verdict = as_mapping(document.get("verdict"))
    warnings = [str(w) for w in [*as_list(document.get("warnings")), *as_list(model.get("warnings"))]]
    note = "" if len(charted) == len(timelines) else (
        f"Charts for {len(charted)} of {len(timelines)} ranks (first causes and anomalous ranks first); "
        "the heat strip covers every rank.")
    return JobView(
        job_id=_text(document.get("job_id")),
        source=_text(document.get("source")),
        generated_at=format_iso(document.get("generated_at") if isinstance(document.get("generated_at"), str)
                                else None),
        engine_version=_text(document.get("engine_version")),
        fingerprint=_text(document.get("input_fingerprint")),
        selected_session_id=_text(document.get("selected_session_id")),
        verdict=_known(verdict.get("status"), VERDICTS),
        summary=_text(verdict.get("summary")),
        exit_code=_text(verdict.get("exit_code")),
        present=len(_ints(model.get("present_ranks"))),
        expected=len(expected),
        missing_ranks=format_ranks(missing),
        job_start=format_utc_ns(origin),
        duration=format_duration_s((frame.end_ns - origin) / 1e9) if origin is not None and frame.end_ns
        else NOT_AVAILABLE,
        indicators=tuple(_indicator(item, origin) for item in indicator_items),
        rows=tuple(_row(item, origin, set(charted)) for item in row_items),
        charts=charts,
        charts_note=note,
        heat=heat,
        sessions=tuple(_session(item, document.get("selected_session_id"))
                       for item in as_list(document.get("sessions")) if isinstance(item, Mapping)),
        sources=tuple(str(item) for item in as_list(document.get("sources_loaded"))),
        warnings=tuple(dict.fromkeys(warnings)),
        events=events,
        events_omitted=omitted,
    )
