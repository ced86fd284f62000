"""``post-job``: diagnose one job right after it ends, commit it, notify, return its exit code.

The same steps as the nightly audit for a single job id: a refused id is
reported and nothing is read or written; otherwise the job is diagnosed (in a process of its own,
killed after ``--job-timeout`` seconds and then recorded failed, "timed out after N s":
:mod:`stormwatch.tasks.job_alone`), every
session of it (unless unchanged and not forced), and compared with the earlier runs of its job name,
model.json is stored, the job is committed with its history rows (one commit object), and its
notifications are decided. Nothing fleet-wide is rewritten, so a post-job costs one job whatever
the fleet's size: fleet.json, fleet.parquet and the index show it once the next audit or
``stormwatch compact`` folds its commit in (:mod:`stormwatch.tasks.compact`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import State

from stormwatch.flows.audit import audit_options, notify_outcomes, notify_settings
from stormwatch.flows.history_step import by_job_name, read_earlier
from stormwatch.flows.outcome import post_job_state
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.run_artifacts import post_job_table
from stormwatch.flows.run_logs import attach_project_loggers
from stormwatch.history.schema import audit_id
from stormwatch.outputs.fleet import JobStatus, failed_row
from stormwatch.outputs.verdict import ExitCode
from stormwatch.tasks.audit_job import AuditOptions, JobOutcome, failed_outcome
from stormwatch.tasks.commit_outcomes import commit_task
from stormwatch.tasks.engine_pool import EngineMode
from stormwatch.tasks.job_alone import audit_one_alone
from stormwatch.tasks.retry import DIAGNOSE_JOB_RETRY, is_transient
from stormwatch.tasks.storage.job_ids import InvalidJobIdError
from stormwatch.tasks.storage.lease import acquire_waiting, default_owner, holder, job_lease
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import StorageSettings, check_job_id
from stormwatch.tasks.timeouts import POST_JOB_FLOW_TIMEOUT_S


@task(name="diagnose-job", task_run_name="diagnose-{job_id}", cache_policy=NO_CACHE,
      **DIAGNOSE_JOB_RETRY.task_options(retry_if=is_transient))
def diagnose_job_alone(settings: StorageSettings, job_id: str, options: AuditOptions, earlier: pd.DataFrame | None,
                       timeout_s: float | None) -> JobOutcome:
    """One job, skipped when its model.json says it is unchanged; in a process of its own, killed after
    ``timeout_s`` seconds (a failed row, "timed out after N s": never retried); retried when transient."""
    return audit_one_alone(settings, job_id, options=options, earlier=earlier, timeout_s=timeout_s)


def diagnose_one(settings: StorageSettings, job_id: str, options: AuditOptions, params: AuditParameters) -> JobOutcome:
    """The job's outcome, compared with the earlier runs of its job name (read from the history),
    committed with its history rows (:mod:`stormwatch.tasks.commits`); a task run that failed past its
    retries gives a failed row with its error, a job running past ``params.job_timeout_s`` one saying so."""
    audit_time = options.acting_at()
    name = options.job_names.name_of(job_id)
    earlier = by_job_name(read_earlier(settings, params, audit_time=audit_time, names={name}).rows, {name}).get(name)
    own_process = params.engine is EngineMode.PROCESSES  # threads, inline: the task's thread, never killed
    future = diagnose_job_alone.submit(settings, job_id, options, earlier,
                                       params.job_timeout_s if own_process else None)
    try:
        result: Any = future.result(raise_on_failure=False)
    except Exception as exc:  # a crashed run raises even without raise_on_failure
        result = exc
    if isinstance(result, JobOutcome):  # diagnosed now: committed (a skipped job has nothing to commit)
        audit = audit_id(audit_time, [(job_id, result.row.input_fingerprint)])
        (committed,) = commit_task(settings, [result], audit, audit_time)
        return committed
    return failed_outcome(job_id, result if isinstance(result, BaseException) else repr(result))


@flow(name="post-job", flow_run_name="post-job-{job_id}", log_prints=False, timeout_seconds=POST_JOB_FLOW_TIMEOUT_S)
def post_job(job_id: str, params: AuditParameters, lease_wait_s: float = 60.0) -> State[Any]:
    """Diagnose ``jobs/<job_id>/`` under ``params.storage``; its final state carries the job's fleet row
    and exit code (Completed, Failed at or above ``fail_on`` or when the job failed, Cancelled when its
    lease is held: :mod:`stormwatch.flows.outcome`), and it leaves a table artifact of its job.

    Runs under its job's lease (never the audit lease: post-jobs of different jobs run side by side),
    waiting up to ``lease_wait_s`` seconds for it; when another post-job of the same job still holds
    it then, nothing is read or written and the exit code is 1.
    ``params.digest`` does not apply (one job, one message per channel)."""
    attach_project_loggers()
    logger = get_run_logger()
    fail_on = params.fail_on.value
    try:
        check_job_id(job_id)
    except InvalidJobIdError as exc:
        logger.warning("refused job id: %s", exc)
        row = failed_row(job_id, status=JobStatus.REFUSED, error=str(exc))
        post_job_table(row.as_json(), report=None)
        return post_job_state({"job": row.as_json(), "exit_code": int(ExitCode.USAGE)}, fail_on=fail_on)
    settings = params.storage_settings()
    options = audit_options(params)
    notify = notify_settings(params, digest=False)
    lease = acquire_waiting(storage_for(settings), name=job_lease(job_id), owner=default_owner(f"post-job {job_id}"),
                            wait_s=lease_wait_s)
    if lease is None:
        busy = holder(storage_for(settings), name=job_lease(job_id))
        message = (f"not diagnosed after waiting {lease_wait_s:g} s: another post-job of this job holds its lease "
                   f"{busy.describe() if busy else '(released just now)'}; the next audit diagnoses it")
        logger.warning("%s: %s", job_id, message)
        row = failed_row(job_id, status=JobStatus.FAILED, error=message)
        post_job_table(row.as_json(), report=None)
        return post_job_state({"job": row.as_json(), "exit_code": int(ExitCode.ERROR), "lease": message},
                              fail_on=fail_on)
    try:
        with lease.kept_alive():
            outcome = diagnose_one(settings, job_id, options, params)
            row = outcome.row
            lease.renew()  # still ours before notifying: a lost lease must never send twice
            notifications = notify_outcomes(settings, [outcome], notify, now=options.acting_at(), overview=False,
                                            whole=False)
            notifications.pop("overview", None)
            notifications.pop("observed", None)
    finally:
        lease.release()
    exit_code = int(ExitCode.ERROR if row.status is JobStatus.FAILED else (row.exit_code or ExitCode.CLEAN))
    logger.info("%s: %s", job_id, row.summary or row.error)
    report = options.report_link(storage_for(settings), row.report) if row.report else None
    post_job_table(row.as_json(), report=report)
    return post_job_state({"job": row.as_json(), "exit_code": exit_code, "notifications": notifications},
                          fail_on=fail_on)
