"""A job document (:class:`~stormwatch.outputs.document.JobDocument`) as the job report's view:
plain values, formatted units, chart geometry.

The page tells the story of one attempt: the one its verdict comes from when that attempt's own
document is given (``detail``, see :mod:`stormwatch.reports.jobdetail`), else the document's own
session. The banner (verdict, summary, load warnings) is the job's; the first causes, ranks, charts,
heat strip and events are the detailed attempt's.

The document is typed and was validated when read; its telemetry (ids, hosts, labels) may still be
hostile, so all text stays plain here and the templates escape it. Absent values read as "—".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from stormwatch.analysis.model import AnomalyIndicator, IndicatorKind, RankDiagnosticsRow
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.events.sessions import SessionSummary
from stormwatch.formats.oom_dump import OomDump
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.reports.charts import Anomaly, RankChart, chart_buckets, legend, rank_chart
from stormwatch.reports.formatting import (
    NOT_AVAILABLE,
    format_bytes,
    format_count,
    format_duration_s,
    format_iso,
    format_offset,
    format_utc_ns,
)
from stormwatch.reports.heatstrip import FirstAnomaly, HeatStrip, heat_strip, skip_reason
from stormwatch.reports.jobattempts import SessionId
from stormwatch.reports.jobbanner import (
    LoadWarnings,
    TextPart,
    load_warnings,
    mentions_hidden_gap,
    session_ids,
    with_short_ids,
)
from stormwatch.reports.jobcauses import HEADINGS, CauseCard, cause_cards, cause_sentence, lead_card
from stormwatch.reports.markers import EventRow, event_rows, rank_marks
from stormwatch.reports.rankplaces import DeviceKind, RankPlace, rank_places
from stormwatch.reports.signalview import SignalView, is_oom, signal_view
from stormwatch.reports.timelines import RankTimeline, TimeFrame, load_timelines
from stormwatch.signals import HIDDEN_GAP_MEANING

MAX_CHARTED_RANKS = 64
MISSING_RANKS = "missing_ranks"  # the signal code of ranks the job expected that wrote nothing
MAX_EVENT_ROWS = 300


class GapMeaningAt(StrEnum):
    """The section where the page first speaks of the hidden gap, which explains the words there."""

    BANNER = "banner"
    CAUSES = "causes"
    RANKS = "ranks"


@dataclass(frozen=True)
class RowView:
    rank: int | None
    missing: bool
    cpu: bool  # a CPU rank: no hidden gap to show
    availability: str
    samples: str
    allocated_delta: str
    reserved_delta: str
    gap_latest: str
    gap_peak: str
    has_anomaly: bool
    first_signal: SignalView | None
    first_offset: str
    first_phase: str
    charted: bool


@dataclass(frozen=True)
class SessionView:
    session: SessionId
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
    selected_session: SessionId | None  # the session the page details
    verdict: str  # a verdict status (a CSS class)
    summary: tuple[TextPart, ...]  # the verdict's summary, session ids shortened
    lead: SignalView | None  # what the banner leads with: the verdict's cause, else missing ranks
    lead_text: str  # the rest of its sentence: "on rank 3 (node-0, GPU 3), 20.0 s into the job"
    lead_dump: str  # what the OOM dump says of it, or ""
    exit_code: str  # stormwatch's, under --fail-on
    present: int
    expected: int
    missing_ranks: str
    job_start: str
    duration: str
    cards: tuple[CauseCard, ...]
    rows: tuple[RowView, ...]
    charts: tuple[RankChart, ...]
    legend: tuple[tuple[str, str], ...]  # (key's CSS class, label) for what the charts draw
    charts_note: str
    heat: HeatStrip | None  # None: not drawn (see heat_skipped)
    heat_skipped: str  # why the heat strip is not drawn ("" when it is, or when there are no ranks)
    sessions: tuple[SessionView, ...]
    sources: tuple[str, ...]
    warnings: tuple[str, ...]
    load_warnings: LoadWarnings
    events: tuple[EventRow, ...]
    events_omitted: int
    gap_meaning_at: GapMeaningAt
    gap_columns: bool  # some rank has a device, so hidden-gap columns mean something
    gap_meaning: str = HIDDEN_GAP_MEANING

    @property
    def nothing_loaded(self) -> bool:
        """The verdict says the job held nothing loadable."""
        return self.verdict == VerdictStatus.EMPTY


def _text(value: Any) -> str:
    return NOT_AVAILABLE if value is None or value == "" else str(value)


def _row(item: RankDiagnosticsRow, document: JobDocument, *, origin_ns: int | None, charted: set[int],
         places: Mapping[int, RankPlace]) -> RowView:
    missing = item.availability == "missing"
    place = places.get(item.rank)
    cpu = place is not None and place.kind is DeviceKind.CPU
    blank = NOT_AVAILABLE if missing else None
    gap_blank = blank or (NOT_AVAILABLE if cpu else None)
    signal = item.first_anomaly_signal
    oom = is_oom(signal, rank=item.rank, timestamp_ns=item.first_anomaly_timestamp_ns,
                 markers_by_rank=document.model.markers_by_rank)
    return RowView(
        rank=item.rank,
        missing=missing,
        cpu=cpu,
        availability=_text(item.availability),
        samples=blank or format_count(item.samples),
        allocated_delta=blank or format_bytes(item.allocated_delta_bytes, signed=True),
        reserved_delta=blank or format_bytes(item.reserved_delta_bytes, signed=True),
        gap_latest=gap_blank or format_bytes(item.hidden_gap_latest_bytes),
        gap_peak=gap_blank or format_bytes(item.hidden_gap_peak_abs_bytes),
        has_anomaly=item.has_anomaly,
        first_signal=signal_view(signal, oom=oom) if signal else None,
        first_offset=format_offset(item.first_anomaly_timestamp_ns, origin_ns),
        first_phase=_text(item.first_anomaly_phase_path),
        charted=item.rank in charted,
    )


def _session(item: SessionSummary, selected_id: str | None) -> SessionView:
    started, ended = item.started_at_ns, item.ended_at_ns
    duration = format_duration_s((ended - started) / 1e9) if ended is not None else ""
    return SessionView(
        session=SessionId.of(item.session_id),
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
        title = (f"{HEADINGS[item.kind]}: {item.signal} ({item.severity}) "
                 f"at {format_offset(item.timestamp_ns, origin_ns)}")
        anomalies.setdefault(item.rank, []).append(Anomaly(item.timestamp_ns, item.kind.value, title))
    return anomalies, first_anomalies


def oom_sentences(dumps: Sequence[OomDump]) -> dict[int, str]:
    """By rank, what its OOM dump says (``Out of memory on rank 3: tried to allocate ...``), for the
    ranks with exactly one dump: with several, which OOM marker each explains is not known."""
    ranks = [dump.rank for dump in dumps]
    sentence = {dump.rank: dump.sentence() for dump in dumps if dump.rank is not None and ranks.count(dump.rank) == 1}
    return {rank: text[:1].upper() + text[1:] for rank, text in sentence.items() if rank is not None}


def _heat(shown: JobDocument, timelines: Mapping[int, RankTimeline], *, places: Mapping[int, RankPlace],
          first_anomalies: Mapping[int, FirstAnomaly], first_cause_rank: int | None, frame: TimeFrame
          ) -> tuple[HeatStrip | None, str]:
    """The heat strip when it carries information, else None and the sentence saying why not. CPU
    ranks have no hidden gap: their rows are left empty."""
    model = shown.model
    ranks = sorted(set(model.expected_ranks) | set(timelines))
    if not ranks:
        return None, ""
    cpu = {rank for rank, place in places.items() if place.kind is DeviceKind.CPU}
    strip = heat_strip(ranks, {rank: line for rank, line in timelines.items() if rank not in cpu},
                       missing=set(model.missing_ranks), frame=frame, first_anomalies=first_anomalies,
                       first_cause_rank=first_cause_rank)
    reason = skip_reason(strip, cpu_ranks=len(cpu & set(ranks)))
    return (None, reason) if reason else (strip, "")


def _lead(card: CauseCard | None, *, into: str, missing: Sequence[int], expected: int
          ) -> tuple[SignalView | None, str]:
    """The banner's sentence: the lead first cause's, else the ranks that wrote nothing, else none."""
    if card is not None:
        return card.signal, cause_sentence(card, into=into)
    if missing:
        plural = "s" if len(missing) > 1 else ""
        return signal_view(MISSING_RANKS), f"rank{plural} {format_ranks(missing)} of {expected} wrote no telemetry"
    return None, ""


def job_view(document: JobDocument, *, detail: JobDocument | None = None) -> JobView:
    """Everything the job template shows, from one model.json's document and, when the page details
    another attempt than the document's own, that attempt's document ``detail``."""
    shown = detail or document
    model = shown.model
    frame, timelines = load_timelines(shown)
    origin = frame.origin_ns
    places = rank_places(shown)
    oom_text = oom_sentences(shown.oom_dumps)
    marks = rank_marks(model, frame, oom_text=oom_text)
    anomalies, first_anomalies = _anomalies(model.rows, model.indicators, origin)
    anomalous = [row.rank for row in model.rows if row.has_anomaly]
    charted = _charted_ranks(sorted(timelines), [*(item.rank for item in model.indicators), *anomalous])
    buckets = chart_buckets(len(charted))
    charts = tuple(
        rank_chart(rank, timelines[rank], frame=frame, place=places.get(rank),
                   markers=marks[rank].points if rank in marks else (),
                   phases=marks[rank].phases if rank in marks else (), anomalies=anomalies.get(rank, ()),
                   buckets=buckets)
        for rank in charted
    )
    cards = cause_cards(model, places=places, origin_ns=origin, oom_text=oom_text)
    lead = lead_card(cards)
    attempt = next((entry.attempt for entry in document.attempts or ()
                    if entry.attempt.session_id == shown.selected_session_id), None)
    into = f"attempt {attempt.number} of {attempt.of}" if attempt is not None and attempt.of > 1 else "the job"
    earliest = next((card for card in cards if IndicatorKind.EARLIEST in card.kinds), None)
    heat, heat_skipped = _heat(shown, timelines, places=places, first_anomalies=first_anomalies,
                               first_cause_rank=earliest.rank if earliest else None, frame=frame)
    events, omitted = event_rows(marks, origin_ns=origin, limit=MAX_EVENT_ROWS)
    verdict = document.verdict
    rows = tuple(_row(item, shown, origin_ns=origin, charted=set(charted), places=places) for item in model.rows)
    note = "" if len(charted) == len(timelines) else (
        f"Charts for {len(charted)} of {len(timelines)} ranks (first causes and anomalous ranks first); "
        "the ranks table covers every rank.")
    lead_signal, lead_text = _lead(lead, into=into, missing=model.missing_ranks, expected=len(model.expected_ranks))
    banner_texts = [verdict.summary, *([lead_signal.title] if lead_signal else [])]
    gap_at = (GapMeaningAt.BANNER if mentions_hidden_gap(banner_texts) else
              GapMeaningAt.CAUSES if mentions_hidden_gap([card.signal.title for card in cards]) else GapMeaningAt.RANKS)
    return JobView(
        job_id=_text(document.job_id),
        source=_text(document.source),
        generated_at=format_iso(document.generated_at.isoformat()),
        engine_version=_text(document.engine_version),
        fingerprint=_text(document.input_fingerprint),
        selected_session=SessionId.of(shown.selected_session_id) if shown.selected_session_id else None,
        verdict=verdict.status.value,
        summary=with_short_ids(_text(verdict.summary), session_ids(document, detail)),
        lead=lead_signal,
        lead_text=lead_text,
        lead_dump=lead.oom_dump if lead else "",
        exit_code=str(int(verdict.exit_code)),
        present=len(model.present_ranks),
        expected=len(model.expected_ranks),
        missing_ranks=format_ranks(model.missing_ranks),
        job_start=format_utc_ns(origin),
        duration=format_duration_s((frame.end_ns - origin) / 1e9) if origin is not None and frame.end_ns
        else NOT_AVAILABLE,
        cards=cards,
        rows=rows,
        charts=charts,
        legend=legend(charts),
        charts_note=note,
        heat=heat,
        heat_skipped=heat_skipped,
        sessions=tuple(_session(item, shown.selected_session_id) for item in shown.sessions),
        sources=shown.sources_loaded,
        warnings=tuple(dict.fromkeys([*document.warnings, *model.warnings])),
        load_warnings=load_warnings(document),
        events=events,
        events_omitted=omitted,
        gap_meaning_at=gap_at,
        gap_columns=not rows or any(not row.cpu for row in rows),
    )
