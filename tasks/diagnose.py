"""The audit's Prefect tasks around the engine: take the inventory, read the previous fleet,
diagnose a batch of jobs, diagnose one job (post-job).

Each is a thin step over plain functions. The listing and reads retry transient failures
with back-off as whole tasks (:data:`~stormwatch.tasks.retry.FLEET_IO_RETRY`; an unsafe or
missing root fails at once); a batch does not, since
each of its jobs retries its own transient failures (:func:`~stormwatch.tasks.audit_job.run_job`)
and fails alone. No task caches its result (``NO_CACHE``): every audit looks afresh,
and hashing a batch's inputs would cost the orchestrator time for nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.tasks.audit_job import AuditOptions, JobOutcome, JobWork, audit_one, failed_outcome, run_job
from stormwatch.tasks.batches import Batch
from stormwatch.tasks.commit_outcomes import commit_outcomes
from stormwatch.tasks.engine_pool import EngineSettings, JobTimedOut, WorkerDied, shared_pool
from stormwatch.tasks.plan import PreviousFleet, read_previous_fleet
from stormwatch.tasks.retry import DIAGNOSE_JOB_RETRY, FLEET_IO_RETRY, is_transient
from stormwatch.tasks.storage.inventory import Inventory
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import StorageSettings
from stormwatch.tasks.timeouts import FLEET_IO_TASK_TIMEOUT_S


@task(name="take-inventory", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def take_inventory(settings: StorageSettings) -> Inventory:
    return storage_for(settings).take_inventory()


@task(name="read-previous-fleet", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def read_previous(settings: StorageSettings, inventory: Inventory, shown_since: date | None = None) -> PreviousFleet:
    """The stored runs (``row`` read for the nights from ``shown_since``) and pending commits."""
    return read_previous_fleet(storage_for(settings), inventory, shown_since=shown_since)


def died_outcome(work: JobWork, error: WorkerDied) -> JobOutcome:
    """The failed row of a job whose process died, or that ran past its timeout: then its error
    reads ``timed out after <N> s``."""
    return failed_outcome(work.job.job_id, str(error) if isinstance(error, JobTimedOut) else error)


@task(name="diagnose-batch", task_run_name="diagnose-batch-{batch.label}", cache_policy=NO_CACHE)
def diagnose_batch(
    settings: StorageSettings,
    batch: Batch,
    options: AuditOptions,
    engine: EngineSettings,
    earlier: Mapping[str, pd.DataFrame] | None = None,
    audit: str = "",
) -> list[JobOutcome]:
    """An outcome per job of the batch, in its order; a job's failure is its outcome's row. The
    diagnosed jobs are committed together once their outputs are written (``audit``: the audit's id,
    :mod:`stormwatch.tasks.commits`). ``earlier``: earlier runs by job name (the batch's names only)."""
    earlier = earlier or {}
    work = [JobWork(job, earlier.get(options.job_names.name_of(job.job_id)), repair_of=batch.repairs.get(job.job_id))
            for job in batch.jobs]
    outcomes = shared_pool(engine).map(run_job, work, settings, options, on_death=died_outcome)
    return commit_outcomes(storage_for(settings), outcomes, audit=audit, audit_time=options.acting_at())


@task(
    name="diagnose-job",
    task_run_name="diagnose-{job_id}",
    cache_policy=NO_CACHE,
    **DIAGNOSE_JOB_RETRY.task_options(retry_if=is_transient),
)
def diagnose_job(
    settings: StorageSettings, job_id: str, options: AuditOptions, earlier: pd.DataFrame | None = None
) -> JobOutcome:
    """One job, skipped when its model.json says it is unchanged (post-job); retried when transient.
    ``earlier``: the earlier runs of its job name."""
    return audit_one(storage_for(settings), job_id, options=options, earlier=earlier)
