"""History rows from job documents (:class:`~stormwatch.outputs.document.JobDocument`): one row per
(job, session, expected rank) of one audit.

A document is one session of a job (``selected_session_id``): a job diagnosed session by session
gives one document per session (its sessions' own model.json), a job diagnosed once gives one.

Sources inside a document (``DESIGN.md``, "The model JSON contract"):

- ``model.rows``: samples, allocated/reserved deltas, hidden gap latest and peak (the absolute
  peak), first anomaly signal and time;
- ``model.indicators``: the ``earliest`` indicator's rank is the job's first cause
  (``first_cause``); a row's first-anomaly severity is that of the indicator on its rank with the
  same signal and time, else the severity its signal always has (``alert:warning``, ``alert:critical``,
  ``alert:error``, ``gap_ratio_breach``), else null;
- ``fleet.growth`` (when present): the rank's duration and growth (``duration_ns``,
  ``*_growth_bytes_per_hour``, ``growth_confidence``, ``leak``, ``capacity_after_start_s``,
  ``growth_gap``); null for a rank it has no entry for (documents written before growth);
- ``fleet.ranks`` (when present): host, device id and the peaks; what it lacks (or leaves null):
  the host from the rank's sessions (when they name one host; a merged session's ``multiple`` is
  none), allocated/reserved peaks from ``model.per_rank_timelines``, the rest null;
- ``sessions``: world size (largest declared, else the number of expected ranks) and the earliest
  session start (``job_started_ns``, which orders runs of one job name);
- ``verdict.status``: the row's ``session_verdict`` (in a job document with ``attempts``, that of
  its attempt), and the job's ``verdict``: the worst over the job's documents (the worst session);
- ``input_fingerprint``.

Building the rows is linear in ranks plus timeline points; nothing here reads storage.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from stormwatch.analysis.candidates import ALERT_SEVERITY
from stormwatch.analysis.model import AnomalyIndicator, IndicatorKind, RankDiagnosticsRow
from stormwatch.events.sessions import SessionSummary
from stormwatch.growth.figures import RankGrowth
from stormwatch.growth.headroom import headroom_arrays
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.schema import (
    HISTORY_COLUMNS,
    HISTORY_SCHEMA,
    HISTORY_SCHEMA_VERSION,
    as_utc,
    audit_id,
    file_metadata,
)
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.peers.rank_facts import RankFacts
from stormwatch.severity import Severity

_SIGNAL_SEVERITY: dict[str, Severity] = {
    **{f"alert:{kind}": severity for kind, severity in ALERT_SEVERITY.items()},
    "gap_ratio_breach": Severity.WARNING,  # breaches are all warnings
}
_MERGED_HOSTS = "multiple"  # a merged session's host when its parts ran on several (events.sessions)
_FLEET_PEAKS = ("peak_allocated_bytes", "peak_reserved_bytes", "peak_device_used_bytes", "device_total_bytes")


def _timeline_peak(values: np.ndarray | None) -> int | None:
    """The largest non-null number of a timeline series (nulls appear in schema-v4 timelines)."""
    if values is None or not len(values):
        return None
    array = np.asarray(values, dtype=float)  # nulls become NaN
    array = array[np.isfinite(array)]
    return int(array.max()) if len(array) else None


def _session_facts(sessions: Sequence[SessionSummary], expected: int) -> tuple[int | None, int | None, dict[int, str]]:
    """(world size, earliest start in ns, host of each rank whose sessions name exactly one host)."""
    sizes = [session.world_size for session in sessions if session.world_size > 0]
    starts = [session.started_at_ns for session in sessions]
    hosts: dict[int, set[str]] = {}
    for session in sessions:
        if session.host and session.host != _MERGED_HOSTS:
            hosts.setdefault(session.rank, set()).add(session.host)
    world = max(sizes) if sizes else (expected or None)
    single = {rank: next(iter(names)) for rank, names in hosts.items() if len(names) == 1}
    return world, min(starts) if starts else None, single


def _severity(row: RankDiagnosticsRow, indicators: Sequence[AnomalyIndicator]) -> str | None:
    signal, when = row.first_anomaly_signal, row.first_anomaly_timestamp_ns
    if signal is None:
        return None
    for item in indicators:
        if item.rank == row.rank and item.signal == signal and item.timestamp_ns == when:
            return item.severity if item.severity in Severity._value2member_map_ else None
    known = _SIGNAL_SEVERITY.get(signal)
    return None if known is None else known.value


def growth_columns(growth: RankGrowth | None) -> dict[str, Any]:
    """The history's growth columns of a rank (null without a growth entry; a gap's figures are null)."""
    if growth is None:
        return {}  # every growth column null
    return {
        "duration_ns": growth.duration_ns,
        "allocated_growth_bytes_per_hour": growth.allocated_bytes_per_hour,
        "reserved_growth_bytes_per_hour": growth.reserved_bytes_per_hour,
        "growth_confidence": growth.confidence,
        "leak": None if growth.gap is not None else growth.leak,
        "capacity_after_start_s": growth.capacity_after_start_s,
        "growth_gap": None if growth.gap is None else growth.gap.value,
    }


def _session_verdict(document: JobDocument) -> str | None:
    """The verdict of the session ``document`` shows: its attempt's in a job document, else its own."""
    for entry in document.attempts or ():
        if entry.attempt.session_id == document.selected_session_id:
            return None if entry.attempt.verdict is None else entry.attempt.verdict.value
    return document.verdict.status.value


def _job_rows(document: JobDocument, job_name: str, audit: str) -> list[dict[str, Any]]:
    model = document.model
    rows: dict[int, RankDiagnosticsRow] = {}
    for row in model.rows:
        rows.setdefault(row.rank, row)
    earliest = next((item.rank for item in model.indicators if item.kind == IndicatorKind.EARLIEST), None)
    fleet_ranks: dict[int, RankFacts] = {}
    for fact in () if document.fleet is None else document.fleet.facts.ranks:
        fleet_ranks.setdefault(fact.rank, fact)
    world, started, session_hosts = _session_facts(document.sessions, len(model.expected_ranks))
    session_verdict = _session_verdict(document)
    outliers = None if document.fleet is None else {item.rank for item in document.fleet.facts.outlier_ranks}
    growth: dict[int, RankGrowth] = {}
    for item in () if document.fleet is None else document.fleet.facts.growth:
        growth.setdefault(item.rank, item)
    out = []
    for rank in sorted(rows):
        row, placed = rows[rank], fleet_ranks.get(rank)
        peaks = {name: None if placed is None else getattr(placed, name) for name in _FLEET_PEAKS}
        timeline = model.per_rank_timelines.get(rank)
        if timeline is not None:  # peaks the fleet member does not give, from the timelines
            for name, series in (("peak_allocated_bytes", "allocated"), ("peak_reserved_bytes", "reserved")):
                if peaks[name] is None:
                    peaks[name] = _timeline_peak(timeline.get(series))
        gap_peak = row.hidden_gap_peak_abs_bytes
        if gap_peak is None and placed is not None:
            gap_peak = placed.hidden_gap_peak_bytes
        out.append({
            "audit_id": audit,
            "job_id": document.job_id,
            "job_name": job_name,
            "session_id": document.selected_session_id,
            "world_size": world,
            "rank": rank,
            "host": (placed.host if placed is not None else None) or session_hosts.get(rank),
            "device_id": None if placed is None else placed.device_id,
            "samples": row.samples,
            **peaks,
            "hidden_gap_peak_bytes": gap_peak,
            "hidden_gap_latest_bytes": row.hidden_gap_latest_bytes,
            "allocated_delta_bytes": row.allocated_delta_bytes,
            "reserved_delta_bytes": row.reserved_delta_bytes,
            "first_anomaly_signal": row.first_anomaly_signal,
            "first_anomaly_severity": _severity(row, model.indicators),
            "first_anomaly_timestamp_ns": row.first_anomaly_timestamp_ns,
            "first_cause": earliest == rank,
            "verdict": document.verdict.status.value,  # the job's, set over all its documents by history_rows
            "session_verdict": session_verdict,
            "input_fingerprint": document.input_fingerprint,
            "job_started_ns": started,
            "availability": row.availability,
            "has_anomaly": row.has_anomaly,
            "first_anomaly_phase_path": row.first_anomaly_phase_path,
            "outlier": None if outliers is None else rank in outliers,
            "schema_version": HISTORY_SCHEMA_VERSION,
            **growth_columns(growth.get(rank)),
        })
    return out


def history_rows(
    documents: Iterable[JobDocument], *, job_names: JobNamePattern, audit_time: datetime
) -> pa.Table:
    """The history rows of one audit, in :data:`~stormwatch.history.schema.HISTORY_SCHEMA`
    (with its footer metadata), sorted by (job_id, session_id, rank).

    ``documents``: those of the jobs diagnosed in this audit only (an unchanged job re-audited adds
    no row), one per session of a job diagnosed session by session. A later document with the same
    job id and session replaces an earlier one. ``audit_time`` (naive = UTC) is every row's
    ``audit_time`` and, with the jobs' fingerprints, names the audit (``audit_id``).
    """
    by_session: dict[tuple[str, str], JobDocument] = {}
    for document in documents:
        by_session[(document.job_id, document.selected_session_id or "")] = document
    fingerprints = {job: document.input_fingerprint for (job, _), document in by_session.items()}
    audit = audit_id(audit_time, fingerprints.items())
    records: list[dict[str, Any]] = []
    for job, session in sorted(by_session):
        records += _job_rows(by_session[(job, session)], job_names.name_of(job), audit)
    statuses: dict[str, list[VerdictStatus]] = {}
    for (job, _), document in by_session.items():
        statuses.setdefault(job, []).append(document.verdict.status)
    for record in records:
        worst = VerdictStatus.worst(statuses[record["job_id"]])
        record["verdict"] = None if worst is None else worst.value
    columns: dict[str, list[Any]] = {name: [record.get(name) for record in records] for name in HISTORY_COLUMNS}
    columns["audit_time"] = [as_utc(audit_time)] * len(records)
    table = with_headroom(pa.Table.from_pydict(columns, schema=HISTORY_SCHEMA))
    return table.replace_schema_metadata(file_metadata())


def _floats(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)  # nulls: NaN


def with_headroom(table: pa.Table) -> pa.Table:
    """``table`` (:data:`HISTORY_SCHEMA`) with :data:`~stormwatch.history.schema.HEADROOM_COLUMNS` worked
    out from each row's peaks, device total and duration (null where one is missing)."""
    percent, unused = headroom_arrays(
        device_used=_floats(table, "peak_device_used_bytes"), reserved=_floats(table, "peak_reserved_bytes"),
        total=_floats(table, "device_total_bytes"), duration_ns=_floats(table, "duration_ns"))
    for name, values in (("used_percent", percent), ("unused_gib_hours", unused)):
        index = table.schema.get_field_index(name)
        table = table.set_column(index, table.schema.field(name), pa.array(values, pa.float64(), from_pandas=True))
    return table
