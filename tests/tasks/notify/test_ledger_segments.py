"""Writers without the audit lease (post-jobs) record their ledger lines as segments of their own."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.tasks.notify.ledger_store import read_ledger_bytes
from stormwatch.tasks.notify.step import notify_step
from stormwatch.tasks.storage.local import LocalStorage
from stormwatch.tasks.storage.protocol import LEDGER_ARCHIVE_FOLDER, LEDGER_FOLDER, StorageSettings
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
    # the audit folds: the post-jobs' lines archived, the newest of each alert carried, the segments gone
    assert storage.list_reports(LEDGER_FOLDER) == []
    [archive] = [entry.key for entry in storage.list_reports(LEDGER_ARCHIVE_FOLDER)]
    assert job_ids(storage.read_report(archive)) == jobs
    header = orjson.loads((storage.read_report("notifications.jsonl") or b"").splitlines()[0])
    assert header == {"type": "carried", "decided_at": (NOW + timedelta(hours=2)).isoformat(), "archive": archive}
    assert job_ids(read_ledger_bytes(storage).data) == jobs


def test_every_audit_folds_and_the_file_read_holds_one_line_an_alert(
        storage: LocalStorage, webhook: WebhookServer) -> None:
    """Three job names, a new run of one each night for two months: the file read each night holds
    the newest line of each alert, not every run's; the archives hold every decision exactly once."""
    decided: list[bytes] = []
    for night in range(60):
        now = NOW + timedelta(days=night)
        notify_step(storage, [finding(f"train-{night % 3}-{night + 1:04d}")], settings=settings(webhook),
                    now=now, overview=False)
        stamp = f'"decided_at":"{now.isoformat()}"'.encode()
        base = storage.read_report("notifications.jsonl") or b""
        decided += [line for line in base.splitlines(keepends=True) if stamp in line and b'"type"' not in line]
        header, *lines = base.splitlines()
        assert orjson.loads(header)["type"] == "carried", night
        alerts = [orjson.loads(line)["alert"] for line in lines]
        assert len(alerts) == len(set(alerts)), night  # one line per alert, however many runs fired it
        assert {alert.split("|")[0] for alert in alerts} == {f"train-{index}" for index in range(min(night + 1, 3))}
        assert storage.list_reports(LEDGER_FOLDER) == []
    sent: dict[str, list[int]] = {}
    for post in webhook.posts:  # "... job train-2-0012 is critical ...": the run of night 11
        run = post["text"].split("job ")[1].split(" is ")[0]
        sent.setdefault(run.rsplit("-", 1)[0], []).append(int(run.rsplit("-", 1)[1]) - 1)
    assert sorted(sent) == ["train-0", "train-1", "train-2"]
    for name, nights in sent.items():  # sent on its first night, then again only once the repeat interval passed
        gaps = [later - earlier for earlier, later in zip(nights, nights[1:], strict=False)]
        assert nights[0] == int(name[-1]) and all(gap >= 7 for gap in gaps), (name, nights)
    archives = storage.list_reports(LEDGER_ARCHIVE_FOLDER)
    archived = [line for entry in archives
                for line in (storage.read_report(entry.key) or b"").splitlines(keepends=True)]
    assert sorted(archived) == sorted(decided)  # each decision in one archive, none twice
    assert orjson.loads(header)["archive"] == archives[-1].key


def test_an_archive_a_killed_fold_left_is_read_and_its_sends_not_repeated(
        storage: LocalStorage, webhook: WebhookServer, monkeypatch: pytest.MonkeyPatch) -> None:
    notify_step(storage, [finding("train-0-0001")], settings=settings(webhook), now=NOW, overview=False)
    before = storage.read_report("notifications.jsonl")
    real_write = storage.write_report

    def killed(key: str, data: bytes, *, content_type: str) -> None:
        if key == "notifications.jsonl":
            raise OSError("simulated kill after the archive, before the file")
        real_write(key, data, content_type=content_type)

    monkeypatch.setattr(storage, "write_report", killed)
    with pytest.raises(OSError, match="simulated kill"):
        notify_step(storage, [finding("train-1-0002")], settings=settings(webhook), now=NOW + timedelta(days=1),
                    overview=False)
    monkeypatch.undo()
    assert storage.read_report("notifications.jsonl") == before and len(webhook.posts) == 2
    assert job_ids(read_ledger_bytes(storage).data) == ["train-0-0001", "train-1-0002"]  # the archive is read
    notify_step(storage, [finding("train-1-0002")], settings=settings(webhook), now=NOW + timedelta(days=2),
                overview=False)
    assert len(webhook.posts) == 2  # what the killed fold sent is known: not sent again
    assert len(storage.list_reports(LEDGER_ARCHIVE_FOLDER)) == 2  # nothing new to archive: no third
    assert job_ids(storage.read_report("notifications.jsonl")) == ["train-0-0001", "train-1-0002"]
