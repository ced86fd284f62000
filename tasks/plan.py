"""What an audit has to do, decided from one inventory and the previous fleet outputs.

A job is unchanged, and keeps its previous row without a request of its own, when
its listed inputs give the fingerprint its last diagnosis recorded, it was diagnosed
with the same options (engine version included), its model.json and report.html are
still there, and fleet.parquet still holds its ranks. Every other valid job is
diagnosed; ``force`` diagnoses them all. Only a job that has reports but no usable
row in fleet.json costs a read (its model.json), see :func:`read_previous_fleet`.
"""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import orjson
import pandas as pd

from stormwatch.outputs.fleet import RANK_COLUMNS, REQUIRED_RANK_COLUMNS, FleetRow, JobStatus, row_from_document
from stormwatch.outputs.verdict import exit_code_for
from stormwatch.tasks.audit_job import AuditOptions
from stormwatch.tasks.storage.inventory import Inventory, JobInputs
from stormwatch.tasks.storage.protocol import (
    FLEET_JSON_KEY,
    FLEET_PARQUET_KEY,
    Storage,
    model_json_key,
    report_html_key,
)

log = logging.getLogger(__name__)

#: Rows whose last diagnosis stands while their inputs do not change.
_DIAGNOSED = (JobStatus.DIAGNOSED, JobStatus.SKIPPED)


@dataclass(frozen=True)
class PreviousFleet:
    """The last published fleet: rows by job id (fleet.json) and the rank table (fleet.parquet: one row per
    job, session and rank; one written before sessions were kept reads with null session columns)."""

    rows: Mapping[str, FleetRow]
    ranks: pd.DataFrame | None = None

    @classmethod
    def from_bytes(cls, fleet_json: bytes | None, fleet_parquet: bytes | None) -> PreviousFleet:
        """Either file damaged or missing counts as absent (its jobs are diagnosed again)."""
        rows: dict[str, FleetRow] = {}
        try:
            document = orjson.loads(fleet_json) if fleet_json else {}
            for item in document.get("jobs", ()):
                row = FleetRow.from_json(item)
                rows[row.job_id] = row
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as exc:
            log.warning("previous fleet.json unreadable (%s): every job is diagnosed", type(exc).__name__)
            rows = {}
        ranks: pd.DataFrame | None = None
        try:
            ranks = pd.read_parquet(io.BytesIO(fleet_parquet)) if fleet_parquet else None
            if ranks is not None and not set(REQUIRED_RANK_COLUMNS) <= set(ranks.columns):
                raise ValueError("columns missing")
            if ranks is not None:  # written before sessions were kept: no session columns (NA)
                ranks = ranks.reindex(columns=list(RANK_COLUMNS))
        except (OSError, ValueError) as exc:
            log.warning("previous fleet.parquet unreadable (%s): its jobs are diagnosed", type(exc).__name__)
            ranks = None
        return cls(rows, ranks)


def recovered_row(storage: Storage, job_id: str) -> FleetRow | None:
    """A job's row (with its rank rows) from its model.json; None when missing or damaged."""
    data = storage.read_report(model_json_key(job_id))
    try:
        document = orjson.loads(data) if data else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict) or document.get("job_id") != job_id:
        return None
    try:
        return row_from_document(document, status=JobStatus.DIAGNOSED, report=report_html_key(job_id))
    except (AttributeError, TypeError, ValueError):
        return None


def read_previous_fleet(storage: Storage, inventory: Inventory) -> PreviousFleet:
    """fleet.json and fleet.parquet; and, for jobs with reports that fleet.json does not describe
    (an audit that stopped before publishing, a fleet.json from before options were recorded),
    their model.json: one read each, so those jobs are not diagnosed again for nothing."""
    previous = PreviousFleet.from_bytes(storage.read_report(FLEET_JSON_KEY), storage.read_report(FLEET_PARQUET_KEY))
    rows = dict(previous.rows)
    for job in inventory.jobs:
        row = rows.get(job.job_id)
        if job.job_id in inventory.reported and (row is None or row.options is None):
            found = recovered_row(storage, job.job_id)
            if found is not None:
                rows[job.job_id] = found
    return PreviousFleet(rows, previous.ranks)


@dataclass(frozen=True)
class AuditPlan:
    """Jobs to diagnose (inventory order), unchanged jobs' rows (status ``skipped``, exit code
    under this run's ``fail_on``) and their ranks from the previous fleet.parquet."""

    diagnose: tuple[JobInputs, ...]
    unchanged: tuple[FleetRow, ...]
    unchanged_ranks: pd.DataFrame | None

    @property
    def diagnose_bytes(self) -> int:
        return sum(job.size_bytes for job in self.diagnose)


def _unchanged(job: JobInputs, row: FleetRow | None, *, inventory: Inventory, ranked: set[str],
               recorded: Mapping[str, object]) -> bool:
    return (
        row is not None
        and row.status in _DIAGNOSED
        and row.verdict is not None
        and row.input_fingerprint == job.fingerprint
        and row.options == recorded
        and job.job_id in inventory.reported
        and (not row.ranks_present or bool(row.rank_rows) or job.job_id in ranked)
    )


def plan_audit(inventory: Inventory, previous: PreviousFleet, *, options: AuditOptions) -> AuditPlan:
    recorded = options.diagnose.recorded()
    ranked = set() if previous.ranks is None else set(previous.ranks["job_id"].dropna().astype(str))
    diagnose: list[JobInputs] = []
    unchanged: list[FleetRow] = []
    for job in inventory.jobs:
        row = previous.rows.get(job.job_id)
        if options.force or not _unchanged(job, row, inventory=inventory, ranked=ranked, recorded=recorded):
            diagnose.append(job)
            continue
        assert row is not None and row.verdict is not None  # as _unchanged checked
        unchanged.append(dataclasses.replace(
            row, status=JobStatus.SKIPPED, report=report_html_key(job.job_id), error=None,
            exit_code=int(exit_code_for(row.verdict, options.diagnose.fail_on))))
    kept = {row.job_id for row in unchanged}
    ranks = None
    if previous.ranks is not None and kept:
        ranks = previous.ranks[previous.ranks["job_id"].isin(kept)].reset_index(drop=True)
    return AuditPlan(tuple(diagnose), tuple(unchanged), ranks)
