"""What an audit has to do, decided from one inventory and the previous fleet outputs.

A job is unchanged, and keeps its previous row without a request of its own, when
its listed inputs give the fingerprint its last committed diagnosis recorded, it was
diagnosed with the same options (engine version included), its model.json and report.html
are still there, and its ranks are known (in fleet.parquet, or in its commit). Every other
valid job is diagnosed; ``force`` diagnoses them all. A job diagnosed only because its outputs
are missing or damaged (its committed diagnosis has these inputs and options) is a repair: its
outputs are rewritten and its history keeps the one run it has. The committed rows are fleet.json's
with those of every commit not yet folded into it laid over them
(:mod:`stormwatch.tasks.commits`): a job whose reports exist but whose diagnosis was never
committed (an audit killed between the two) is diagnosed again, never taken as unchanged
on its model.json alone.
"""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import orjson
import pandas as pd

from stormwatch.outputs.fleet import RANK_COLUMNS, REQUIRED_RANK_COLUMNS, FleetRow, JobStatus
from stormwatch.outputs.verdict import exit_code_for
from stormwatch.tasks.audit_job import AuditOptions
from stormwatch.tasks.commits import PendingCommits, newest_rows, pending_commits
from stormwatch.tasks.storage.inventory import Inventory, JobInputs
from stormwatch.tasks.storage.protocol import (
    FLEET_JSON_KEY,
    FLEET_PARQUET_KEY,
    Storage,
    report_html_key,
)

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class PreviousFleet:
    """The last committed fleet: rows by job id (fleet.json's, with pending commits' over them), the rank
    table (fleet.parquet: one row per job, session and rank; one written before sessions were kept reads
    with null session columns) and the pending commits (cleared once the next fleet.json holds them)."""

    rows: Mapping[str, FleetRow]
    ranks: pd.DataFrame | None = None
    commits: PendingCommits = PendingCommits()

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


def read_previous_fleet(storage: Storage, inventory: Inventory) -> PreviousFleet:
    """fleet.json and fleet.parquet, with the rows of every pending commit laid over them (each
    commit applied to the history again on the way, which is idempotent); ``inventory`` is not
    read here (kept for the task's signature)."""
    previous = PreviousFleet.from_bytes(storage.read_report(FLEET_JSON_KEY), storage.read_report(FLEET_PARQUET_KEY))
    pending = pending_commits(storage)
    for problem in pending.damaged:
        log.warning("%s", problem)
    return PreviousFleet(newest_rows(dict(previous.rows), pending.commits), previous.ranks, pending)


@dataclass(frozen=True)
class AuditPlan:
    """Jobs to diagnose (inventory order), unchanged jobs' rows (status ``skipped``, exit code
    under this run's ``fail_on``) and their ranks from the previous fleet.parquet (those whose row
    came from a pending commit carry their own), and the pending commits' keys."""

    diagnose: tuple[JobInputs, ...]
    unchanged: tuple[FleetRow, ...]
    unchanged_ranks: pd.DataFrame | None
    commits: tuple[str, ...] = ()
    damaged: tuple[str, ...] = ()  # report files found damaged (their jobs are among ``diagnose``)
    #: Jobs among ``diagnose`` whose inputs and options are those of their committed diagnosis (their
    #: outputs are missing or damaged): job id -> the history file already holding that diagnosis's
    #: rows. Diagnosing them rewrites their outputs and records no second run.
    repairs: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def diagnose_bytes(self) -> int:
        return sum(job.size_bytes for job in self.diagnose)


def _unchanged(job: JobInputs, row: FleetRow | None, *, inventory: Inventory, ranked: set[str],
               recorded: Mapping[str, object]) -> bool:
    return (
        row is not None
        and row.settles(job.fingerprint, recorded)
        and job.job_id in inventory.reported
        and not row.damaged_outputs(inventory.report_bytes)
        and (not row.ranks_present or bool(row.rank_rows) or job.job_id in ranked)
    )


def plan_audit(inventory: Inventory, previous: PreviousFleet, *, options: AuditOptions) -> AuditPlan:
    recorded = options.diagnose.recorded()
    ranked = set() if previous.ranks is None else set(previous.ranks["job_id"].dropna().astype(str))
    diagnose: list[JobInputs] = []
    unchanged: list[FleetRow] = []
    repairs: dict[str, str] = {}
    for job in inventory.jobs:
        row = previous.rows.get(job.job_id)
        if options.force or not _unchanged(job, row, inventory=inventory, ranked=ranked, recorded=recorded):
            diagnose.append(job)
            repair = None if options.force or row is None else row.repair_of(job.fingerprint, recorded)
            if repair is not None:
                repairs[job.job_id] = repair
            continue
        assert row is not None and row.verdict is not None  # as _unchanged checked
        unchanged.append(dataclasses.replace(
            row, status=JobStatus.SKIPPED, report=report_html_key(job.job_id), error=None,
            exit_code=int(exit_code_for(row.verdict, options.diagnose.fail_on))))
    kept = {row.job_id for row in unchanged if not row.rank_rows}  # a committed row brings its own ranks
    ranks = None
    if previous.ranks is not None and kept:
        ranks = previous.ranks[previous.ranks["job_id"].isin(kept)].reset_index(drop=True)
    damaged = [line for job in inventory.jobs if (row := previous.rows.get(job.job_id)) is not None
               and row.input_fingerprint == job.fingerprint for line in row.damaged_outputs(inventory.report_bytes)]
    return AuditPlan(diagnose=tuple(diagnose), unchanged=tuple(unchanged), unchanged_ranks=ranks,
                     commits=previous.commits.keys, damaged=tuple(damaged), repairs=repairs)
