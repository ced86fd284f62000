"""The fleet summary: one row per job (``fleet.json``) and one per (job, session, rank) (``fleet.parquet``).

Rows are built from each job's model.json document (:class:`~stormwatch.outputs.document.JobDocument`),
so a job skipped because its inputs did not change keeps the row of its last diagnosis.
Failed and refused jobs get a row with their error and no verdict. A row's first causes
(``earliest``, ``most_severe``) say where and when besides what: ``oom``, ``host``, ``device_id``,
``since_start_ns`` and ``oom_dump`` (:mod:`stormwatch.outputs.fleet_causes`); older rows lack them.

A job diagnosed session by session (model.json's ``attempts``, see
:mod:`stormwatch.outputs.attempts`) gets, in fleet.json, its ``session_count``, its
``worst_session`` (the session its verdict comes from), ``worst_attempt`` (that attempt described,
``attempt 1 of 2, interrupted, OOM on rank 3``) and that session's first causes (``earliest``,
``most_severe``); in fleet.parquet, the rank rows of every session it diagnosed,
each with its ``session_id`` and ``session_verdict`` beside the job's ``verdict``. A document
without ``attempts`` is one session: the one it names (``selected_session_id``).

A job's fleet facts (model.json's ``fleet`` member, see :mod:`stormwatch.peers`) reach
both: a fleet.json row carries its ``outlier_ranks`` and ``coverage``; each fleet.parquet
rank row its identity and peaks (:data:`FACT_COLUMNS`) and whether it is an ``outlier`` (its growth
columns come from the rank row's ``growth``: :mod:`stormwatch.history.fleet_table`).
Documents written before the ``fleet`` member existed give empty outliers, no coverage,
and missing (NA) facts and ``outlier`` cells.

The files whose last record was cut short (model.json's top-level ``cut_short``, see
:mod:`stormwatch.outputs.cut_short`) reach the fleet.json row as ``cut_short``: per file its
``rank``, ``file`` (relative to the job folder), ``at_s``, ``session_id`` and ``dropped_bytes``
(empty for a clean job, and for documents written before the member existed).

Headroom and growth (issue 30, :mod:`stormwatch.growth`) reach the fleet.json row as
``used_percent`` (the fullest rank's peak use / device total × 100), ``unused_gib_hours`` (Σ over
ranks of (device total − peak use) × the rank's span, in GiB·hours), ``leaks`` (how many ranks leak;
null when growth was not measured) and ``leak`` (the leaking rank soonest to run out:
:data:`LEAK_FIELDS`, null without one). A null one is left out of the row's JSON, as rows written
before issue 30 lack them all: readers take a missing member as null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import pandas as pd

from stormwatch.growth.headroom import job_headroom
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.document_attempts import session_rank_rows
from stormwatch.outputs.fleet_causes import row_causes
from stormwatch.outputs.verdict import VerdictStatus

FLEET_SCHEMA_VERSION = 1


class JobStatus(StrEnum):
    DIAGNOSED = "diagnosed"
    SKIPPED = "skipped"  # inputs unchanged since the last diagnosis
    FAILED = "failed"
    REFUSED = "refused"  # the job id is not acceptable: nothing was read or written


@dataclass(frozen=True)
class FleetRow:
    """One job of the fleet; times in ns since the epoch, ``diagnosed_at`` ISO 8601."""

    job_id: str
    status: JobStatus
    verdict: VerdictStatus | None = None
    exit_code: int | None = None
    summary: str | None = None
    earliest: dict[str, Any] | None = None  # a first cause, placed (stormwatch.outputs.fleet_causes)
    most_severe: dict[str, Any] | None = None
    ranks_present: int | None = None
    ranks_expected: int | None = None
    missing_ranks: tuple[int, ...] = ()
    diagnosed_at: str | None = None
    input_fingerprint: str | None = None
    options: dict[str, Any] | None = None
    report: str | None = None
    error: str | None = None
    outlier_ranks: tuple[dict[str, Any], ...] = ()  # fleet.outlier_ranks: {rank, metric, value_bytes, ...}
    coverage: dict[str, Any] | None = None  # fleet.coverage; None when the document had no fleet facts
    session_count: int | None = None  # the job's sessions (diagnosed or not); None: not known
    worst_session: str | None = None  # the session id the verdict comes from
    worst_attempt: str | None = None  # a job of several sessions: that session's attempt, described
    cut_short: tuple[dict[str, Any], ...] = ()  # files that end mid-record: {rank, file, at_s, session_id, ...}
    history_key: str | None = None  # the history file holding this diagnosis's rows (stormwatch.tasks.commits)
    committed_at: str | None = None  # ISO 8601 wall-clock time its commit was written; None: before commits
    output_bytes: dict[str, int] | None = None  # size of each report file written ({"model.json": n, ...})
    notified_at: str | None = None  # when a notify step that ran to its end observed this run; None: not yet
    used_percent: float | None = None  # the fullest rank's peak use / device total × 100 (growth.headroom)
    unused_gib_hours: float | None = None  # Σ over ranks of (device total − peak use) × span, GiB·hours
    leaks: int | None = None  # leaking ranks (fleet.growth); None: growth not measured
    leak: dict[str, Any] | None = None  # the leaking rank soonest to run out: :data:`LEAK_FIELDS`
    rank_rows: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FleetRow:
        """A row as fleet.json stores it (without its rank rows, which live in fleet.parquet)."""
        known: dict[str, Any] = {
            name: data.get(name) for name in cls.__dataclass_fields__ if name not in ("rank_rows", "status")
        }
        known["missing_ranks"] = tuple(known.get("missing_ranks") or ())
        known["outlier_ranks"] = tuple(dict(item) for item in known.get("outlier_ranks") or ())
        known["cut_short"] = tuple(dict(item) for item in known.get("cut_short") or () if isinstance(item, Mapping))
        known["verdict"] = _verdict(known.get("verdict"))
        return cls(status=JobStatus(str(data.get("status"))), **known)

    def settles(self, fingerprint: str, options: Mapping[str, Any]) -> bool:
        """Whether this row is a diagnosis of inputs with ``fingerprint`` under ``options`` (the recorded
        ones, engine version included): diagnosing them again would give the same answer."""
        return (self.status in (JobStatus.DIAGNOSED, JobStatus.SKIPPED) and self.verdict is not None
                and self.input_fingerprint == fingerprint and self.options == options)

    def repair_of(self, fingerprint: str, options: Mapping[str, Any]) -> str | None:
        """The history file holding this row's diagnosis when it :meth:`settles` these inputs and options
        (a diagnosis of them again only rewrites the outputs: a repair); None otherwise, or when the
        row was committed before rows named their history file."""
        return self.history_key if self.history_key and self.settles(fingerprint, options) else None

    def damaged_outputs(self, report_bytes: Mapping[str, int]) -> list[str]:
        """One line per report file of this job whose size in ``report_bytes`` (by report key,
        ``<job_id>/model.json``; a file not listed is not judged here) is not the size its commit
        wrote: cut short, emptied, replaced. Rows committed before sizes were recorded have none."""
        lines = []
        for name, size in sorted((self.output_bytes or {}).items()):
            key = f"{self.job_id}/{name}"
            found = report_bytes.get(key)
            if found is not None and found != size:
                lines.append(f"{key}: {found} bytes where {size} were written; damaged, so the job is diagnosed again")
        return lines

    def as_json(self) -> dict[str, Any]:
        """The row as fleet.json stores it (rank rows apart). Nested members are shared with the row,
        not copied: treat them as read-only."""
        data = {name: getattr(self, name) for name in _JSON_FIELDS}
        data["status"] = self.status.value
        data["verdict"] = None if self.verdict is None else self.verdict.value
        data["missing_ranks"] = list(self.missing_ranks)
        data["outlier_ranks"] = list(data["outlier_ranks"])
        data["cut_short"] = list(data["cut_short"])
        for name in _OPTIONAL_JSON_FIELDS:  # unknown (no growth measured): left out, to keep fleet.json small
            if data[name] is None:
                del data[name]
        return data


_JSON_FIELDS = tuple(name for name in FleetRow.__dataclass_fields__ if name != "rank_rows")
#: Members a row's JSON leaves out when null (issue 30's: most rows have no leak).
_OPTIONAL_JSON_FIELDS = ("used_percent", "unused_gib_hours", "leaks", "leak")


def _verdict(value: Any) -> VerdictStatus | None:
    """A stored verdict status (model.json's or fleet.json's) as the enum; None when absent."""
    return None if value is None else VerdictStatus(value)


def _rank_rows(document: JobDocument) -> tuple[dict[str, Any], ...]:
    """fleet.parquet's rows of the document: every diagnosed attempt's, else its own session's."""
    if document.attempts:
        return tuple({**rank.as_json(), "session_id": entry.attempt.session_id,
                      "session_verdict": None if entry.attempt.verdict is None else entry.attempt.verdict.value}
                     for entry in document.attempts for rank in entry.ranks)
    session = {"session_id": document.selected_session_id, "session_verdict": document.verdict.status.value}
    return tuple({**rank.as_json(), **session} for rank in session_rank_rows(document.model, document.fleet))


def row_from_document(
    document: JobDocument, *, status: JobStatus, report: str | None, exit_code: int | None = None
) -> FleetRow:
    """A diagnosed (or skipped) job's row from its model.json; ``exit_code`` overrides the stored one
    (the stored one applied the ``--fail-on`` of the run that wrote it)."""
    model, verdict = document.model, document.verdict
    fleet = None if document.fleet is None else document.fleet.as_json()
    attempts = document.attempts or ()
    worst = next((entry.attempt for entry in attempts if entry.attempt.session_id == document.worst_session), None)
    earliest, most_severe = row_causes(document)
    return FleetRow(
        job_id=document.job_id,
        status=status,
        verdict=verdict.status,
        exit_code=int(verdict.exit_code) if exit_code is None else int(exit_code),
        summary=verdict.summary,
        earliest=earliest,
        most_severe=most_severe,
        ranks_present=len(model.present_ranks),
        ranks_expected=len(model.expected_ranks),
        missing_ranks=model.missing_ranks,
        diagnosed_at=document.generated_at.isoformat(),
        input_fingerprint=document.input_fingerprint,
        options=None if document.options is None else dict(document.options),
        report=report,
        outlier_ranks=() if fleet is None else tuple(fleet["outlier_ranks"]),
        coverage=None if fleet is None else fleet["coverage"],
        session_count=document.session_count,
        worst_session=document.worst_session,
        worst_attempt=worst.describe() if worst is not None and len(attempts) > 1 else None,
        cut_short=tuple({name: getattr(entry, name) for name in CUT_SHORT_FIELDS} for entry in document.cut_short),
        rank_rows=_rank_rows(document),
        **_growth_fields(document),
    )


#: What a fleet.json row's ``leak`` holds of its leaking rank soonest to run out (bytes per hour, seconds).
LEAK_FIELDS = ("rank", "host", "device_id", "bytes_per_hour", "device_total_bytes", "capacity_after_start_s")


def _growth_fields(document: JobDocument) -> dict[str, Any]:
    """The row's headroom and leak members from the document's fleet facts (none without them)."""
    if document.fleet is None:
        return {}
    facts = document.fleet.facts
    headroom = job_headroom(facts.ranks, {item.rank: item.duration_ns for item in facts.growth})
    fields: dict[str, Any] = {
        "used_percent": None if headroom.used_percent is None else round(headroom.used_percent, 2),
        "unused_gib_hours": round(headroom.unused_gib_hours, 3) if headroom.ranks_counted else None,
    }
    if not facts.growth:  # a document written before growth was measured: leaks unknown
        return fields
    leaking = sorted((item for item in facts.growth if item.leak),
                     key=lambda item: (item.capacity_after_start_s or 0.0, item.rank))
    places = {item.rank: item for item in facts.ranks}
    fields["leaks"] = len(leaking)
    if leaking:
        first = leaking[0]
        place = places.get(first.rank)
        fields["leak"] = {"rank": first.rank, "host": None if place is None else place.host,
                          "device_id": None if place is None else place.device_id,
                          "bytes_per_hour": first.judged_bytes_per_hour,
                          "device_total_bytes": first.device_total_bytes,
                          "capacity_after_start_s": first.capacity_after_start_s}
    return fields


#: What a fleet.json row keeps of each of model.json's ``cut_short`` entries.
CUT_SHORT_FIELDS = ("rank", "file", "at_s", "session_id", "dropped_bytes")


def failed_row(job_id: str, *, status: JobStatus, error: str) -> FleetRow:
    return FleetRow(job_id=job_id, status=status, error=error)


def fleet_document(rows: Iterable[FleetRow], *, generated_at: datetime, storage: str) -> dict[str, Any]:
    """fleet.json: rows sorted by job id, with counts by status and by verdict (a job counts once,
    with its verdict: the worst of its sessions)."""
    ordered = sorted(rows, key=lambda row: row.job_id)
    summary = {"jobs": len(ordered)}
    for status in JobStatus:
        summary[status.value] = sum(row.status is status for row in ordered)
    for verdict in VerdictStatus:
        summary[verdict.value] = sum(row.verdict is verdict for row in ordered)
    return {
        "schema_version": FLEET_SCHEMA_VERSION,
        "generated_at": generated_at.isoformat(),
        "storage": storage,
        "summary": summary,
        "jobs": [row.as_json() for row in ordered],
    }


#: Per-rank facts (model.json's ``fleet.ranks``) carried into fleet.parquet; NA for missing ranks.
FACT_COLUMNS = ("host", "device_id", "peak_reserved_bytes", "peak_device_used_bytes", "device_total_bytes")
#: The model's rank-row fields in fleet.parquet.
ROW_COLUMNS = ("rank", "availability", "samples", "allocated_delta_bytes", "reserved_delta_bytes",
               "hidden_gap_latest_bytes", "hidden_gap_peak_abs_bytes", "has_anomaly", "first_anomaly_timestamp_ns",
               "first_anomaly_signal", "first_anomaly_phase_path")
RANK_COLUMNS = ("job_id", "session_id", "verdict", "session_verdict", *ROW_COLUMNS, *FACT_COLUMNS, "outlier")
#: Columns a fleet.parquet written before sessions had (they lack ``session_id`` and ``session_verdict``).
REQUIRED_RANK_COLUMNS = tuple(name for name in RANK_COLUMNS if name not in ("session_id", "session_verdict"))
RANK_ORDER = ["job_id", "session_id", "rank"]
_INT_COLUMNS = ("rank", "samples", "allocated_delta_bytes", "reserved_delta_bytes", "hidden_gap_latest_bytes",
                "hidden_gap_peak_abs_bytes", "first_anomaly_timestamp_ns", "device_id", "peak_reserved_bytes",
                "peak_device_used_bytes", "device_total_bytes")
_BOOLEAN_COLUMNS = ("has_anomaly", "outlier")
_STRING_COLUMNS = ("job_id", "session_id", "verdict", "session_verdict", "availability", "first_anomaly_signal",
                   "first_anomaly_phase_path", "host")


def _outliers(row: FleetRow) -> frozenset[Any] | None:
    """Ranks of ``row`` flagged on any metric; None when its document had no fleet facts (unknown)."""
    if row.coverage is None and not row.outlier_ranks:
        return None
    return frozenset(item.get("rank") for item in row.outlier_ranks)


def rank_table(rows: Iterable[FleetRow]) -> pd.DataFrame:
    """One row per (job, session, rank): each session's rank rows with the job id and verdict, the
    session id and verdict, the rank's facts (:data:`FACT_COLUMNS`) and ``outlier`` (flagged on any
    metric; NA when the session has no fleet facts); typed columns, in :data:`RANK_ORDER`."""
    records = []
    for row in rows:
        outliers = _outliers(row)
        job = {"job_id": row.job_id, "verdict": None if row.verdict is None else row.verdict.value}
        for rank in row.rank_rows:
            record = {name: rank.get(name) for name in RANK_COLUMNS}
            if "outlier" not in rank:  # a row built without its rank facts' outlier flags
                record["outlier"] = None if outliers is None else rank.get("rank") in outliers
            records.append({**record, **job})
    table = _typed(pd.DataFrame.from_records(records, columns=list(RANK_COLUMNS)))
    return table.sort_values(RANK_ORDER, kind="stable", ignore_index=True)


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (exactly :data:`RANK_COLUMNS`) with fleet.parquet's column types."""
    types = {name: "Int64" for name in _INT_COLUMNS}
    types.update({name: "boolean" for name in _BOOLEAN_COLUMNS})
    types.update({name: "string" for name in _STRING_COLUMNS})
    return table.astype(types)
