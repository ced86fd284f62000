"""What an audit has to do, decided from one inventory and the stored runs, column by column.

A job is unchanged, and keeps its stored run without a request of its own, when its listed
inputs give the fingerprint its last committed diagnosis recorded, it was diagnosed with the
same options (engine version included), and its model.json and report.html are still there at
the sizes its commit wrote. Every other valid job is diagnosed; ``force`` diagnoses them all. A
job diagnosed only because its outputs are missing or damaged (its committed diagnosis has these
inputs and options) is a repair: its outputs are rewritten and its history keeps the one run it
has. The committed runs are the runs files' (:mod:`stormwatch.outputs.fleet_runs`) with those of
every commit not yet folded into them laid over them (:mod:`stormwatch.tasks.commits`): a job
whose reports exist but whose diagnosis was never committed (an audit killed between the two) is
diagnosed again, never taken as unchanged on its model.json alone.

The plan is vectorised: an unchanged audit builds no Python object per stored run. A fleet.json
of version 1 (every run in ``jobs``, their ranks in fleet.parquet) with no runs files beside it is
read as the stored runs, and the next fold writes them as runs files (``migrated``).
"""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

import numpy as np
import orjson
import pandas as pd

from stormwatch.outputs.fleet import RANK_COLUMNS, REQUIRED_RANK_COLUMNS, FleetRow, JobStatus
from stormwatch.outputs.fleet_runs import RUNS_SCHEMA, canonical_options, empty_runs, latest_runs, rows_of, runs_table
from stormwatch.outputs.verdict import VerdictStatus, exit_code_for
from stormwatch.severity import FailOn
from stormwatch.tasks.audit_job import AuditOptions
from stormwatch.tasks.commits import Commit, PendingCommits, pending_commits
from stormwatch.tasks.runs_store import StoredRuns, read_runs
from stormwatch.tasks.storage.inventory import Inventory, JobInputs
from stormwatch.tasks.storage.protocol import FLEET_JSON_KEY, FLEET_PARQUET_KEY, Storage, report_html_key

log = logging.getLogger(__name__)

_SETTLED = (JobStatus.DIAGNOSED.value, JobStatus.SKIPPED.value)


def _frame(rows: Sequence[FleetRow], *, folded_at: str) -> pd.DataFrame:
    """Rows as runs-table rows (``job_name`` and ``night`` left blank: the fold sets them)."""
    if not rows:
        return empty_runs()
    table = runs_table(rows, night=datetime.now(UTC).date(), folded_at=datetime.now(UTC), fold_id="plan",
                       name_of=lambda job_id: job_id).to_pandas()
    table["folded_at"] = folded_at
    table["job_name"] = None  # set from the job name pattern where needed (tasks/fleet_view.py)
    table["night"] = [night_of_row(row) for row in rows]
    return table


def night_of_row(row: FleetRow, default: str | None = None) -> str:
    """The night (YYYY-MM-DD, UTC) a row's run belongs to: its diagnosis date; ``default`` (else today)
    for a row without one."""
    if row.diagnosed_at:
        try:
            return datetime.fromisoformat(row.diagnosed_at).astimezone(UTC).date().isoformat()
        except ValueError:
            pass
    return default or datetime.now(UTC).date().isoformat()


def _commit_frame(commit: Commit) -> pd.DataFrame:
    """A pending commit's rows; they win over a stored run folded before the commit was made."""
    frame = _frame(commit.rows, folded_at=commit.committed_at.isoformat())
    frame["night"] = commit.audit_time.astimezone(UTC).date().isoformat()
    return frame


def migrated_rows(fleet_json: bytes | None, fleet_parquet: bytes | None) -> list[FleetRow]:
    """A version-1 fleet.json's rows, each with its ranks from fleet.parquet (a row whose ranks are
    unknown is left out: its job is diagnosed again). Damaged files count as absent."""
    try:
        document = orjson.loads(fleet_json) if fleet_json else {}
        if not isinstance(document, dict) or document.get("schema_version", 1) != 1:
            return []
        rows = [FleetRow.from_json(item) for item in document.get("jobs", ())]
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as exc:
        log.warning("previous fleet.json unreadable (%s): every job is diagnosed", type(exc).__name__)
        return []
    ranks: dict[str, list[dict[str, object]]] = {}
    try:
        table = pd.read_parquet(io.BytesIO(fleet_parquet)) if fleet_parquet else None
        if table is not None and "hidden_gap_peak_bytes" in table.columns:  # schema version 3's name
            table = table.rename(columns={"hidden_gap_peak_bytes": "hidden_gap_peak_abs_bytes"})
        if table is not None and not set(REQUIRED_RANK_COLUMNS) <= set(table.columns):
            raise ValueError("columns missing")
        if table is not None:
            table = table.reindex(columns=list(RANK_COLUMNS)).astype(object).where(table.notna(), None)
            for record in table.to_dict("records"):
                ranks.setdefault(str(record["job_id"]), []).append(record)
    except (OSError, ValueError) as exc:
        log.warning("previous fleet.parquet unreadable (%s): its jobs are diagnosed", type(exc).__name__)
        ranks = {}
    kept = []
    for row in rows:
        found = tuple(ranks.get(row.job_id, ()))
        if row.ranks_present and not found and row.status in (JobStatus.DIAGNOSED, JobStatus.SKIPPED):
            continue
        kept.append(dataclasses.replace(row, rank_rows=found))
    return kept


@dataclass(frozen=True)
class PreviousFleet:
    """The committed runs: the newest row per job id (plan columns; ``row`` where read), the runs files
    by night, the pending commits (cleared once a fold holds them) and the version-1 rows to migrate."""

    table: pd.DataFrame = dataclasses.field(default_factory=empty_runs)
    files: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    commits: PendingCommits = PendingCommits()
    migrated: tuple[FleetRow, ...] = ()
    damaged: tuple[str, ...] = ()

    @classmethod
    def of_rows(cls, rows: Sequence[FleetRow], commits: PendingCommits | None = None) -> PreviousFleet:
        """Stored runs given as rows (their ``row`` column filled), with ``commits`` laid over them."""
        commits = commits or PendingCommits()
        return cls(latest_runs([_frame(rows, folded_at=""), *(_commit_frame(c) for c in commits.commits)]),
                   commits=commits)


def read_previous_fleet(storage: Storage, inventory: Inventory, *, shown_since: date | None = None) -> PreviousFleet:
    """The runs files (``row`` read for the nights from ``shown_since``, a date) with every pending commit
    laid over them (each applied to the history again on the way, idempotent); a version-1 fleet.json
    when there are no runs files. ``inventory`` is not read here (kept for the task's signature)."""
    now = datetime.now(UTC)
    stored = read_runs(storage, shown_since=shown_since, now=now)
    migrated: list[FleetRow] = []
    if not stored.files:
        migrated = migrated_rows(storage.read_report(FLEET_JSON_KEY), storage.read_report(FLEET_PARQUET_KEY))
    pending = pending_commits(storage)
    for problem in pending.damaged:
        log.warning("%s", problem)
    return _previous(stored, migrated, pending)


def _previous(stored: StoredRuns, migrated: Sequence[FleetRow], pending: PendingCommits) -> PreviousFleet:
    frames = [stored.table, _frame(migrated, folded_at=""), *(_commit_frame(c) for c in pending.commits)]
    return PreviousFleet(latest_runs(frames), stored.files, pending, tuple(migrated), stored.damaged)


@dataclass(frozen=True)
class AuditPlan:
    """Jobs to diagnose (inventory order); ``current``: every inventory job's committed run, if any
    (plan columns and ``row``), with ``unchanged`` (kept without a request) and ``wanted_fingerprint``;
    the pending commits; report files found damaged; repairs."""

    diagnose: tuple[JobInputs, ...]
    current: pd.DataFrame
    commits: tuple[Commit, ...] = ()
    damaged: tuple[str, ...] = ()
    #: Jobs among ``diagnose`` whose inputs and options are those of their committed diagnosis (their
    #: outputs are missing or damaged): job id -> the history file already holding that diagnosis's
    #: rows. Diagnosing them rewrites their outputs and records no second run.
    repairs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    migrated: tuple[FleetRow, ...] = ()

    @property
    def diagnose_bytes(self) -> int:
        return sum(job.size_bytes for job in self.diagnose)

    @property
    def commit_keys(self) -> tuple[str, ...]:
        return tuple(commit.key for commit in self.commits)

    @property
    def kept(self) -> pd.DataFrame:
        """The unchanged jobs' runs."""
        return self.current[self.current["unchanged"]]

    @property
    def unchanged_count(self) -> int:
        return int(self.current["unchanged"].sum()) if len(self.current) else 0

    def unchanged_rows(self, fail_on: FailOn) -> list[FleetRow]:
        """The unchanged jobs' rows (those whose ``row`` was read), as a fleet.json shows them."""
        kept = self.kept
        return [skipped_row(row, fail_on) for row in rows_of(kept[kept["row"].notna()])]


def skipped_row(row: FleetRow, fail_on: FailOn) -> FleetRow:
    """A kept run as this audit shows it: ``skipped``, exit code under this run's ``fail_on``."""
    assert row.verdict is not None
    return dataclasses.replace(row, status=JobStatus.SKIPPED, report=report_html_key(row.job_id), error=None,
                               exit_code=int(exit_code_for(row.verdict, fail_on)))


def _damage(job_ids: Sequence[str], sizes: Sequence[object], report_bytes: Mapping[str, int]) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = {}
    for job_id, text in zip(job_ids, sizes, strict=True):
        if not isinstance(text, str):
            continue
        for name, size in sorted(orjson.loads(text).items()):
            key = f"{job_id}/{name}"
            found = report_bytes.get(key)
            if found is not None and found != size:
                lines.setdefault(job_id, []).append(
                    f"{key}: {found} bytes where {size} were written; damaged, so the job is diagnosed again")
    return lines


def _retired(current: pd.DataFrame, retired: pd.DataFrame, recorded: str | None) -> pd.Series:
    """Per row of ``current`` (the plan's: inventory jobs with ``wanted_fingerprint`` and their stored
    run, if any): retired with these very inputs and options, and not stored again since."""
    if retired.empty or current.empty:
        return pd.Series(False, index=current.index)
    merged = current[["job_id", "wanted_fingerprint", "status"]].merge(
        retired.rename(columns={"input_fingerprint": "retired_fingerprint", "options": "retired_options"}),
        on="job_id", how="left")
    mask = ((merged["retired_fingerprint"] == merged["wanted_fingerprint"]) & (merged["retired_options"] == recorded)
            & merged["status"].isna())
    return pd.Series(mask.to_numpy(dtype=bool), index=current.index)


def plan_audit(inventory: Inventory, previous: PreviousFleet, *, options: AuditOptions,
               retired: pd.DataFrame | None = None) -> AuditPlan:
    """``retired``: the runs ``--retention-days`` retired (:mod:`stormwatch.tasks.retention`); an inventory
    job retired with these very inputs and options is left alone, neither diagnosed nor shown."""
    recorded = canonical_options(options.diagnose.recorded())
    jobs = pd.DataFrame({"job_id": [job.job_id for job in inventory.jobs],
                         "wanted_fingerprint": [job.fingerprint for job in inventory.jobs]},
                        columns=["job_id", "wanted_fingerprint"])
    table = previous.table if len(previous.table) else empty_runs()
    current = jobs.merge(table, on="job_id", how="left").reindex(
        columns=["job_id", "wanted_fingerprint", *(name for name in RUNS_SCHEMA.names if name != "job_id")])
    same_inputs = (current["input_fingerprint"] == current["wanted_fingerprint"]).to_numpy(dtype=bool)
    settles = (same_inputs & current["status"].isin(_SETTLED).to_numpy() & current["verdict"].notna().to_numpy()
               & (current["options"] == recorded).to_numpy(dtype=bool))
    reported = current["job_id"].isin(inventory.reported).to_numpy()
    damage = _damage(current["job_id"][same_inputs].tolist(), current["output_bytes"][same_inputs].tolist(),
                     inventory.report_bytes)
    undamaged = ~current["job_id"].isin(damage).to_numpy()
    unchanged = settles & reported & undamaged & (not options.force)
    current["unchanged"] = unchanged
    repairing = ~unchanged & settles & current["history_key"].notna().to_numpy() & (not options.force)
    repairs = dict(zip(current["job_id"][repairing], current["history_key"][repairing], strict=True))
    left = (np.zeros(len(current), dtype=bool) if retired is None
            else _retired(current, retired, recorded).to_numpy(dtype=bool))
    current["retired"] = left & ~unchanged
    diagnose = tuple(job for job, kept, gone in zip(inventory.jobs, unchanged, current["retired"], strict=True)
                     if not kept and not gone)
    damaged = tuple(line for job in inventory.jobs for line in damage.get(job.job_id, ()))
    return AuditPlan(diagnose=diagnose, current=current, commits=previous.commits.commits, damaged=damaged,
                     repairs=repairs, migrated=previous.migrated)


def unchanged_exit_code(plan: AuditPlan, fail_on: FailOn) -> int | None:
    """The worst exit code the unchanged jobs give under ``fail_on`` (None without any)."""
    verdicts = plan.kept["verdict"].dropna().unique()
    codes = [int(exit_code_for(VerdictStatus(value), fail_on)) for value in verdicts]
    return max(codes, default=None)
