"""The flows run in-process as the command line runs them: their final state's result dict, whatever
the state (a Failed or Cancelled run still carries it: :mod:`stormwatch.flows.outcome`)."""

from __future__ import annotations

from typing import Any

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.outcome import result_of
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.post_job import post_job


def run_audit(params: AuditParameters, progress: bool = False) -> dict[str, Any]:
    return result_of(nightly_audit(params, progress=progress, return_state=True))


def run_post_job(job_id: str, params: AuditParameters, lease_wait_s: float = 60.0) -> dict[str, Any]:
    return result_of(post_job(job_id, params, lease_wait_s=lease_wait_s, return_state=True))
