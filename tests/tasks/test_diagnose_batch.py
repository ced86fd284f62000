"""A batch of jobs diagnosed on real worker processes: outcomes in order, a failing job alone."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.outputs.fleet import JobStatus
from stormwatch.tasks.audit_job import AuditOptions, JobWork
from stormwatch.tasks.batches import Batch
from stormwatch.tasks.diagnose import diagnose_batch, died_outcome
from stormwatch.tasks.engine_pool import EngineMode, EngineSettings, WorkerDied, close_shared_pools
from stormwatch.tasks.storage.inventory import JobInputs
from tests import builders as b
from tests.tasks.storage.backends import local_backend


@pytest.mark.parametrize("mode", [EngineMode.PROCESSES, EngineMode.THREADS])
def test_a_batch_gives_an_outcome_per_job_and_a_failing_job_fails_alone(tmp_path: Path, mode: EngineMode) -> None:
    backend = local_backend(tmp_path / "fleet")
    for job, world in (("big-job", 2), ("critical-job", 2), ("small-job", 1)):
        b.write_multi_rank_job(tmp_path / job, world_size=world, samples=200 if job == "big-job" else 12,
                               alerts=b.DEFAULT_ALERTS if job == "critical-job" else ())
        backend.upload(tmp_path / job, f"jobs/{job}")
    inventory = backend.storage.take_inventory()
    cap = max(job.size_bytes for job in inventory.jobs if job.job_id != "big-job")
    batch = Batch(1, inventory.jobs)
    options = AuditOptions(diagnose=DiagnoseOptions(), max_bytes=cap)
    try:
        outcomes = diagnose_batch.fn(backend.settings, batch, options, EngineSettings(mode=mode, workers=2))
    finally:
        close_shared_pools()
    assert [outcome.row.job_id for outcome in outcomes] == ["big-job", "critical-job", "small-job"]
    big, critical, small = (outcome.row for outcome in outcomes)
    assert big.status is JobStatus.FAILED and big.error is not None and big.error.startswith("JobTooLargeError:")
    assert (critical.status, str(critical.verdict)) == (JobStatus.DIAGNOSED, "critical")
    assert small.status is JobStatus.DIAGNOSED
    assert outcomes[1].finding is not None and outcomes[1].finding.verdict == "critical"
    stored = orjson.loads(backend.get("reports/critical-job/model.json") or b"{}")
    assert stored["input_fingerprint"] == inventory.jobs[1].fingerprint  # the listed inputs, read once
    assert backend.get("reports/big-job/model.json") is None


def test_a_job_whose_worker_died_twice_is_a_failed_row_saying_so() -> None:
    died = WorkerDied("the worker process diagnosing this job was killed by SIGKILL")
    outcome = died_outcome(JobWork(JobInputs("job-9", ())), died)
    assert outcome.row.status is JobStatus.FAILED and outcome.finding is None
    assert outcome.row.error == "WorkerDied: the worker process diagnosing this job was killed by SIGKILL"
