"""S3-only behaviour: client settings, endpoint precedence, bounded and pinned reads, pickling."""

from __future__ import annotations

import pickle
import threading
from typing import Any

import pytest

from stormwatch.tasks.storage.open import open_storage
from stormwatch.tasks.storage.protocol import InputChangedError, StorageSettings
from stormwatch.tasks.storage.s3 import S3Storage, client_config
from tests.tasks.storage.backends import s3_backend

DEAD_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens there


def test_client_config_bounds_retries_and_time() -> None:
    config = client_config(StorageSettings(uri="s3://b/p", max_attempts=3, max_concurrency=32))
    assert config.retries == {"mode": "adaptive", "total_max_attempts": 3}
    assert (config.connect_timeout, config.read_timeout) == (5.0, 60.0)
    assert config.max_pool_connections == 32


@pytest.mark.parametrize(
    ("explicit", "from_env", "expected"),
    [
        ("moto", DEAD_ENDPOINT, "moto"),  # an explicit setting wins over AWS_ENDPOINT_URL
        (None, "moto", "moto"),  # without one, boto3's own AWS_ENDPOINT_URL applies
        ("moto", None, "moto"),
    ],
)
def test_endpoint_url_precedence(
    monkeypatch: pytest.MonkeyPatch,
    s3_bucket: str,
    moto_endpoint: str,
    explicit: str | None,
    from_env: str | None,
    expected: str,
) -> None:
    def real(value: str) -> str:
        return moto_endpoint if value == "moto" else value

    if from_env is not None:
        monkeypatch.setenv("AWS_ENDPOINT_URL", real(from_env))
    settings = StorageSettings(
        uri=f"s3://{s3_bucket}/p", endpoint_url=None if explicit is None else real(explicit), max_attempts=1
    )
    storage = open_storage(settings)
    assert isinstance(storage, S3Storage)
    assert storage.client.meta.endpoint_url == real(expected)
    storage.write_report("index.html", b"ok", content_type="text/html")
    assert storage.read_report("index.html") == b"ok"


def test_fetch_reads_with_bounded_concurrency(s3_bucket: str, moto_client: Any) -> None:
    backend = s3_backend(moto_client, s3_bucket)
    files = {f"rank_{i}/events.jsonl": f"{{}}\n{i}".encode() for i in range(12)}
    for key, data in files.items():
        backend.put(f"jobs/j/{key}", data)
    storage = backend.reopen(max_concurrency=3)
    assert isinstance(storage, S3Storage)
    lock, in_flight, peak, threads = threading.Lock(), [0], [0], set()

    def started(**_: object) -> None:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            threads.add(threading.get_ident())

    def finished(**_: object) -> None:
        with lock:
            in_flight[0] -= 1

    storage.client.meta.events.register("before-call.s3.GetObject", started)
    storage.client.meta.events.register("after-call.s3.GetObject", finished)
    tree = storage.fetch_job("j")

    assert {key: tree.read(key) for key in files} == files
    assert peak[0] <= 3 and len(threads) <= 3


def test_changed_input_is_detected(s3_bucket: str, moto_client: Any) -> None:
    backend = s3_backend(moto_client, s3_bucket)
    backend.put("jobs/j/a.jsonl", b"{}\n")
    assert isinstance(backend.storage, S3Storage)
    client = backend.storage.client

    def overwrite_once(**_: object) -> None:
        client.meta.events.unregister("before-call.s3.GetObject", overwrite_once)
        backend.put("jobs/j/a.jsonl", b"{}\n{}\n")

    client.meta.events.register("before-call.s3.GetObject", overwrite_once)
    try:
        with pytest.raises(InputChangedError, match="changed or vanished"):
            backend.storage.fetch_job("j")
    finally:
        client.meta.events.unregister("before-call.s3.GetObject", overwrite_once)


def test_folder_markers_and_dot_segments_are_not_inputs(s3_bucket: str, moto_client: Any) -> None:
    backend = s3_backend(moto_client, s3_bucket)
    for key in ("jobs/j/", "jobs/j/rank_0/", "jobs/j/rank_0/events.jsonl", "jobs/j/a/../b.json", "jobs/j/a//c.json"):
        backend.put(key, b"" if key.endswith("/") else b"{}\n")
    assert [entry.key for entry in backend.storage.job_entries("j")] == ["rank_0/events.jsonl"]


def test_storage_pickles_without_its_client(s3_bucket: str, moto_client: Any) -> None:
    backend = s3_backend(moto_client, s3_bucket)
    backend.put("jobs/j/a.jsonl", b"{}\n")
    assert backend.storage.list_jobs().job_ids == ("j",)  # the client exists now
    copy = pickle.loads(pickle.dumps(backend.storage))
    assert copy.settings == backend.settings
    assert copy.list_jobs().job_ids == ("j",)
