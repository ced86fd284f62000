"""The deployments as code: nightly-audit on a cron schedule, post-job on demand.

``stormwatch serve`` serves both from this process (needs a Prefect API server:
``prefect server start`` locally, or Prefect Cloud); ``infra/prefect.yaml``
declares the same two for a work pool. Parameters carry no secrets: storage
credentials come from the standard AWS chain, notification secrets from the
environment or Prefect Secret blocks named in the parameters.
"""

from __future__ import annotations

from typing import Any

from prefect import serve
from prefect.schedules import Cron

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.post_job import post_job

NIGHTLY_NAME = "nightly"
POST_JOB_NAME = "on-demand"


def build_deployments(
    *, storage: str, endpoint_url: str | None, cron: str, timezone: str, fail_on: str, preset: str,
    **notify: Any,
) -> list[Any]:
    """``notify``: non-secret notification parameters (notify_on, email_to, block names, report_base_url)."""
    common = {"storage": storage, "endpoint_url": endpoint_url, "fail_on": fail_on, "preset": preset, **notify}
    nightly = nightly_audit.to_deployment(
        name=NIGHTLY_NAME,
        schedule=Cron(cron, timezone=timezone),
        parameters=common,
        description="Diagnose every changed job under the storage root and publish the fleet index.",
        tags=["stormwatch"],
    )
    on_demand = post_job.to_deployment(
        name=POST_JOB_NAME,
        parameters=common,
        description="Diagnose one job (parameter job_id) right after it ends.",
        tags=["stormwatch"],
    )
    return [nightly, on_demand]


def serve_deployments(
    *, storage: str, endpoint_url: str | None, cron: str, timezone: str, fail_on: str, preset: str, **notify: Any
) -> None:
    """Blocks, serving both deployments until interrupted."""
    serve(*build_deployments(storage=storage, endpoint_url=endpoint_url, cron=cron, timezone=timezone,
                             fail_on=fail_on, preset=preset, **notify))
