"""``stormwatch audit``, ``serve`` and ``post-job``: the Prefect flows' front door.

Each checks its flags and its storage before Prefect is imported (:mod:`stormwatch.flows.preflight`:
a refusal is one line, in seconds), then puts Prefect's settings in place
(:mod:`stormwatch.flows.prefect_env`) and says so when a temporary Prefect server must start.
``audit`` runs the nightly-audit flow once and exits 3 when any job has a finding at or above
``--fail-on``, 1 when another audit holds the storage's lease (``--break-lease`` first ends a lease
whose holder is gone); ``serve`` (:mod:`stormwatch.flows.serve_cmd`) serves the nightly-audit deployment on
a cron schedule and post-job on demand; ``post-job`` (:mod:`stormwatch.flows.post_job_cmd`) runs
the post-job flow for one job and exits with its verdict's code.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stormwatch.flows import post_job_cmd, prefect_env, serve_cmd
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.post_job_cmd import print_notifications
from stormwatch.flows.preflight import PreflightError, Purpose, check_prefect_api, parameters, refuse, survey
from stormwatch.flows.run_options import (
    audit_parameters,
    hand_secrets_to_environment,
    resolve_storage,
    run_arguments,
    storage_arguments,
    task_runner,
)
from stormwatch.outputs.fleet import JobStatus
from stormwatch.outputs.verdict import ExitCode, VerdictStatus
from stormwatch.tasks import engine_pool

# audit_parameters, resolve_storage and task_runner lived here before run_options: still importable from here.
__all__ = ["add_parsers", "audit_parameters", "print_audit", "resolve_storage", "run_audit",
           "task_runner"]


def add_parsers(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    audit = commands.add_parser("audit", help="diagnose every changed job under a storage root (Prefect flow)")
    storage_arguments(audit)
    run_arguments(audit, batches=True)
    audit.add_argument("--break-lease", action="store_true",
                       help="first end the storage's audit lease if its holder is gone (expired, not running on "
                            "this host, or not renewed while watched for up to a minute); a live one is left "
                            "alone and the command exits 1")
    audit.set_defaults(run=run_audit)
    serve_cmd.add_parser(commands)
    post_job_cmd.add_parser(commands)


def print_audit(result: dict[str, Any]) -> None:
    if result.get("lease"):
        print(f"error: not audited: {result['lease']}", file=sys.stderr)
        return
    summary = result["summary"]
    print(f"audited {summary['jobs']} jobs: {summary[JobStatus.DIAGNOSED]} diagnosed, "
          f"{summary[JobStatus.SKIPPED]} unchanged, {summary[JobStatus.FAILED]} failed, "
          f"{summary[JobStatus.REFUSED]} refused")
    worst_first = sorted(VerdictStatus, key=lambda status: status.rank, reverse=True)
    print("verdicts: " + ", ".join(f"{summary[status.value]} {status.value}" for status in worst_first))
    for name in (VerdictStatus.CRITICAL.value, JobStatus.FAILED.value, JobStatus.REFUSED.value):
        if result[name]:
            print(f"  {name}: {', '.join(result[name][:20])}" + (" ..." if len(result[name]) > 20 else ""))
    for line in result.get("repaired", [])[:20]:
        print(f"  repaired: {line}")
    print_notifications(result.get("notifications", {}))
    print_metrics(result.get("metrics") or {})
    if result.get("index"):
        print(f"  index: {result['index']}")


def print_metrics(metrics: dict[str, Any]) -> None:
    """reports/metrics.prom, and the push when ``--pushgateway`` (``stormwatch.tasks.metrics``'s result)."""
    if not metrics:
        return
    line = f"  metrics: {metrics['file']}" if metrics.get("file") else f"  metrics: not written ({metrics['error']})"
    gateway = metrics.get("pushgateway")
    if gateway:
        line += ("; pushed to the pushgateway" if gateway["pushed"] else
                 f"; pushgateway not reached ({gateway['error']}): pushed again at the next audit")
        if gateway.get("recorded"):
            line += f" (recorded {gateway['recorded']} in notifications.jsonl)"
    print(line)


def break_held_lease(params: AuditParameters) -> bool:
    """``--break-lease``: one line on what was done; False when a live audit holds the lease."""
    from stormwatch.tasks.storage.lease_break import BreakOutcome, break_lease
    from stormwatch.tasks.storage.open import storage_for

    result = break_lease(storage_for(params.storage_settings()))
    alive = result.outcome is BreakOutcome.ALIVE
    print(("error: " if alive else "") + result.message, file=sys.stderr if alive else sys.stdout)
    return not alive


def run_audit(args: argparse.Namespace) -> int:
    try:
        params = parameters(args)
        found = survey(params, Purpose.AUDIT)
        if found.job_count:
            check_prefect_api(prefect_env.configured_api_url())
    except PreflightError as exc:
        return refuse(exc, args)
    if not found.job_count:
        print(f"no jobs yet under {found.jobs}")
        return ExitCode.CLEAN
    if args.break_lease and not break_held_lease(params):
        return ExitCode.ERROR
    prefect_env.configure(verbose=args.verbose)
    hand_secrets_to_environment(args)
    engine_pool.prestart(params.engine_settings())  # the engine's imports overlap Prefect's, below
    prefect_env.announce_temporary_server()
    from stormwatch.flows.audit import nightly_audit
    from stormwatch.flows.outcome import result_of

    flow = nightly_audit.with_options(task_runner=task_runner(params, args.dask_address))
    result = result_of(flow(params, progress=True, return_state=True))  # Failed/Cancelled still carry it
    print_audit(result)
    return int(result["exit_code"])
