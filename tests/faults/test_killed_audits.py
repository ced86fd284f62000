"""Audits killed (SIGKILL to the process group) at exact storage steps, then rerun at once: every job's
history rows are there exactly once, every finding is sent once, no commit or temporary file is left,
and the rerun never waits for the dead audit's lease (same host, dead pid)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pandas as pd
import pytest

from tests.faults.conftest import FLEET_JOBS, upload_fleet
from tests.faults.killpoints import KillPoint, When
from tests.tasks.notify.servers import WebhookServer, webhook_server
from tests.tasks.storage.backends import Backend, local_backend

pytestmark = pytest.mark.usefixtures("prefect_api")
REPO = Path(__file__).resolve().parents[2]

POINTS = [
    KillPoint(When.AFTER, "*/model.json", 2),  # two jobs' model.json written, nothing committed
    KillPoint(When.BEFORE, ".commits/*", 1),  # reports written, nothing committed
    KillPoint(When.AFTER, ".commits/*", 1),  # committed, history not yet copied
    KillPoint(When.AFTER, "notifications.jsonl", 1),  # sent and recorded, alert state not settled
    KillPoint(When.AFTER, "_fleet/runs/*", 1),  # sent and settled, the night's runs file written, no fleet.json
    KillPoint(When.BEFORE, "fleet.json", 1),  # the runs file written, fleet.json not published
    KillPoint(When.AFTER, "fleet.json", 1),  # published, commits not cleared
]


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    with webhook_server() as server:
        yield server


def audit(root: Path, webhook: WebhookServer, *, kill: KillPoint | None = None) -> subprocess.CompletedProcess[str]:
    args = ["audit", "--storage", str(root), "--engine", "threads", "--workers", "1",
            "--slack-webhook", webhook.url]
    command = [sys.executable, "-m", "tests.faults.killpoints", kill.text(), "--", *args] if kill else [
        sys.executable, "-m", "stormwatch.flows.cli", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                          start_new_session=True, check=False)


def history_rows(backend: Backend) -> pd.DataFrame:
    frames = [pd.read_parquet(io.BytesIO(backend.get(key) or b""))
              for key in sorted(backend.stored_keys()) if key.startswith("reports/history/")]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["job_id", "rank"])


@pytest.mark.parametrize("point", POINTS, ids=[point.text() for point in POINTS])
def test_a_killed_audit_rerun_at_once_loses_nothing_and_sends_nothing_twice(
        tmp_path: Path, fleet_files: Path, webhook: WebhookServer, point: KillPoint) -> None:
    backend = local_backend(tmp_path / "fleet")
    upload_fleet(backend, fleet_files)
    killed = audit(tmp_path / "fleet", webhook, kill=point)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    rerun = audit(tmp_path / "fleet", webhook)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    rows = history_rows(backend)
    per_job = rows.groupby("job_id").size().to_dict()
    assert set(per_job) == set(FLEET_JOBS), per_job  # every job's rows, none lost
    assert not rows.duplicated(["job_id", "session_id", "rank"]).any()  # and none twice
    fleet = orjson.loads(backend.get("reports/fleet.json") or b"")
    assert {job["job_id"] for job in fleet["jobs"]} == set(FLEET_JOBS)
    assert all(job["history_key"] for job in fleet["jobs"])
    assert not [key for key in backend.stored_keys() if "/.commits/" in key or key.endswith(".tmp")]
    texts = [post.get("text", "") for post in webhook.posts]
    assert len(texts) == len(set(texts)) == 1, texts  # critical-job's message, once


def post_job(root: Path, webhook: WebhookServer, job_id: str, *, kill: KillPoint | None = None
             ) -> subprocess.CompletedProcess[str]:
    # the job in this process (a kill point is armed in it, not in a child), as the audits' --engine threads
    args = ["post-job", job_id, "--storage", str(root), "--slack-webhook", webhook.url, "--engine", "threads"]
    command = [sys.executable, "-m", "tests.faults.killpoints", kill.text(), "--", *args] if kill else [
        sys.executable, "-m", "stormwatch.flows.cli", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                          start_new_session=True, check=False)


POST_JOB_POINTS = [
    KillPoint(When.AFTER, "critical-job/model.json", 1),  # outputs written, nothing committed
    KillPoint(When.AFTER, ".commits/*", 1),  # committed, history not yet copied, nothing sent
    KillPoint(When.AFTER, ".ledger/*", 1),  # sent and recorded (its ledger segment), alert state not settled
]


@pytest.mark.parametrize("point", POST_JOB_POINTS, ids=[point.text() for point in POST_JOB_POINTS])
def test_a_killed_post_job_loses_nothing_and_the_next_audit_folds_it(
        tmp_path: Path, fleet_files: Path, webhook: WebhookServer, point: KillPoint) -> None:
    backend = local_backend(tmp_path / "fleet")
    upload_fleet(backend, fleet_files)
    killed = post_job(tmp_path / "fleet", webhook, "critical-job", kill=point)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    rerun = audit(tmp_path / "fleet", webhook)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    rows = history_rows(backend)
    assert set(rows["job_id"]) == set(FLEET_JOBS)
    assert not rows.duplicated(["job_id", "session_id", "rank"]).any()
    fleet = orjson.loads(backend.get("reports/fleet.json") or b"")
    assert {job["job_id"] for job in fleet["jobs"]} == set(FLEET_JOBS) and fleet["folded_at"]
    assert not [key for key in backend.stored_keys() if "/.commits/" in key or key.endswith(".tmp")]
    texts = [post.get("text", "") for post in webhook.posts]
    assert len(texts) == len(set(texts)) == 1, texts  # critical-job's message, once
