"""History rows from parsed model.json documents: one row per (job, session, expected rank) of one audit.

A document is one session of a job (``selected_session_id``): a job diagnosed session by session
gives one document per session (its sessions' own model.json), a job diagnosed once gives one.

Sources inside a document (``DESIGN.md``, "The model JSON contract"):

- ``model.rows``: samples, allocated/reserved deltas, hidden gap latest and peak (the absolute
  peak), first anomaly signal and time;
- ``model.indicators``: the ``earliest`` indicator's rank is the job's first cause
  (``first_cause``); a row's first-anomaly severity is that of the indicator on its rank with the
  same signal and time, else the severity its signal always has (``alert:warning``, ``alert:critical``,
  ``alert:error``, ``gap_ratio_breach``), else null;
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

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from stormwatch.analysis.candidates import ALERT_SEVERITY
from stormwatch.analysis.model import IndicatorKind
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.schema import HISTORY_COLUMNS, HISTORY_SCHEMA, as_utc, audit_id, file_metadata
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.severity import Severity

_SIGNAL_SEVERITY: dict[str, Severity] = {
    **{f"alert:{kind}": severity for kind, severity in ALERT_SEVERITY.items()},
    "gap_ratio_breach": Severity.WARNING,  # breaches are all warnings
}
_MERGED_HOSTS = "multiple"  # a merged session's host when its parts ran on several (events.sessions)
_FLEET_PEAKS = ("peak_allocated_bytes", "peak_reserved_bytes", "peak_device_used_bytes", "device_total_bytes")


def _int(value: Any) -> int | None:
    """An integer field, ``None`` for null, booleans, non-finite or non-numeric values."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float) and np.isfinite(value):
        return int(value)
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _timeline_peak(values: Any) -> int | None:
    """The largest non-null number of a timeline list (nulls appear in schema-v4 timelines)."""
    if isinstance(values, np.ndarray):  # a document still in memory holds arrays
        values = values.tolist()
    if not isinstance(values, Sequence) or isinstance(values, str) or not values:
        return None
    try:
        array = np.asarray(values, dtype=float)  # nulls become NaN
    except (TypeError, ValueError):  # something not a number in it: keep the numbers
        array = np.asarray([v for v in values if isinstance(v, int | float) and not isinstance(v, bool)], dtype=float)
    if array.ndim != 1:
        return None
    array = array[np.isfinite(array)]
    return int(array.max()) if len(array) else None


def _by_rank(items: Any) -> dict[int, Mapping[str, Any]]:
    out: dict[int, Mapping[str, Any]] = {}
    for item in items if isinstance(items, list | tuple) else ():  # parsed JSON, or a document in memory
        if isinstance(item, Mapping) and (rank := _int(item.get("rank"))) is not None:
            out.setdefault(rank, item)
    return out


def _session_facts(sessions: Any, expected: int) -> tuple[int | None, int | None, dict[int, str]]:
    """(world size, earliest start in ns, host of each rank whose sessions name exactly one host)."""
    sizes: list[int] = []
    starts: list[int] = []
    hosts: dict[int, set[str]] = {}
    for session in sessions if isinstance(sessions, list | tuple) else ():
        if not isinstance(session, Mapping):
            continue
        if (size := _int(session.get("world_size"))) is not None and size > 0:
            sizes.append(size)
        if (start := _int(session.get("started_at_ns"))) is not None:
            starts.append(start)
        rank, host = _int(session.get("rank")), _str(session.get("host"))
        if rank is not None and host and host != _MERGED_HOSTS:
            hosts.setdefault(rank, set()).add(host)
    world = max(sizes) if sizes else (expected or None)
    single = {rank: next(iter(names)) for rank, names in hosts.items() if len(names) == 1}
    return world, min(starts) if starts else None, single


def _severity(row: Mapping[str, Any], rank: int, indicators: Sequence[Mapping[str, Any]]) -> str | None:
    signal, when = row.get("first_anomaly_signal"), row.get("first_anomaly_timestamp_ns")
    if signal is None:
        return None
    for item in indicators:
        if _int(item.get("rank")) == rank and item.get("signal") == signal and item.get("timestamp_ns") == when:
            severity = item.get("severity")
            return severity if severity in Severity._value2member_map_ else None
    known = _SIGNAL_SEVERITY.get(str(signal))
    return None if known is None else known.value


def _status(document: Mapping[str, Any]) -> str | None:
    verdict = document.get("verdict")
    return _str(verdict.get("status")) if isinstance(verdict, Mapping) else None


def _session_verdict(document: Mapping[str, Any]) -> str | None:
    """The verdict of the session ``document`` shows: its attempt's in a job document, else its own."""
    session = document.get("selected_session_id")
    for attempt in document.get("attempts") or ():
        if isinstance(attempt, Mapping) and attempt.get("session_id") == session:
            return _str(attempt.get("verdict"))
    return _status(document)


def _worst(statuses: Iterable[str | None]) -> str | None:
    known = [VerdictStatus(status) for status in statuses
             if status is not None and status in VerdictStatus._value2member_map_]
    worst = VerdictStatus.worst(known)
    return None if worst is None else worst.value


def _job_rows(document: Mapping[str, Any], job_name: str, audit: str) -> list[dict[str, Any]]:
    model = document.get("model") or {}
    rows = _by_rank(model.get("rows"))
    indicators = [item for item in model.get("indicators") or () if isinstance(item, Mapping)]
    earliest = next((_int(item.get("rank")) for item in indicators if item.get("kind") == IndicatorKind.EARLIEST),
                    None)
    fleet = document.get("fleet")
    fleet_ranks = _by_rank(fleet.get("ranks")) if isinstance(fleet, Mapping) else {}
    timelines = model.get("per_rank_timelines") or {}
    world, started, session_hosts = _session_facts(document.get("sessions"), len(model.get("expected_ranks") or ()))
    session_id, session_verdict = _str(document.get("selected_session_id")), _session_verdict(document)
    out = []
    for rank in sorted(rows):
        row, placed = rows[rank], fleet_ranks.get(rank) or {}
        peaks = {name: _int(placed.get(name)) for name in _FLEET_PEAKS}
        host, device = _str(placed.get("host")) or session_hosts.get(rank), _int(placed.get("device_id"))
        timeline = timelines.get(str(rank)) if isinstance(timelines, Mapping) else None
        if isinstance(timeline, Mapping):  # peaks the fleet member does not give, from the timelines
            for name, series in (("peak_allocated_bytes", "allocated"), ("peak_reserved_bytes", "reserved")):
                if peaks[name] is None:
                    peaks[name] = _timeline_peak(timeline.get(series))
        gap_peak = _int(row.get("hidden_gap_peak_abs_bytes"))
        if gap_peak is None:
            gap_peak = _int(placed.get("hidden_gap_peak_bytes"))
        out.append({
            "audit_id": audit,
            "job_id": str(document.get("job_id")),
            "job_name": job_name,
            "session_id": session_id,
            "world_size": world,
            "rank": rank,
            "host": host,
            "device_id": device,
            "samples": _int(row.get("samples")),
            **peaks,
            "hidden_gap_peak_bytes": gap_peak,
            "hidden_gap_latest_bytes": _int(row.get("hidden_gap_latest_bytes")),
            "allocated_delta_bytes": _int(row.get("allocated_delta_bytes")),
            "reserved_delta_bytes": _int(row.get("reserved_delta_bytes")),
            "first_anomaly_signal": _str(row.get("first_anomaly_signal")),
            "first_anomaly_severity": _severity(row, rank, indicators),
            "first_anomaly_timestamp_ns": _int(row.get("first_anomaly_timestamp_ns")),
            "first_cause": earliest == rank,
            "verdict": _status(document),  # the job's, set over all its documents by history_rows
            "session_verdict": session_verdict,
            "input_fingerprint": _str(document.get("input_fingerprint")),
            "job_started_ns": started,
        })
    return out


def history_rows(
    documents: Iterable[Mapping[str, Any]], *, job_names: JobNamePattern, audit_time: datetime
) -> pa.Table:
    """The history rows of one audit, in :data:`~stormwatch.history.schema.HISTORY_SCHEMA`
    (with its footer metadata), sorted by (job_id, session_id, rank).

    ``documents``: parsed model.json of the jobs diagnosed in this audit only (an unchanged job
    re-audited adds no row), one per session of a job diagnosed session by session. A document without
    a string ``job_id`` is skipped; a later document with the same job id and session replaces an
    earlier one. ``audit_time`` (naive = UTC) is every row's ``audit_time`` and, with the jobs'
    fingerprints, names the audit (``audit_id``).
    """
    by_session: dict[tuple[str, str], Mapping[str, Any]] = {}
    for document in documents:
        if isinstance(document, Mapping) and isinstance(document.get("job_id"), str):
            by_session[(document["job_id"], str(document.get("selected_session_id") or ""))] = document
    fingerprints = {job: _str(doc.get("input_fingerprint")) for (job, _), doc in by_session.items()}
    audit = audit_id(audit_time, fingerprints.items())
    records: list[dict[str, Any]] = []
    for job, session in sorted(by_session):
        records += _job_rows(by_session[(job, session)], job_names.name_of(job), audit)
    statuses: dict[str, list[str | None]] = {}
    for (job, _), document in by_session.items():
        statuses.setdefault(job, []).append(_status(document))
    for record in records:
        record["verdict"] = _worst(statuses[record["job_id"]])
    columns: dict[str, list[Any]] = {name: [record.get(name) for record in records] for name in HISTORY_COLUMNS}
    columns["audit_time"] = [as_utc(audit_time)] * len(records)
    table = pa.Table.from_pydict(columns, schema=HISTORY_SCHEMA)
    return table.replace_schema_metadata(file_metadata())
