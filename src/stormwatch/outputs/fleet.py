"""The fleet summary: one row per job (``fleet.json``) and one per (job, session, rank) (``fleet.parquet``).

Rows are built from each job's model.json document (parsed JSON), so a job
skipped because its inputs did not change keeps the row of its last diagnosis.
Failed and refused jobs get a row with their error and no verdict.

A job diagnosed session by session (model.json's ``attempts``, see
:mod:`stormwatch.outputs.attempts`) gets, in fleet.json, its ``session_count``, its
``worst_session`` (the session its verdict comes from), ``worst_attempt`` (that attempt described,
``attempt 1 of 2, interrupted, OOM on rank 3``) and that session's first causes (``earliest``,
``most_severe``); in fleet.parquet, the rank rows of every session it diagnosed,
each with its ``session_id`` and ``session_verdict`` beside the job's ``verdict``. A document
without ``attempts`` is one session: the one it names (``selected_session_id``).

A job's fleet facts (model.json's ``fleet`` member, see :mod:`stormwatch.peers`) reach
both: a fleet.json row carries its ``outlier_ranks`` and ``coverage``; each fleet.parquet
rank row its identity and peaks (:data:`FACT_COLUMNS`) and whether it is an ``outlier``.
Documents written before the ``fleet`` member existed give empty outliers, no coverage,
and missing (NA) facts and ``outlier`` cells.

The files whose last record was cut short (model.json's top-level ``cut_short``, see
:mod:`stormwatch.outputs.cut_short`) reach the fleet.json row as ``cut_short``: per file its
``rank``, ``file`` (relative to the job folder), ``at_s``, ``session_id`` and ``dropped_bytes``
(empty for a clean job, and for documents written before the member existed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import pandas as pd

from stormwatch.analysis.model import IndicatorKind
from stormwatch.outputs.verdict import VerdictStatus

FLEET_SCHEMA_VERSION = 1
_INDICATOR_FIELDS = ("rank", "signal", "severity", "timestamp_ns", "phase_path", "confidence")


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
    earliest: dict[str, Any] | None = None
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

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("rank_rows")
        data["status"] = self.status.value
        data["verdict"] = None if self.verdict is None else self.verdict.value
        data["missing_ranks"] = list(self.missing_ranks)
        data["outlier_ranks"] = list(data["outlier_ranks"])
        data["cut_short"] = list(data["cut_short"])
        return data


def _verdict(value: Any) -> VerdictStatus | None:
    """A stored verdict status (model.json's or fleet.json's) as the enum; None when absent."""
    return None if value is None else VerdictStatus(value)


def _indicator(indicators: Sequence[Mapping[str, Any]], kind: IndicatorKind) -> dict[str, Any] | None:
    for item in indicators:
        if item.get("kind") == kind:
            return {name: item.get(name) for name in _INDICATOR_FIELDS}
    return None


def session_rank_rows(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A one-session document's rank rows: the model's rows with their facts (:data:`FACT_COLUMNS`) and
    ``outlier`` (flagged on any metric; None when the document has no fleet facts). What an attempt
    carries into its job's document (model.json ``attempts[].ranks``), and so into fleet.parquet."""
    model = document.get("model", {})
    fleet = document.get("fleet") or {}
    facts = {fact.get("rank"): fact for fact in fleet.get("ranks", ())}
    outliers = None if fleet.get("coverage") is None and not fleet.get("outlier_ranks") else {
        item.get("rank") for item in fleet.get("outlier_ranks", ())}
    return [
        {**row, **{name: facts.get(row.get("rank"), {}).get(name) for name in FACT_COLUMNS},
         "outlier": None if outliers is None else row.get("rank") in outliers}
        for row in model.get("rows", ())
    ]


def _attempt_rows(attempts: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple({**rank, "session_id": attempt.get("session_id"), "session_verdict": attempt.get("verdict")}
                 for attempt in attempts for rank in attempt.get("ranks") or ())


def _cause(cause: Any) -> dict[str, Any] | None:
    return {name: cause.get(name) for name in _INDICATOR_FIELDS} if isinstance(cause, Mapping) else None


def row_from_document(
    document: Mapping[str, Any], *, status: JobStatus, report: str | None, exit_code: int | None = None
) -> FleetRow:
    """A diagnosed (or skipped) job's row from its model.json; ``exit_code`` overrides the stored one
    (the stored one applied the ``--fail-on`` of the run that wrote it)."""
    model = document.get("model", {})
    verdict = document.get("verdict", {})
    fleet = document.get("fleet") or {}
    attempts = [item for item in document.get("attempts") or () if isinstance(item, Mapping)]
    worst = next((item for item in attempts if item.get("session_id") == document.get("worst_session")), None)
    if attempts:
        rows = _attempt_rows(attempts)
    else:
        session = {"session_id": document.get("selected_session_id"), "session_verdict": verdict.get("status")}
        rows = tuple({**rank, **session} for rank in session_rank_rows(document))
    indicators = model.get("indicators", ())
    return FleetRow(
        job_id=str(document.get("job_id")),
        status=status,
        verdict=_verdict(verdict.get("status")),
        exit_code=verdict.get("exit_code") if exit_code is None else int(exit_code),
        summary=verdict.get("summary"),
        earliest=_cause(worst.get(IndicatorKind.EARLIEST)) if worst else _indicator(indicators, IndicatorKind.EARLIEST),
        most_severe=(_cause(worst.get(IndicatorKind.MOST_SEVERE)) if worst
                     else _indicator(indicators, IndicatorKind.MOST_SEVERE)),
        ranks_present=len(model.get("present_ranks", ())),
        ranks_expected=len(model.get("expected_ranks", ())),
        missing_ranks=tuple(model.get("missing_ranks", ())),
        diagnosed_at=document.get("generated_at"),
        input_fingerprint=document.get("input_fingerprint"),
        options=document.get("options"),
        report=report,
        outlier_ranks=tuple(dict(item) for item in fleet.get("outlier_ranks", ())),
        coverage=None if fleet.get("coverage") is None else dict(fleet["coverage"]),
        session_count=document.get("session_count", len(attempts) or None),
        worst_session=document.get("worst_session"),
        worst_attempt=_description(worst) if len(attempts) > 1 else None,
        cut_short=_cut_short(document),
        rank_rows=rows,
    )


#: What a fleet.json row keeps of each of model.json's ``cut_short`` entries.
CUT_SHORT_FIELDS = ("rank", "file", "at_s", "session_id", "dropped_bytes")


def _cut_short(document: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    entries = document.get("cut_short")
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        return ()
    return tuple({name: item.get(name) for name in CUT_SHORT_FIELDS} for item in entries if isinstance(item, Mapping))


def _description(attempt: Mapping[str, Any] | None) -> str | None:
    text = None if attempt is None else attempt.get("description")
    return text if isinstance(text, str) else None


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


def _merged(kept: pd.DataFrame, fresh: pd.DataFrame) -> pd.DataFrame:
    merged = pd.concat([_typed(kept.reindex(columns=list(RANK_COLUMNS))), fresh], ignore_index=True)
    return merged.sort_values(RANK_ORDER, kind="stable", ignore_index=True)


def merge_rank_tables(previous: pd.DataFrame | None, rows: Sequence[FleetRow]) -> pd.DataFrame:
    """``previous`` with the ranks of ``rows``' jobs replaced by theirs (post-job updates)."""
    fresh = rank_table(rows)
    if previous is None or previous.empty:
        return fresh
    return _merged(previous[~previous["job_id"].isin([row.job_id for row in rows])], fresh)


def with_carried_ranks(carried: pd.DataFrame | None, rows: Sequence[FleetRow]) -> pd.DataFrame:
    """The ranks of ``rows`` (those diagnosed now) with ``carried``: the previous fleet.parquet rows
    of jobs whose rows were carried over unchanged (none of them among ``rows``' rank rows)."""
    fresh = rank_table(rows)
    if carried is None or carried.empty:
        return fresh
    return _merged(carried, fresh)


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
