"""What ``stormwatch diagnose`` prints: the verdict in plain words, the attempts, the first causes, the
ranks and the first warnings; and the line listing a job's sessions when ``--session`` names none.

The headline names where the verdict comes from (``restarted: CRITICAL, from attempt 1 of 2: out of
memory on rank 3 (exit 0)``); the first causes shown are that attempt's, so a restarted job whose
shown session is its clean restart still prints the OOM it was judged by. Warnings are printed, the
first :data:`SHOWN_WARNINGS` of them (every stormwatch finding of the job's own first: a file that
ends mid-record, sessions not diagnosed), so a job that loads nothing says why on the screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from stormwatch.alerting.leak_findings import leak_text
from stormwatch.analysis.model import AnomalyIndicator, DiagnosticsModel, IndicatorKind
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.diagnose import Diagnosis
from stormwatch.diagnose_sessions import JobDiagnosis
from stormwatch.events.sessions import SessionSummary
from stormwatch.growth.figures import RankGrowth
from stormwatch.outputs.attempts import Attempt, oom_ranks, worst_attempt
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.verdict import VerdictStatus

#: Warnings printed in full; the rest are counted (all of them are in model.json).
SHOWN_WARNINGS = 5
#: Session ids listed when ``--session`` names none the job has.
LISTED_SESSIONS = 20
_LABELS = {IndicatorKind.EARLIEST: "earliest cause", IndicatorKind.MOST_SEVERE: "most severe"}


def _seconds(timestamp_ns: int, origin_ns: int | None) -> str:
    return f"+{(timestamp_ns - origin_ns) / 1e9:.3f} s" if origin_ns is not None else f"{timestamp_ns} ns"


def describe_indicator(indicator: AnomalyIndicator, origin_ns: int | None) -> str:
    """``rank 3 | alert:error | critical | +12.500 s | phase train | confidence 0.90 | reasons ...``;
    the time is since ``origin_ns`` (the session's first event), in seconds."""
    when = _seconds(indicator.timestamp_ns, origin_ns)
    parts = [f"rank {indicator.rank}", indicator.signal, indicator.severity, when]
    if indicator.phase_path:
        parts.append(f"phase {indicator.phase_path}")
    if indicator.confidence is not None:
        parts.append(f"confidence {indicator.confidence:.2f}")
    if indicator.reason_codes:
        parts.append("reasons " + ", ".join(indicator.reason_codes))
    return " | ".join(parts)


def _ranks_word(ranks: Sequence[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {format_ranks(ranks)}"


def model_cause(model: DiagnosticsModel, status: VerdictStatus) -> str:
    """What one session came to, in a few words: ``out of memory on rank 3``, ``alert:critical on rank 1``,
    ``ranks 2-3 missing``, ``nothing loaded``, ``no anomaly``."""
    if status is VerdictStatus.EMPTY:
        return "nothing loaded"
    ooms = oom_ranks(model)
    if ooms:
        return f"out of memory on {_ranks_word(ooms)}"
    severe = next((item for item in model.indicators if item.kind == IndicatorKind.MOST_SEVERE), None)
    if severe is not None:
        return f"{severe.signal} on rank {severe.rank}"
    if model.missing_ranks:
        return f"{_ranks_word(model.missing_ranks)} missing"
    return "no anomaly"


def verdict_source(diagnosis: JobDiagnosis) -> tuple[Attempt | None, Diagnosis]:
    """The attempt the job's verdict comes from (None: a job of one session) and its diagnosis."""
    worst = worst_attempt(diagnosis.attempts) if len(diagnosis.attempts) > 1 else None
    if worst is not None:
        for result in diagnosis.sessions:
            if result.session_id == worst.session_id and result.diagnosis is not None:
                return worst, result.diagnosis
    return None, diagnosis.main


def headline(diagnosis: JobDiagnosis) -> str:
    """``restarted: CRITICAL, from attempt 1 of 2: out of memory on rank 3 (exit 0)``; a leak, which the
    verdict (stormlog's model) does not judge, is said after the cause: ``clean: no anomaly; rank 1 leaks``."""
    verdict = diagnosis.verdict or diagnosis.main.verdict
    attempt, source = verdict_source(diagnosis)
    where = f", from attempt {attempt.number} of {attempt.of}" if attempt is not None else ""
    cause = model_cause(source.model, source.verdict.status)
    leaking = [growth.rank for growth in _leaks(diagnosis.document)]
    if leaking:
        cause += f"; {_ranks_word(leaking)} {'leaks' if len(leaking) == 1 else 'leak'}"
    return f"{diagnosis.job_id}: {verdict.status.value.upper()}{where}: {cause} (exit {int(verdict.exit_code)})"


def _leaks(document: JobDocument) -> list[RankGrowth]:
    """The shown session's leaking ranks, in rank order."""
    figures = () if document.fleet is None else document.fleet.facts.growth
    return sorted((growth for growth in figures if growth.leak), key=lambda growth: growth.rank)


def leak_lines(document: JobDocument) -> list[str]:
    """``  leak            rank 1 on node-09 GPU 1 grows 4 GiB/h; at this rate it would run out ...``."""
    places = {} if document.fleet is None else {fact.rank: fact for fact in document.fleet.facts.ranks}
    lines = []
    for growth in _leaks(document):
        fact = places.get(growth.rank)
        text = leak_text(growth, host=None if fact is None else fact.host,
                         device_id=None if fact is None else fact.device_id)
        lines.append(f"  leak            {text}")
    return lines


def warning_lines(document: JobDocument, model: DiagnosticsModel) -> list[str]:
    """The job's warnings (its own first, then the model's), the first :data:`SHOWN_WARNINGS` in full."""
    warnings = [*document.warnings, *(w for w in model.warnings if w not in document.warnings)]
    lines = [f"  warning         {warning}" for warning in warnings[:SHOWN_WARNINGS]]
    if len(warnings) > SHOWN_WARNINGS:
        lines.append(f"  warnings        {len(warnings) - SHOWN_WARNINGS} more (see model.json)")
    return lines


def summary_lines(diagnosis: JobDiagnosis, written: Sequence[Path]) -> list[str]:
    """Every line ``diagnose`` prints after writing ``written``."""
    attempt, source = verdict_source(diagnosis)
    lines = [headline(diagnosis)]
    for item in diagnosis.attempts if len(diagnosis.attempts) > 1 else ():
        marks = "".join(mark for mark, on in ((" [shown]", item.default),
                                              (" [verdict]", item.session_id == diagnosis.document.worst_session))
                        if on)
        lines.append(f"  {item.describe()} - session {item.session_id}{marks}")
    if not diagnosis.attempts and diagnosis.group_count > 1:
        lines.append(f"  sessions        {diagnosis.group_count} attempts found; this is session "
                     f"{diagnosis.main.loaded.selected_session_id} only (without --session every one is diagnosed)")
    origin = source.started_at_ns
    suffix = f" (attempt {attempt.number})" if attempt is not None and not attempt.default else ""
    for indicator in source.model.indicators:
        label = _LABELS.get(indicator.kind, indicator.kind)
        lines.append(f"  {label:<15} {describe_indicator(indicator, origin)}{suffix}")
    model = source.model
    present, expected = len(model.present_ranks), len(model.expected_ranks)
    missing = f", missing {format_ranks(model.missing_ranks)}" if model.missing_ranks else ""
    if expected:
        lines.append(f"  ranks           {present}/{expected} present{missing}{suffix}")
    lines.extend(leak_lines(diagnosis.document))
    lines.extend(warning_lines(diagnosis.document, diagnosis.main.model))
    lines.extend(f"  wrote           {path}" for path in written)
    return lines


def _started(summary: SessionSummary) -> str:
    return datetime.fromtimestamp(summary.started_at_ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def unknown_session_lines(session_id: str, available: Sequence[SessionSummary], *, job: str) -> list[str]:
    """``error: no session 'nope' in JOB; it has 2: ...`` then one line per session (at most
    :data:`LISTED_SESSIONS`, earliest first) with its start time and status."""
    if not available:
        return [f"error: no session {session_id!r} in {job}: it holds no session at all"]
    ordered = sorted(available, key=lambda item: (item.started_at_ns, item.session_id))
    lines = [f"error: no session {session_id!r} in {job}; it has {len(ordered)} (--session takes one of these):"]
    lines.extend(f"  {item.session_id}  started {_started(item)}, {item.status.value}"
                 for item in ordered[:LISTED_SESSIONS])
    if len(ordered) > LISTED_SESSIONS:
        lines.append(f"  ... {len(ordered) - LISTED_SESSIONS} more (stormwatch load {job} lists them)")
    return lines
