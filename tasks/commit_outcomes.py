"""Committing a batch's outcomes: the diagnosed jobs become done together (:mod:`stormwatch.tasks.commits`).

The commit is retried with back-off while the storage fails transiently. A commit that cannot be
written turns its jobs' rows into failed rows saying so: their reports were written but the jobs
are not done, and the next audit diagnoses them again, so nothing is lost and nothing counted twice.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from datetime import datetime

import pyarrow as pa
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.outputs.fleet import JobStatus, failed_row
from stormwatch.tasks.audit_job import JobOutcome
from stormwatch.tasks.commits import Commit, clear, commit_batch, commit_key_of
from stormwatch.tasks.plan import AuditPlan
from stormwatch.tasks.retry import FLEET_IO_RETRY, is_transient
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import Storage, StorageSettings
from stormwatch.tasks.timeouts import FLEET_IO_TASK_TIMEOUT_S

log = logging.getLogger(__name__)


def commit_outcomes(storage: Storage, outcomes: Sequence[JobOutcome], *, audit: str,
                    audit_time: datetime) -> list[JobOutcome]:
    """``outcomes`` with their diagnosed jobs committed: each such row then names its history file and
    commit time. Failed jobs are left as they are (nothing of theirs is committed)."""
    diagnosed = [outcome for outcome in outcomes if outcome.row.status is JobStatus.DIAGNOSED]
    if not diagnosed:
        return list(outcomes)
    tables = [outcome.history for outcome in diagnosed if outcome.history is not None and outcome.history.num_rows]
    history = pa.concat_tables(tables) if tables else None
    made: list[Commit] = []
    attempted = FLEET_IO_RETRY.run(lambda: made.append(_commit(storage, diagnosed, history, audit, audit_time)))
    if not attempted.ok or not made:
        error = attempted.error
        text = f"{type(error).__name__}: {error}" if error is not None else "nothing committed"
        log.error("batch of %d jobs not committed: %s", len(diagnosed), text)
        return [_uncommitted(outcome, text) if outcome.row.status is JobStatus.DIAGNOSED else outcome
                for outcome in outcomes]
    rows = {row.job_id: row for row in made[0].rows}
    return [dataclasses.replace(outcome, row=rows.get(outcome.row.job_id, outcome.row)) for outcome in outcomes]


def _commit(storage: Storage, diagnosed: Sequence[JobOutcome], history: pa.Table | None, audit: str,
            audit_time: datetime) -> Commit:
    commit = commit_batch(storage, [outcome.row for outcome in diagnosed], history, audit=audit,
                          audit_time=audit_time)
    assert commit is not None  # at least one row is diagnosed
    return commit


def _uncommitted(outcome: JobOutcome, error: str) -> JobOutcome:
    row = failed_row(outcome.row.job_id, status=JobStatus.FAILED,
                     error=f"diagnosed, but not committed ({error}): the next audit diagnoses it again")
    return JobOutcome(row)


def folded_commits(plan: AuditPlan, outcomes: Sequence[JobOutcome]) -> list[str]:
    """The commit objects a fleet.json published from ``plan`` and ``outcomes`` holds: those pending
    when the audit began, and those its batches wrote."""
    written = {commit_key_of(outcome.row) for outcome in outcomes}
    return sorted({*plan.commit_keys, *(key for key in written if key is not None)})


@task(name="clear-commits", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def clear_commits_task(settings: StorageSettings, keys: Sequence[str]) -> list[str]:
    """Delete the commit objects ``keys``, once fleet.json is published with their rows; the keys deleted.
    A commit left by a failure here is folded again by the next audit, with the same result."""
    return clear(storage_for(settings), keys)


@task(name="commit-jobs", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S)
def commit_task(settings: StorageSettings, outcomes: Sequence[JobOutcome], audit: str,
                audit_time: datetime) -> list[JobOutcome]:
    """:func:`commit_outcomes` for jobs diagnosed outside a batch (post-job); retried inside."""
    return commit_outcomes(storage_for(settings), outcomes, audit=audit, audit_time=audit_time)
