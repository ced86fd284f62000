"""What Prefect sees of a run: its final state and its name.

A flow returns a :class:`prefect.states.State` carrying the result dict as its data, so that an
Automation on "flow run failed" fires for a finding, and the command line and tests still read the
dict (:func:`result_of`):

- ``Completed``: nothing at or above ``fail_on`` (exit code 0; an audit whose failed jobs were
  recorded is complete: their failures are in the result, the fleet and the artifacts);
- ``Failed``: a finding at or above ``fail_on`` (exit code 3), the message naming the count and the
  first jobs; for post-job also a job that could not be diagnosed (1) or a refused job id (2);
- ``Cancelled``: another run holds the lease (exit code 1): this run did nothing, by design, and
  nothing is lost (the holder does the work, or the next audit does), so it is not a failure an
  Automation should page for; its message names the holder and until when.

Runs are named ``nightly-audit-<as-of>`` (UTC, to the second) and ``post-job-<job_id>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from prefect.states import Cancelled, Completed, Failed, State

from stormwatch.outputs.verdict import ExitCode

#: Jobs named in a Failed state's message; the rest are counted.
FIRST_JOBS = 5


def first_jobs(job_ids: Sequence[str], *, limit: int = FIRST_JOBS) -> str:
    """``a, b, c`` or ``a, b, c and 7 more``."""
    shown = ", ".join(job_ids[:limit])
    return shown + (f" and {len(job_ids) - limit} more" if len(job_ids) > limit else "")


def audit_state(result: dict[str, Any], *, fail_on: str) -> State[Any]:
    """The nightly audit's final state (see the module docstring), ``result`` as its data."""
    if result.get("lease"):
        return Cancelled(message=f"not audited: {result['lease']}", data=result)
    if int(result["exit_code"]) == ExitCode.FINDINGS:
        found = list(result.get("findings") or ())
        count = f"{len(found)} job{'s' if len(found) != 1 else ''}" if found else "jobs"
        return Failed(message=f"{count} at or above fail_on {fail_on}: {first_jobs(found)}", data=result)
    return Completed(message=f"audited {result['summary']['jobs']} jobs", data=result)


def post_job_state(result: dict[str, Any], *, fail_on: str) -> State[Any]:
    """The post-job run's final state, ``result`` (the job's row and exit code) as its data."""
    row, code = result["job"], int(result["exit_code"])
    job = row["job_id"]
    if result.get("lease"):
        return Cancelled(message=f"job {job} not diagnosed: {result['lease']}", data=result)
    if code == ExitCode.FINDINGS:
        return Failed(message=f"job {job} at or above fail_on {fail_on}: {row.get('verdict')}: "
                              f"{row.get('summary') or ''}".rstrip(": "), data=result)
    if code in (ExitCode.ERROR, ExitCode.USAGE):
        return Failed(message=f"job {job} {row.get('status')}: {row.get('error')}", data=result)
    return Completed(message=f"job {job}: {row.get('verdict')}", data=result)


def result_of(state: State[Any]) -> dict[str, Any]:
    """The result dict a flow run left in its final state; the flow's own error when it crashed."""
    data = state.result(raise_on_failure=False)
    if isinstance(data, BaseException):
        raise data
    if not isinstance(data, dict):
        raise RuntimeError(f"the flow run ended {state.name} without a result: {state.message}")
    return data


def audit_run_name() -> str:
    """``nightly-audit-<as-of>``: the run's ``params.as_of`` (a replayed night), else now, UTC."""
    from prefect.runtime import flow_run

    params = flow_run.parameters.get("params")
    as_of = params.get("as_of") if isinstance(params, dict) else getattr(params, "as_of", None)
    if isinstance(as_of, str):
        as_of = datetime.fromisoformat(as_of)
    at = (as_of or datetime.now(UTC)).astimezone(UTC)
    return f"nightly-audit-{at:%Y-%m-%dT%H:%M:%SZ}"
