"""``stormwatch serve``: the nightly-audit deployment on a cron schedule and post-job on demand,
served from this process until it is stopped.

It takes every option ``audit`` takes and gives them to both deployments' parameters, except
``--as-of``, refused: a schedule acts at its own times, and a fixed ``as_of`` would replay the same
night every night. Checked before Prefect is imported (:mod:`stormwatch.flows.preflight`), with
the timezone and the cron expression's shape (Prefect checks it fully once imported). It needs a
Prefect server that outlives it: without ``PREFECT_API_URL`` it refuses (exit 2) and says how to
start one, unless ``--temporary-server``: then one starts here, stops with this command and,
as every temporary Prefect server, runs no scheduler (on-demand runs only, at the URL printed).

The deployments are :func:`stormwatch.flows.deployments.build_deployments`'s (names, schedule,
parameters, descriptions). They are served by a Prefect ``Runner`` given the flows *with this
command's task runner* (``with_options(task_runner=...)``: ``--dask-address``, or threads sized by
``--workers``), so each run executes those flow objects in a subprocess; ``prefect.serve`` would
import the module's flow again by its entrypoint and drop the task runner.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys
import types
import typing
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from stormwatch.flows import prefect_env
from stormwatch.flows.preflight import PreflightError, Purpose, check_prefect_api, parameters, refuse, survey
from stormwatch.flows.run_options import hand_secrets_to_environment, run_arguments, storage_arguments, task_runner
from stormwatch.outputs.verdict import ExitCode
from stormwatch.tasks.storage.probe import without_userinfo

if TYPE_CHECKING:
    from stormwatch.flows.parameters import AuditParameters

DEFAULT_CRON = "0 2 * * *"
RUNNER_NAME = "stormwatch"
_CRON_MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-?#]+$")


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    serve = commands.add_parser("serve", help="serve the nightly-audit (cron) and post-job deployments")
    storage_arguments(serve)
    run_arguments(serve, batches=True, as_of_help="refused: a schedule acts at its own times (replay a past night "
                                                  "with `stormwatch audit --as-of`)")
    serve.add_argument("--cron", default=DEFAULT_CRON, help=f"nightly schedule (default {DEFAULT_CRON!r})")
    serve.add_argument("--timezone", default="UTC", help="timezone of the cron schedule (default UTC)")
    serve.add_argument("--temporary-server", action="store_true",
                       help="without PREFECT_API_URL, serve on a temporary Prefect server that stops with this "
                            "command and schedules nothing (on-demand runs only)")
    serve.set_defaults(run=run_serve)


def check_schedule(args: argparse.Namespace) -> None:
    """``--as-of`` refused, the timezone known, the cron expression shaped like one; raises PreflightError."""
    if args.as_of is not None:
        raise PreflightError("--as-of does not apply to serve: a schedule acts at its own times and a fixed time "
                             "would replay the same night every night; replay one with `stormwatch audit --as-of`",
                             exit_code=ExitCode.USAGE)
    try:
        ZoneInfo(args.timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise PreflightError(f"unknown --timezone {args.timezone!r} (an IANA name: UTC, Europe/Paris)",
                             exit_code=ExitCode.USAGE) from exc
    fields = args.cron.split()
    if not (fields and (fields[0] in _CRON_MACROS and len(fields) == 1
                        or 5 <= len(fields) <= 6 and all(_CRON_FIELD.match(field) for field in fields))):
        raise PreflightError(f"--cron {args.cron!r} is not a cron expression (minute hour day month weekday: "
                             f"{DEFAULT_CRON!r})", exit_code=ExitCode.USAGE)


def run_serve(args: argparse.Namespace) -> int:
    api_url = prefect_env.configured_api_url()
    try:
        check_schedule(args)
        params = parameters(args)
        if api_url is None and not args.temporary_server:
            raise PreflightError(f"serve needs a Prefect server that outlives it: {prefect_env.START_A_SERVER} "
                                 "(or pass --temporary-server: it stops with this command and schedules nothing)",
                                 exit_code=ExitCode.USAGE)
        found = survey(params, Purpose.SERVE)
        check_prefect_api(api_url)
    except PreflightError as exc:
        return refuse(exc, args)
    if found.is_empty:
        print(f"note: {found.root} is empty; the nightly audit finds jobs once they land in {found.jobs}<job_id>/",
              file=sys.stderr)
    prefect_env.configure(verbose=args.verbose)
    hand_secrets_to_environment(args)
    flows = served_flows(params, cron=args.cron, timezone=args.timezone, dask_address=args.dask_address)
    if api_url is not None:
        serve_flows(flows, api_url=api_url)
        return ExitCode.CLEAN
    prefect_env.announce_temporary_server()
    with temporary_server() as url:
        print(f"serving on a temporary Prefect server at {url}: it stops with this command and runs no scheduler "
              f"(no nightly runs); for a lasting one: {prefect_env.START_A_SERVER}", file=sys.stderr)
        serve_flows(flows, api_url=url)
    return ExitCode.CLEAN


def served_flows(params: AuditParameters, *, cron: str, timezone: str,
                 dask_address: str | None) -> list[tuple[Any, Any]]:
    """``(flow, deployment)`` pairs: each deployment of :func:`build_deployments` with its flow given the task
    runner (``dask_address``: a DaskTaskRunner on that cluster; else threads, as ``audit`` uses)."""
    from stormwatch.flows.audit import nightly_audit
    from stormwatch.flows.deployments import build_deployments
    from stormwatch.flows.post_job import post_job

    runner = task_runner(params, dask_address)
    flows = {flow.name: self_contained(flow.with_options(task_runner=runner)) for flow in (nightly_audit, post_job)}
    return [(flows[deployment.flow_name], deployment)
            for deployment in build_deployments(params, cron=cron, timezone=timezone)]


def self_contained(flow: Any) -> Any:
    """``flow`` with a copy of its function whose annotations are the types, not their names.

    A served flow object is cloudpickled into each run's subprocess, its function by value (the
    module's name for it is the flow, not the function) with only the globals its code uses; the
    annotations ``from __future__ import annotations`` leaves as strings (``"AuditParameters"``)
    then name types the copy cannot find, and Prefect's parameter validation fails."""
    fn = flow.fn
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    copy.__kwdefaults__ = fn.__kwdefaults__  # no __wrapped__: inspect.signature would follow it to the strings
    copy.__annotations__ = typing.get_type_hints(fn)
    flow.fn = copy
    return flow


def serve_flows(flows: list[tuple[Any, Any]], *, api_url: str) -> None:
    """Blocks, serving each deployment with its flow object until interrupted (Ctrl+C, SIGTERM)."""
    from prefect.exceptions import TerminationSignal
    from prefect.runner import Runner

    runner = Runner(name=RUNNER_NAME, pause_on_shutdown=True)
    for flow, deployment in flows:
        runner.add_flow(flow, name=deployment.name, schedules=deployment.schedules, parameters=deployment.parameters,
                        description=deployment.description, tags=deployment.tags)
    names = ", ".join(f"{deployment.flow_name}/{deployment.name}" for _, deployment in flows)
    print(f"serving {names} on {without_userinfo(api_url)} (Ctrl+C stops); on demand: "
          "prefect deployment run 'post-job/on-demand' -p job_id=JOB_ID", flush=True)
    # Returns on SIGTERM (the runner's own handler stops it gracefully); Ctrl+C: stopping is no error.
    with contextlib.suppress(KeyboardInterrupt, TerminationSignal):
        asyncio.run(runner.start())
    print("stopped serving", file=sys.stderr)


@contextlib.contextmanager
def temporary_server() -> Iterator[str]:
    """A Prefect API server in a subprocess for the block (its URL), stopped at the end."""
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, temporary_settings

    server = SubprocessASGIServer()
    server.start(timeout=int(float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"))))
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        server.stop()
