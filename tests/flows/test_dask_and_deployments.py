"""The audit on a Dask cluster (prefect-dask), and the deployments as code."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.audit_cmd import task_runner
from stormwatch.flows.deployments import NIGHTLY_NAME, POST_JOB_NAME, build_deployments
from stormwatch.flows.parameters import AuditParameters
from tests import builders as b

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.usefixtures("prefect_api")
def test_audit_runs_on_an_existing_dask_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    root = tmp_path / "fleet"
    for job in ("job-a", "job-b"):
        b.write_multi_rank_job(root / "jobs" / job, world_size=2, alerts=b.DEFAULT_ALERTS if job == "job-a" else ())
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        flow = nightly_audit.with_options(task_runner=task_runner(2, cluster.scheduler_address))
        result = flow(AuditParameters(storage=str(root)))
        workers = client.run(lambda: __import__("os").getpid())
    assert result["summary"]["diagnosed"] == 2 and result["critical"] == ["job-a"]
    assert workers  # the cluster really had a worker process
    fleet = orjson.loads((root / "reports" / "fleet.json").read_bytes())
    assert {job["job_id"]: job["verdict"] for job in fleet["jobs"]} == {"job-a": "critical", "job-b": "clean"}


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
