"""The audit on a Dask cluster (prefect-dask), and the deployments as code."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import yaml

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.audit_cmd import task_runner
from stormwatch.flows.deployments import NIGHTLY_NAME, POST_JOB_NAME, build_deployments
from stormwatch.flows.parameters import AuditParameters
from tests import builders as b
from tests.tasks.storage.backends import Backend

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.usefixtures("prefect_api")
@pytest.mark.parametrize("via", ["flag", "parameter"])
def test_audit_runs_on_a_dask_cluster_of_two_worker_processes(backend: Backend, tmp_path: Path, via: str) -> None:
    """Batches of one job each (``batch_bytes`` at its 1 MiB floor, jobs over it) spread over a
    LocalCluster of two worker processes; local folder and S3 (moto server) alike. ``flag``: the
    flow given a Dask task runner, as ``--dask-address`` does; ``parameter``: the flow as a
    deployment runs it (its own thread runner), told ``dask_address`` in its parameters."""
    distributed = pytest.importorskip("distributed")
    jobs = {"job-a": b.DEFAULT_ALERTS, "job-b": (), "job-c": (), "job-d": b.DEFAULT_ALERTS}
    for job, alerts in jobs.items():
        b.write_multi_rank_job(tmp_path / job, world_size=2, samples=3000, alerts=alerts)
        backend.upload(tmp_path / job, f"jobs/{job}")
    params = AuditParameters(storage=backend.settings.uri, endpoint_url=backend.settings.endpoint_url,
                             engine="inline", workers=2, batch_bytes=1 << 20)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client, distributed.get_task_stream(client) as stream:
        if via == "flag":
            result = nightly_audit.with_options(task_runner=task_runner(params, cluster.scheduler_address))(params)
        else:
            result = nightly_audit(params.model_copy(update={"dask_address": cluster.scheduler_address}))
        worker_pids = set(client.run(os.getpid).values())
    assert result["summary"]["diagnosed"] == 4 and result["critical"] == ["job-a", "job-d"]
    assert os.getpid() not in worker_pids and len(worker_pids) == 2
    batch_workers = {item["worker"] for item in stream.data if str(item["key"]).startswith("diagnose_batch-")}
    assert len(batch_workers) == 2  # both worker processes diagnosed jobs
    fleet = orjson.loads(backend.get("reports/fleet.json") or b"{}")
    assert {job["job_id"]: job["verdict"] for job in fleet["jobs"]} == {
        "job-a": "critical", "job-b": "clean", "job-c": "clean", "job-d": "critical"}


def test_deployments_nightly_on_cron_and_post_job_on_demand() -> None:
    params = AuditParameters(storage="s3://fleet/prod", endpoint_url=None, fail_on="critical", preset="medium")
    nightly, on_demand = build_deployments(params, cron="0 2 * * *", timezone="UTC")
    assert (nightly.name, on_demand.name) == (NIGHTLY_NAME, POST_JOB_NAME)
    (schedule,) = nightly.schedules
    assert schedule.schedule.cron == "0 2 * * *" and schedule.schedule.timezone == "UTC"
    assert not on_demand.schedules
    assert nightly.parameters["params"]["storage"] == "s3://fleet/prod"
    assert on_demand.parameters["params"]["fail_on"] == "critical"


def test_prefect_yaml_declares_the_same_deployments() -> None:
    config = yaml.safe_load((REPO / "infra" / "prefect.yaml").read_text())
    by_name = {item["name"]: item for item in config["deployments"]}
    assert set(by_name) == {NIGHTLY_NAME, POST_JOB_NAME}
    for item in by_name.values():
        module, function = item["entrypoint"].split(":")
        assert (REPO / module).is_file() and f"def {function}(" in (REPO / module).read_text()
        assert item["work_pool"]["name"]
        AuditParameters.model_validate(item["parameters"]["params"])  # the flows' typed parameters, valid
    assert by_name[NIGHTLY_NAME]["schedules"][0]["cron"] == "0 2 * * *"
