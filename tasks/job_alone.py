"""One job diagnosed in a process of its own, killed at its timeout: the post-job's diagnosis.

A post-job diagnoses a single job without an engine pool, but its read can hang as an audit's can
(an NFS stall, a FIFO in the job folder), and a thread cannot be killed. So the job runs in a
process forked from the engine's fork server (:mod:`stormwatch.tasks.engine_pool`, which has the
engine imported already) and is killed after ``timeout_s`` (``--job-timeout``): its outcome is then a
failed row, ``timed out after N s``, as in an audit. A process that dies gives a failed row naming
how; an error the job raises (a transient storage error, say) is raised here, for the task's retries.
In a daemonic process (a Dask worker), which may not start children, the job runs in the calling
thread without a timeout, as the engine's ``inline`` mode does.
"""

from __future__ import annotations

import multiprocessing

import pandas as pd

from stormwatch.tasks.audit_job import AuditOptions, JobOutcome, audit_one, failed_outcome
from stormwatch.tasks.engine_pool import PRELOAD, JobTimedOut, WorkerDied, run_alone
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import StorageSettings


def _audit(settings: StorageSettings, job_id: str, options: AuditOptions, earlier: pd.DataFrame | None) -> JobOutcome:
    return audit_one(storage_for(settings), job_id, options=options, earlier=earlier)


def audit_one_alone(settings: StorageSettings, job_id: str, *, options: AuditOptions, earlier: pd.DataFrame | None,
                    timeout_s: float | None) -> JobOutcome:
    """:func:`~stormwatch.tasks.audit_job.audit_one` in a process of its own, killed after ``timeout_s``
    seconds (None: never; then in the calling thread)."""
    if timeout_s is None or multiprocessing.current_process().daemon:
        return _audit(settings, job_id, options, earlier)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    try:
        outcome: JobOutcome = run_alone(context, _audit, settings, job_id, options, earlier, timeout_s=timeout_s)
    except JobTimedOut as exc:
        return failed_outcome(job_id, str(exc))
    except WorkerDied as exc:
        return failed_outcome(job_id, exc)
    return outcome
