"""Two audits on one storage root: the lease lets one work while the other returns at once; nothing is
corrupted or notified twice; a live lease is respected, an expired one taken over, a failed audit's freed."""

from __future__ import annotations

import functools
import io
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

import stormwatch.flows.audit
import stormwatch.flows.post_job
from stormwatch.flows.parameters import AuditParameters
from stormwatch.tasks.storage.lease import LeaseRecord, acquire, acquire_waiting, job_lease
from tests.faults.conftest import FLEET_JOBS, upload_fleet
from tests.flows.run_flows import run_audit, run_post_job
from tests.ledger_files import ledger_lines
from tests.tasks.notify.servers import WebhookServer, webhook_server
from tests.tasks.storage.backends import Backend, local_backend

pytestmark = pytest.mark.usefixtures("prefect_api")
LOCK = "reports/.locks/audit.json"


@pytest.fixture
def webhook(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookServer]:
    for name in ("STORMWATCH_SMTP_URL", "STORMWATCH_EMAIL_TO", "STORMWATCH_EMAIL_FROM", "STORMWATCH_NOTIFY_ON"):
        monkeypatch.delenv(name, raising=False)
    with webhook_server() as server:
        monkeypatch.setenv("STORMWATCH_SLACK_WEBHOOK", server.url)
        yield server


def audit(backend: Backend, **options: Any) -> dict[str, Any]:
    return run_audit(AuditParameters(storage=backend.settings.uri, endpoint_url=backend.settings.endpoint_url,
                                         **options))


def report_keys(backend: Backend) -> set[str]:
    return {key for key in backend.stored_keys() if key.startswith("reports/")}


def test_two_audits_at_once_one_works_and_each_finding_is_sent_once(
    backend: Backend, fleet_files: Path, webhook: WebhookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload_fleet(backend, fleet_files)
    other_returned = threading.Event()
    listing = stormwatch.flows.audit.take_inventory

    def list_once_the_other_returned(settings: Any) -> Any:
        other_returned.wait(timeout=120)  # the holder works only after the other run gave up: they overlapped
        return listing(settings)

    monkeypatch.setattr(stormwatch.flows.audit, "take_inventory", list_once_the_other_returned)
    start = threading.Barrier(2)
    results: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def run() -> None:
        start.wait()
        try:
            result = audit(backend)
        except BaseException as exc:  # reported below, never lost in the thread
            errors.append(exc)
            other_returned.set()
            return
        results.append(result)
        if "lease" in result:
            other_returned.set()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    busy = [result for result in results if "lease" in result]
    worked = [result for result in results if "lease" not in result]
    assert len(busy) == 1 and len(worked) == 1
    assert busy[0]["exit_code"] == 1 and busy[0]["summary"]["jobs"] == 0  # never mistaken for success
    assert "another audit holds the lease nightly-audit on " in busy[0]["lease"]
    assert worked[0]["summary"]["diagnosed"] == len(FLEET_JOBS) and worked[0]["failed"] == []

    assert len(webhook.posts) == 1 and "critical-job" in orjson.dumps(webhook.posts[0]).decode()
    fleet = orjson.loads(backend.get("reports/fleet.json") or b"")
    assert sorted(job["job_id"] for job in fleet["jobs"]) == list(FLEET_JOBS)
    table = pd.read_parquet(io.BytesIO(backend.get("reports/fleet.parquet") or b""))
    assert sorted(set(table["job_id"])) == list(FLEET_JOBS)
    for job_id in FLEET_JOBS:
        assert orjson.loads(backend.get(f"reports/{job_id}/model.json") or b"")["job_id"] == job_id
    ledger = ledger_lines(backend.get, backend.stored_keys())
    assert len({entry["key"] for entry in ledger}) == len(ledger)  # one decision per finding
    assert backend.get(LOCK) is None

    again = audit(backend)  # one after the other: the second finds its work done, sends nothing
    assert again["summary"]["skipped"] == len(FLEET_JOBS) and len(webhook.posts) == 1


@pytest.fixture
def local(tmp_path: Path) -> Backend:
    """A local root, for tests of the flows' wiring (the lease itself is tested on both backends)."""
    return local_backend(tmp_path / "fleet")


def held_by(backend: Backend, owner: str, *, expires_at: datetime, key: str = LOCK) -> LeaseRecord:
    record = LeaseRecord(owner=owner, token="0" * 32, acquired_at=expires_at - timedelta(minutes=30),
                         expires_at=expires_at)
    backend.put(key, record.to_bytes())
    return record


def test_a_live_lease_is_respected_by_the_audit_and_post_job_waits_only_for_its_job(
        backend: Backend, fleet_files: Path) -> None:
    upload_fleet(backend, fleet_files)
    until = datetime.now(UTC) + timedelta(minutes=20)
    held_by(backend, "nightly-audit on other-host pid 7", expires_at=until)
    before = report_keys(backend)

    result = audit(backend, fail_on="critical")
    stamp = until.isoformat(timespec="seconds")
    assert result["exit_code"] == 1
    assert result["lease"] == (f"another audit holds the lease nightly-audit on other-host pid 7 until {stamp}; it "
                               "ends by then if that audit is gone, or run `stormwatch audit --break-lease`")
    assert report_keys(backend) == before == {LOCK}  # nothing read into reports, nothing written
    job_lock = f"reports/.locks/{job_lease('critical-job')}.json"
    held_by(backend, "post-job critical-job on other-host pid 8", expires_at=until, key=job_lock)
    single = run_post_job(job_id="critical-job", params=AuditParameters(storage=backend.settings.uri,
                      endpoint_url=backend.settings.endpoint_url), lease_wait_s=0.3)
    assert single["exit_code"] == 1 and single["job"]["status"] == "failed"
    assert single["lease"].startswith("not diagnosed after waiting 0.3 s: another post-job of this job holds its "
                                      "lease post-job critical-job on other-host pid 8")
    assert report_keys(backend) == {LOCK, job_lock}  # nothing read into reports, nothing written
    other = run_post_job(job_id="clean-job", params=AuditParameters(storage=backend.settings.uri,
                     endpoint_url=backend.settings.endpoint_url), lease_wait_s=0)
    assert other["exit_code"] == 0 and other["job"]["status"] == "diagnosed"  # the audit lease is not its


def test_post_job_waits_for_its_jobs_lease_then_works(local: Backend, fleet_files: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    upload_fleet(local, fleet_files)
    held = acquire(local.storage, name=job_lease("critical-job"), owner="post-job critical-job elsewhere")
    assert held is not None
    waits: list[float] = []

    def sleep_until_released(seconds: float) -> None:
        waits.append(seconds)
        held.release()  # the other post-job of this job ends while this one waits

    monkeypatch.setattr(stormwatch.flows.post_job, "acquire_waiting", functools.partial(acquire_waiting,
                                                                             sleep=sleep_until_released))
    result = run_post_job(job_id="critical-job",
                      params=AuditParameters(storage=local.settings.uri, endpoint_url=local.settings.endpoint_url))
    assert waits == [2.0] and result["exit_code"] == 0 and result["job"]["status"] == "diagnosed"
    assert not [key for key in local.stored_keys() if key.startswith("reports/.locks/")]


def test_the_expired_lease_of_a_crashed_audit_is_taken_over(local: Backend, fleet_files: Path) -> None:
    upload_fleet(local, fleet_files)
    held_by(local, "nightly-audit on crashed-host pid 1", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    result = audit(local)
    assert "lease" not in result and result["summary"]["diagnosed"] == len(FLEET_JOBS)
    assert local.get(LOCK) is None


def test_a_failing_audit_releases_its_lease(local: Backend, fleet_files: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    upload_fleet(local, fleet_files)

    def publish_fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("publishing broke")

    with monkeypatch.context() as patch:
        patch.setattr(stormwatch.flows.audit, "publish_view_task", publish_fails)
        with pytest.raises(RuntimeError, match="publishing broke"):
            audit(local)
    assert local.get(LOCK) is None and local.get("reports/fleet.json") is None
    assert audit(local)["summary"]["skipped"] == len(FLEET_JOBS)  # the next audit is not locked out
