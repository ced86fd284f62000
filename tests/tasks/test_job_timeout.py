"""``--job-timeout``: a job whose read never returns is killed, recorded failed ("timed out after N s"),
and the other jobs of the audit are diagnosed. The read that hangs is a FIFO nobody writes to."""

from __future__ import annotations

import os
from pathlib import Path

from stormwatch.outputs.fleet import JobStatus
from stormwatch.tasks.audit_job import AuditOptions
from stormwatch.tasks.batches import Batch
from stormwatch.tasks.diagnose import diagnose_batch
from stormwatch.tasks.engine_pool import EngineMode, EngineSettings, close_shared_pools
from tests import builders as b
from tests.tasks.storage.backends import local_backend


def test_a_job_reading_a_fifo_is_killed_at_the_job_timeout_and_the_others_are_diagnosed(tmp_path: Path) -> None:
    backend = local_backend(tmp_path / "fleet")
    jobs = tmp_path / "fleet" / "jobs"
    for job in ("hangs-job", "ok-job", "also-ok-job"):
        b.write_multi_rank_job(jobs / job, world_size=2, samples=12)
    os.mkfifo(jobs / "ok-job" / "rank_0" / "extra.jsonl")  # a FIFO there from the start: never listed
    inventory = backend.storage.take_inventory()
    listed = {job.job_id: [entry.key for entry in job.entries] for job in inventory.jobs}
    assert not any(key.endswith("extra.jsonl") for key in listed["ok-job"])
    # the file listed becomes a FIFO before it is read (as a mount that stalls after the listing)
    stalled = jobs / "hangs-job" / listed["hangs-job"][0]
    stalled.unlink()
    os.mkfifo(stalled)
    engine = EngineSettings(mode=EngineMode.PROCESSES, workers=2, job_timeout_s=3)
    try:
        outcomes = diagnose_batch.fn(backend.settings, Batch(1, inventory.jobs), AuditOptions(), engine)
    finally:
        close_shared_pools()
    rows = {outcome.row.job_id: outcome.row for outcome in outcomes}
    assert (rows["hangs-job"].status, rows["hangs-job"].error) == (JobStatus.FAILED, "timed out after 3 s")
    assert rows["ok-job"].status is JobStatus.DIAGNOSED and rows["also-ok-job"].status is JobStatus.DIAGNOSED
    assert backend.get("reports/ok-job/model.json") and backend.get("reports/hangs-job/model.json") is None
