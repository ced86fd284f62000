"""``stormwatch post-job JOB_ID --storage URI``: the post-job flow for one job, from a shell.

For launchers that end a job and want its diagnosis and a CI-style exit code back (a Slurm
epilog, a Kubernetes hook): the same flow as the ``post-job/on-demand`` deployment
(:func:`stormwatch.flows.post_job.post_job`), run in this process. Before Prefect is imported, the
flags, the storage (:mod:`stormwatch.flows.preflight`), the job id and ``jobs/JOB_ID/`` are checked
(exit 2 naming the folder and a few job ids that exist). The exit code is the flow's: the
verdict's (3 at or above ``--fail-on``, 0 below), 1 when the job failed (a job running longer than
``--job-timeout`` seconds, default 900 as the audit's, is killed and recorded failed: "timed out
after N s") or another post-job of the same job held its lease for ``--lease-wait`` seconds (nothing
is then read or written: the next audit diagnoses it). Post-jobs of different jobs never wait for
each other, nor for the nightly audit. The engine pool's flags (``--workers``, ``--batch-bytes``)
are not offered: one job is one task, diagnosed in a process of its own (``--engine processes``, the
default) or in the task's thread, where no timeout can kill it (``--engine threads`` or ``inline``).
"""

from __future__ import annotations

import argparse
import math
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from stormwatch.flows import prefect_env
from stormwatch.flows.preflight import (
    PreflightError,
    Purpose,
    check_prefect_api,
    checked_job_id,
    parameters,
    refuse,
    survey,
)
from stormwatch.flows.run_options import hand_secrets_to_environment, run_arguments, storage_arguments, task_runner
from stormwatch.outputs.verdict import ExitCode
from stormwatch.tasks.storage.lease import holder, job_lease
from stormwatch.tasks.storage.open import storage_for

if TYPE_CHECKING:
    from stormwatch.flows.parameters import AuditParameters

DEFAULT_LEASE_WAIT_S = 60.0  # as the flow's own default


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser("post-job", help="diagnose one job right after it ends (Prefect flow); "
                                                  "the exit code is its verdict's")
    parser.add_argument("job_id", metavar="JOB_ID", help="the job's folder name under jobs/")
    storage_arguments(parser)
    run_arguments(parser, batches=False)
    parser.add_argument("--lease-wait", type=float, default=DEFAULT_LEASE_WAIT_S, metavar="SECONDS",
                        help="wait up to SECONDS for another post-job of this job holding its lease (default "
                             f"{DEFAULT_LEASE_WAIT_S:g}); then exit 1, nothing written")
    parser.set_defaults(run=run_post_job)


def lease_wait_s(args: argparse.Namespace) -> float:
    wait = float(args.lease_wait)
    if not math.isfinite(wait) or wait < 0:
        raise PreflightError(f"--lease-wait must be a number of seconds, 0 or more, got {args.lease_wait!r}",
                             exit_code=ExitCode.USAGE)
    return wait


def say_lease_holder(params: AuditParameters, job_id: str, *, wait_s: float) -> None:
    """One line on stderr when another post-job holds this job's lease now (this one then waits for it);
    a storage error here is left to the flow, which reads the lease again."""
    try:
        record = holder(storage_for(params.storage_settings()), name=job_lease(job_id))
    except Exception:  # informational only: the flow reads the lease again and says what it found
        return
    if record is not None and not record.expired(datetime.now(UTC)):
        print(f"waiting up to {wait_s:g} s for job {job_id}'s lease held by {record.describe()}", file=sys.stderr,
              flush=True)


def run_post_job(args: argparse.Namespace) -> int:
    try:
        wait_s = lease_wait_s(args)
        params = parameters(args)
        job_id = checked_job_id(args.job_id)
        survey(params, Purpose.POST_JOB, job_id=job_id)
        check_prefect_api(prefect_env.configured_api_url())
    except PreflightError as exc:
        return refuse(exc, args)
    prefect_env.configure(verbose=args.verbose)
    hand_secrets_to_environment(args)
    say_lease_holder(params, job_id, wait_s=wait_s)
    prefect_env.announce_temporary_server()
    from stormwatch.flows.outcome import result_of
    from stormwatch.flows.post_job import post_job

    flow = post_job.with_options(task_runner=task_runner(params, args.dask_address))
    result = result_of(flow(job_id, params, lease_wait_s=wait_s, return_state=True))
    print_post_job(result, params)
    return int(result["exit_code"])


def print_post_job(result: dict[str, Any], params: AuditParameters) -> None:
    """The job, its verdict and summary (or why it was not diagnosed), its report and the notifications."""
    from stormwatch.flows.audit import audit_options  # Prefect is imported by now

    row = result["job"]
    job_id, code = row["job_id"], result["exit_code"]
    if result.get("lease"):
        print(f"error: job {job_id} not diagnosed: {result['lease']}", file=sys.stderr)
        return
    if row.get("error") and not row.get("verdict"):
        print(f"{job_id}: {row['status']}: {row['error']} (exit {code})")
        return
    print(f"{job_id}: {row.get('summary') or row['verdict']}")
    print(f"  exit code: {code} (--fail-on {params.fail_on.value})")
    if row.get("report"):
        storage = storage_for(params.storage_settings())
        print(f"  report: {audit_options(params).report_link(storage, str(row['report']))}")
    if row.get("committed_at"):
        print("  fleet: committed; fleet.json and the index show it after the next audit or `stormwatch compact`")
    notifications = result.get("notifications") or {}
    if notifications.get("channels") or "error" in notifications:
        print_notifications(notifications)
    else:
        print("notifications: none sent (no channel configured)")


def print_notifications(sent: dict[str, Any]) -> None:
    """The notify step's outcome (channels, counts, problems), as post-job and the audit print it."""
    if sent.get("channels"):
        print(f"notifications: {sent['sent']} sent, {sent['failed']} failed on {', '.join(sent['channels'])}")
    elif "error" in sent:
        print(f"notifications: not processed ({sent['error']})")
    for problem in sent.get("problems", [])[:10]:
        print(f"  notifications: {problem}")
