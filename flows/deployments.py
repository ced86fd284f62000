"""The deployments as code: nightly-audit on a cron schedule, post-job on demand.

``stormwatch serve`` serves both from this process (:mod:`stormwatch.flows.serve_cmd`; needs a
Prefect API server: ``prefect server start`` locally, or Prefect Cloud); ``infra/prefect.yaml``
declares the same two for a work pool. Both take the same
:class:`~stormwatch.flows.parameters.AuditParameters` (parameter ``params``; post-job
also ``job_id`` at run time). Parameters carry no secrets: storage credentials come
from the standard AWS chain, notification secrets from the environment or Prefect
Secret blocks named in the parameters.
"""

from __future__ import annotations

from typing import Any

from prefect.schedules import Cron

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.post_job import post_job

NIGHTLY_NAME = "nightly"
POST_JOB_NAME = "on-demand"


def build_deployments(params: AuditParameters, *, cron: str, timezone: str) -> list[Any]:
    """The nightly deployment (on ``cron``, in ``timezone``) and the on-demand one, both with ``params``."""
    common = {"params": params.as_deployment()}
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
