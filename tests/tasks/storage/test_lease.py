"""Leases on both backends: exclusive, respected while live, taken over when expired, renewed, released
only by their holder; the conditional storage operations under them; lost answers through the fault proxy."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from stormwatch.tasks.storage.job_ids import InvalidJobIdError
from stormwatch.tasks.storage.lease import (
    Lease,
    LeaseLostError,
    LeaseRecord,
    acquire,
    acquire_waiting,
    holder,
    lease_key,
)
from stormwatch.tasks.storage.protocol import StorageSettings, check_job_id
from stormwatch.tasks.storage.s3 import S3Storage
from tests.faults.proxy import Fault, FaultProxy, Op, fault_proxy
from tests.tasks.storage.backends import Backend

T0 = datetime(2026, 1, 2, 2, 0, tzinfo=UTC)
KEY = "reports/.locks/audit.json"


def clock_at(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


def stored(backend: Backend) -> dict[str, Any]:
    return orjson.loads(backend.get(KEY) or b"null")


def test_a_live_lease_is_exclusive_and_release_frees_it(backend: Backend) -> None:
    first = acquire(backend.storage, owner="audit A", ttl_s=600, clock=clock_at(T0))
    assert first is not None
    assert stored(backend)["owner"] == "audit A"
    assert stored(backend)["expires_at"] == (T0 + timedelta(seconds=600)).isoformat()

    assert acquire(backend.storage, owner="audit B", clock=clock_at(T0 + timedelta(seconds=599))) is None
    current = holder(backend.storage)
    assert current is not None and current.owner == "audit A" and current.token == first.record.token

    assert first.release() is True and backend.get(KEY) is None
    assert first.release() is False  # once
    second = acquire(backend.storage, owner="audit B", clock=clock_at(T0))
    assert second is not None and stored(backend)["owner"] == "audit B"


def test_an_expired_lease_is_taken_over_and_its_old_holder_cannot_renew_or_release(backend: Backend) -> None:
    crashed = acquire(backend.storage, owner="crashed", ttl_s=60, clock=clock_at(T0))
    assert crashed is not None
    later = T0 + timedelta(seconds=60)
    taker = acquire(backend.storage, owner="next", ttl_s=60, clock=clock_at(later))
    assert taker is not None and stored(backend)["owner"] == "next"

    with pytest.raises(LeaseLostError):
        crashed.renew()
    assert crashed.release() is False
    assert stored(backend)["owner"] == "next"  # the late release did not delete the new holder's lease


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"owner": "x"}', b'{"owner": "x", "token": "t", '
                                     b'"acquired_at": "2026-01-02T02:00:00", "expires_at": "2999-01-01T00:00:00"}'])
def test_a_lock_object_that_is_not_a_lease_counts_as_expired(backend: Backend, content: bytes) -> None:
    backend.put(KEY, content)  # no timezone in the last one: not a lease document either
    lease = acquire(backend.storage, owner="audit", clock=clock_at(T0))
    assert lease is not None and stored(backend)["owner"] == "audit"


def test_renew_moves_the_expiry_and_keeps_the_token(backend: Backend) -> None:
    moments = iter([T0, T0 + timedelta(seconds=100)])
    lease = acquire(backend.storage, owner="audit", ttl_s=60, clock=lambda: next(moments))
    assert lease is not None
    lease.renew()
    assert stored(backend)["expires_at"] == (T0 + timedelta(seconds=160)).isoformat()
    assert stored(backend)["token"] == lease.record.token and stored(backend)["acquired_at"] == T0.isoformat()
    assert acquire(backend.storage, owner="other", clock=clock_at(T0 + timedelta(seconds=150))) is None


def test_kept_alive_renews_from_a_thread(backend: Backend) -> None:
    lease = acquire(backend.storage, owner="audit", ttl_s=60)
    assert lease is not None
    first_expiry = stored(backend)["expires_at"]
    renewed = threading.Event()
    original = lease.renew

    def renew() -> None:
        original()
        renewed.set()

    lease.renew = renew  # type: ignore[method-assign]
    with lease.kept_alive(every_s=0.01):
        assert renewed.wait(timeout=30)
    assert stored(backend)["expires_at"] > first_expiry
    assert lease.release() is True


def test_concurrent_acquires_have_one_winner(backend: Backend) -> None:
    for round_number in range(8):
        barrier = threading.Barrier(4)
        won: list[Lease] = []

        def contend(index: int, round_number: int = round_number, barrier: threading.Barrier = barrier,
                    won: list[Lease] = won) -> None:
            barrier.wait()
            lease = acquire(backend.storage, owner=f"round {round_number} contender {index}")
            if lease is not None:
                won.append(lease)

        threads = [threading.Thread(target=contend, args=(index,)) for index in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1, f"round {round_number}: {len(won)} winners"
        assert stored(backend)["token"] == won[0].record.token
        assert won[0].release() is True


def test_conditional_replace_has_one_winner(backend: Backend) -> None:
    version = backend.storage.create_report_exclusive("x/state.json", b"v0", content_type="application/json")
    assert version is not None
    assert backend.storage.create_report_exclusive("x/state.json", b"other", content_type="application/json") is None
    barrier = threading.Barrier(4)
    results: list[str | None] = []

    def replace(index: int) -> None:
        barrier.wait()
        results.append(backend.storage.replace_report_if("x/state.json", f"v1-{index}".encode(), version=version,
                                                         content_type="application/json"))

    threads = [threading.Thread(target=replace, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [result for result in results if result is not None]
    assert len(winners) == 1
    data = backend.get("reports/x/state.json") or b""
    assert data.startswith(b"v1-")
    assert backend.storage.delete_report_if("x/state.json", version=version) is False  # stale version
    assert backend.storage.delete_report_if("x/state.json", version=winners[0]) is True
    assert backend.get("reports/x/state.json") is None
    assert backend.storage.replace_report_if("x/state.json", b"v2", version=winners[0], content_type="a/b") is None
    if backend.name == "local":  # no temporary file left by any of it
        assert sorted(p.name for p in (backend.storage.reports_dir / "x").iterdir()) == []  # type: ignore[attr-defined]


def test_waiting_acquire_gets_the_lease_once_released_and_gives_up_otherwise(backend: Backend) -> None:
    held = acquire(backend.storage, owner="nightly")
    assert held is not None
    polls: list[float] = []

    def sleep_then_release(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 2:
            held.release()

    lease = acquire_waiting(backend.storage, owner="post-job", wait_s=600, poll_s=0.5, sleep=sleep_then_release)
    assert lease is not None and polls == [0.5, 0.5] and stored(backend)["owner"] == "post-job"
    assert acquire_waiting(backend.storage, owner="late", wait_s=0.2, poll_s=0.05) is None
    assert stored(backend)["owner"] == "post-job"


def test_lease_names_and_the_locks_folder_are_guarded() -> None:
    assert lease_key("audit") == ".locks/audit.json"
    for bad in ("../x", "a/b", ""):
        with pytest.raises(ValueError):
            lease_key(bad)
    with pytest.raises(InvalidJobIdError):
        check_job_id(".locks")  # a job folder named like the locks folder is refused
    assert LeaseRecord.from_bytes(b"[]") is None


@pytest.fixture
def proxied(s3_bucket: str, moto_endpoint: str) -> Iterator[tuple[FaultProxy, S3Storage]]:
    with fault_proxy(moto_endpoint) as proxy:
        yield proxy, S3Storage(StorageSettings(uri=f"s3://{s3_bucket}/fleet", endpoint_url=proxy.url))


def test_lost_answers_are_recognised_by_their_bytes(proxied: tuple[FaultProxy, S3Storage]) -> None:
    """The write happened, its answer was lost, botocore retried and the precondition refused the
    retry: acquire and renew still succeed, and release leaves nothing behind."""
    proxy, storage = proxied
    proxy.inject(Fault.RESET, ops={Op.PUT}, key="*/.locks/*", after=True)
    lease = acquire(storage, owner="audit", ttl_s=60, clock=clock_at(T0))
    assert lease is not None
    assert [(entry.fault, entry.status) for entry in proxy.requests(Op.PUT)] == [(Fault.RESET, None), (None, 412)]

    proxy.inject(Fault.RESET, ops={Op.PUT}, key="*/.locks/*", after=True)
    lease._clock = clock_at(T0 + timedelta(seconds=30))
    lease.renew()
    assert [(entry.fault, entry.status) for entry in proxy.requests(Op.PUT)][2:] == [(Fault.RESET, None), (None, 412)]
    current = holder(storage)
    assert current is not None and current.expires_at == T0 + timedelta(seconds=90)

    proxy.inject(Fault.ERROR_500, ops={Op.DELETE}, after=True)
    assert lease.release() is False  # deleted by the first try; the retry found nothing to delete
    assert holder(storage) is None and proxy.injected() == {Fault.RESET: 2, Fault.ERROR_500: 1}
