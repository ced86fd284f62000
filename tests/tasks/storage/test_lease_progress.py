"""The audit lease is renewed only while its holder makes progress: a hung holder loses it, and the
next audit takes it over once it expires; a killed holder blocks the next one for ``DEFAULT_TTL_S``."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

from stormwatch.tasks.heartbeat import Heartbeat
from stormwatch.tasks.storage.lease import DEFAULT_TTL_S, LeaseLostError, acquire, lease_key
from tests.tasks.storage.backends import local_backend


class Idle:
    """An ``idle_s`` the test sets; each call is counted, so the test knows the renewal thread looked."""

    def __init__(self) -> None:
        self.value_s = 0.0
        self.looked = threading.Semaphore(0)

    def __call__(self) -> float:
        self.looked.release()
        return self.value_s

    def wait_looks(self, count: int) -> None:
        for _ in range(count):
            assert self.looked.acquire(timeout=30)


def test_renewals_stop_while_the_holder_makes_no_progress_and_resume_when_it_does(tmp_path: Path) -> None:
    backend = local_backend(tmp_path / "fleet")
    lease = acquire(backend.storage, owner="audit A")
    assert lease is not None
    key = f"reports/{lease_key('audit')}"
    idle = Idle()
    with lease.kept_alive(every_s=0.01, idle_s=idle, stall_s=60):
        first = backend.get(key)
        idle.wait_looks(3)
        assert backend.get(key) != first  # renewed while moving
        idle.value_s = 61
        idle.wait_looks(2)  # a whole look with the new value
        stalled = backend.get(key)
        idle.wait_looks(5)
        assert backend.get(key) == stalled  # not renewed: it will expire
        idle.value_s = 0
        idle.wait_looks(2)
        idle.wait_looks(1)
    assert backend.get(key) != stalled  # moving again before anyone took it: renewed again
    lease.release()


def test_a_hung_holders_lease_is_taken_over_once_it_expires_and_the_holder_cannot_renew(tmp_path: Path) -> None:
    backend = local_backend(tmp_path / "fleet")
    lease = acquire(backend.storage, owner="audit A")
    assert lease is not None
    idle = Idle()
    idle.value_s = 1e9  # hung
    with lease.kept_alive(every_s=0.01, idle_s=idle, stall_s=60):
        idle.wait_looks(3)
        expires_at = lease.record.expires_at
        later = expires_at + timedelta(seconds=1)
        assert acquire(backend.storage, owner="audit B", clock=lambda: expires_at - timedelta(seconds=1)) is None
        taken = acquire(backend.storage, owner="audit B", clock=lambda: later)
        assert taken is not None and taken.record.owner == "audit B"
    try:
        lease.renew()
        raise AssertionError("the hung holder renewed a lease it lost")
    except LeaseLostError:
        pass
    taken.release()


def test_a_killed_holder_blocks_the_next_audit_for_minutes() -> None:
    assert DEFAULT_TTL_S <= 180  # the bound stated in docs/architecture.md and infra/README.md


def test_the_heartbeat_counts_seconds_since_the_last_beat() -> None:
    now = [100.0]
    beat = Heartbeat(clock=lambda: now[0])
    now[0] = 130.0
    assert beat.idle_s() == 30.0
    beat.beat()
    assert beat.idle_s() == 0.0
