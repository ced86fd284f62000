"""Writers without the audit lease (post-jobs) record their ledger lines as segments of their own."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.tasks.notify.ledger_store import FOLD_AFTER_NIGHTS, read_ledger_bytes
from stormwatch.tasks.notify.step import notify_step
from stormwatch.tasks.storage.local import LocalStorage
from stormwatch.tasks.storage.protocol import LEDGER_FOLDER, StorageSettings
from tests.stormwatch.alerting.documents import document
from tests.tasks.notify.servers import WebhookServer
from tests.tasks.notify.test_notify import settings

NOW = datetime(2026, 11, 30, 2, tzinfo=UTC)


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    root = tmp_path / "fleet"
    (root / "jobs").mkdir(parents=True)
    return LocalStorage(StorageSettings(uri=str(root)))


def finding(job_id: str) -> JobFinding:
    return JobFinding.from_document(document("alerts", job_id=job_id), report_url=None)


def job_ids(data: bytes | None) -> list[str]:
    return sorted({orjson.loads(line)["job_id"] for line in (data or b"").splitlines() if b'"job_id"' in line})


def test_concurrent_post_jobs_each_append_a_segment_and_the_audit_carries_them(
        storage: LocalStorage, webhook: WebhookServer) -> None:
    jobs = [f"train-{index}-0001" for index in range(4)]
    results: dict[str, dict[str, object]] = {}
    barrier = threading.Barrier(len(jobs))

    def post_job(job_id: str) -> None:
        barrier.wait()
        results[job_id] = notify_step(storage, [finding(job_id)], settings=settings(webhook), now=NOW,
                                      overview=False, whole=False)

    threads = [threading.Thread(target=post_job, args=(job_id,)) for job_id in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(results[job_id]["sent"] == 1 for job_id in jobs), results
    assert sorted(post["text"].split(" is ")[0].removeprefix("Stormwatch: job ") for post in webhook.posts) == jobs
    assert storage.read_report("notifications.jsonl") is None  # nobody rewrote the shared file
    segments = storage.list_reports(LEDGER_FOLDER)
    assert len(segments) == len(jobs)
    assert job_ids(read_ledger_bytes(storage).data) == jobs

    again = notify_step(storage, [finding(jobs[0])], settings=settings(webhook), now=NOW + timedelta(hours=1),
                        overview=False, whole=False)
    assert again["sent"] == 0 and len(webhook.posts) == len(jobs)  # the segments are read: nothing twice

    audit = notify_step(storage, [], settings=settings(webhook), now=NOW + timedelta(hours=2), overview=False)
    assert audit["sent"] == 0
    assert storage.read_report("notifications.jsonl") is None  # the audit appends too: its night's segment
    [night] = [entry.key for entry in storage.list_reports(LEDGER_FOLDER)]
    assert "-audit-" in night and job_ids(storage.read_report(night)) == jobs
    assert job_ids(read_ledger_bytes(storage).data) == jobs


def test_the_audit_writes_only_its_night_and_folds_the_ledger_after_a_month(
        storage: LocalStorage, webhook: WebhookServer) -> None:
    first = notify_step(storage, [finding("train-0-0001")], settings=settings(webhook), now=NOW, overview=False)
    assert first["sent"] == 1
    base = storage.read_report("notifications.jsonl")
    assert job_ids(base) == ["train-0-0001"]  # the first ledger is the file itself
    for night in range(1, FOLD_AFTER_NIGHTS + 1):
        job = f"train-{night}-0001"
        notify_step(storage, [finding(job)], settings=settings(webhook), now=NOW + timedelta(days=night),
                    overview=False)
        if night == FOLD_AFTER_NIGHTS - 1:
            before = read_ledger_bytes(storage).data or b""  # every line so far, in order
        if night < FOLD_AFTER_NIGHTS:
            assert storage.read_report("notifications.jsonl") == base, night  # never rewritten meanwhile
            nights = [entry.key for entry in storage.list_reports(LEDGER_FOLDER)]
            assert len(nights) == night and job_ids(storage.read_report(sorted(nights)[-1])) == [job]
    every = sorted(f"train-{night}-0001" for night in range(FOLD_AFTER_NIGHTS))
    assert storage.list_reports(LEDGER_FOLDER) == []  # the 30 nights folded into the file
    assert job_ids(storage.read_report("notifications.jsonl")) == sorted([*every, f"train-{FOLD_AFTER_NIGHTS}-0001"])
    assert len(webhook.posts) == FOLD_AFTER_NIGHTS + 1  # one send per job, none twice
    assert storage.read_report("notifications.jsonl").startswith(before)  # type: ignore[union-attr]
