"""Fixtures for storage-fault tests: an S3 prefix on the moto server reached through the fault proxy,
direct access bypassing the proxy, botocore call/attempt counters, quick task retries."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from stormwatch.tasks.publish import publish_view_task
from stormwatch.tasks.retry import DIAGNOSE_JOB_RETRY, RetryPolicy
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import StorageSettings
from stormwatch.tasks.storage.s3 import S3Storage
from tests.faults.proxy import FaultProxy, fault_proxy
from tests.tasks.storage.backends import Backend, s3_backend


@dataclass
class RequestCounter:
    """botocore API calls and HTTP attempts per operation on one client; retries = attempts - calls."""

    calls: Counter[str] = field(default_factory=Counter)
    attempts: Counter[str] = field(default_factory=Counter)

    def attach(self, client: Any) -> RequestCounter:
        client.meta.events.register("before-call.s3", self._call)
        client.meta.events.register("request-created.s3", self._attempt)
        return self

    def _call(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def _attempt(self, operation_name: str, **_: Any) -> None:
        self.attempts[operation_name] += 1

    @property
    def retries(self) -> int:
        return sum(self.attempts.values()) - sum(self.calls.values())


@dataclass
class Proxied:
    """An S3 root seen through the proxy (``settings``, ``storage``) and directly (``direct``)."""

    proxy: FaultProxy
    direct: Backend
    settings: StorageSettings
    storage: S3Storage
    counter: RequestCounter


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's retry decisions unchanged, its back-off waits (up to 1-2 s each here) divided by 100."""
    from botocore.retries.standard import ExponentialBackoff

    original = ExponentialBackoff.delay_amount
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: original(self, context) / 100)


@pytest.fixture
def proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    with fault_proxy(moto_endpoint) as running:
        yield running


@pytest.fixture
def proxied(proxy: FaultProxy, s3_bucket: str, moto_client: Any) -> Proxied:
    direct = s3_backend(moto_client, s3_bucket)
    settings = dataclasses.replace(direct.settings, endpoint_url=proxy.url)
    storage = storage_for(settings)  # the one the flows use in this process, so the counter sees their calls
    assert isinstance(storage, S3Storage)
    return Proxied(proxy, direct, settings, storage, RequestCounter().attach(storage.client))


@pytest.fixture
def quick_task_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flows' task and job retries without their waits (2-20 s in production); counts unchanged.
    Audits run their jobs on threads here, so the request counters and patches see them."""
    from stormwatch.flows import audit

    monkeypatch.setattr(audit, "publish_view_task", publish_view_task.with_options(retry_delay_seconds=0))
    monkeypatch.setattr(audit, "take_inventory", audit.take_inventory.with_options(retry_delay_seconds=0))
    monkeypatch.setattr(audit, "read_previous", audit.read_previous.with_options(retry_delay_seconds=0))
    options = audit.audit_options
    quick = RetryPolicy(DIAGNOSE_JOB_RETRY.attempts, tuple(0.0 for _ in DIAGNOSE_JOB_RETRY.delays_s))
    monkeypatch.setattr(audit, "audit_options", lambda params: dataclasses.replace(options(params), job_retry=quick))


FLEET_JOBS = ("clean-job", "critical-job", "small-job")


@pytest.fixture(scope="session")
def fleet_files(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Three jobs written once per session by stormlog's writers: ``<dir>/<job id>/**``."""
    from tests import builders as b

    root = tmp_path_factory.mktemp("fault-fleet")
    b.write_multi_rank_job(root / "critical-job", world_size=2, alerts=b.DEFAULT_ALERTS)
    b.write_multi_rank_job(root / "clean-job", world_size=2, samples=12)
    b.write_multi_rank_job(root / "small-job", world_size=1, samples=5)
    return root


def upload_fleet(backend: Backend, files: Any) -> None:
    for job_id in FLEET_JOBS:
        backend.upload(files / job_id, f"jobs/{job_id}")
