"""Every Prefect task caches nothing (NO_CACHE: Prefect would hash every fleet row), and every task the
flows call in their own thread has a timeout; every flow has one too (stormwatch.tasks.timeouts)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from prefect import Task
from prefect.cache_policies import NO_CACHE

import stormwatch.tasks
from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.post_job import post_job
from stormwatch.tasks.timeouts import AUDIT_FLOW_TIMEOUT_S, POST_JOB_FLOW_TIMEOUT_S

#: Tasks submitted to the task runner's worker threads: Prefect 3.9 cannot interrupt a thread and
#: warns on every run of one given a timeout, so each is bounded otherwise.
BOUNDED_OTHERWISE = {
    "diagnose-batch": "each job killed at the job timeout (engine pool)",
    "diagnose-job": "the post-job flow's timeout",
    "notify": "each HTTP/SMTP call's timeout (tasks/notify)",
    "publish-metrics": "the push's HTTP timeout (tasks/metrics.py)",
    "compact-history": "the audit flow's timeout",
}


def all_tasks() -> dict[str, Task]:  # type: ignore[type-arg]
    found = {}
    for module in pkgutil.walk_packages(stormwatch.tasks.__path__, "stormwatch.tasks."):
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, Task):
                found[value.name] = value
    return found


TASKS = all_tasks()


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_caches_nothing_and_has_a_timeout_or_another_bound(name: str) -> None:
    task = TASKS[name]
    assert task.cache_policy is NO_CACHE
    assert task.timeout_seconds or name in BOUNDED_OTHERWISE, f"task {name} has no timeout_seconds"


def test_the_flows_have_timeouts_and_run_names() -> None:
    assert nightly_audit.timeout_seconds == AUDIT_FLOW_TIMEOUT_S
    assert post_job.timeout_seconds == POST_JOB_FLOW_TIMEOUT_S
    assert post_job.flow_run_name == "post-job-{job_id}" and callable(nightly_audit.flow_run_name)
    assert {"publish-fleet", "take-inventory", "read-previous-fleet"} <= set(TASKS)
