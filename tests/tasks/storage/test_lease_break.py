"""Leases that die with their holder: two minutes to live, taken over at once when the holder's
process is gone from this host, and broken by ``--break-lease`` only when nobody renews them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main
from stormwatch.tasks.storage.lease import DEFAULT_TTL_S, LeaseRecord, acquire, holder, holder_gone
from stormwatch.tasks.storage.lease_break import WATCH_S, BreakOutcome, break_lease
from tests.tasks.storage.backends import Backend, local_backend

KEY = "reports/.locks/audit.json"


def dead_pid() -> int:
    """The pid of a process that has just exited (reaped, so no zombie answers for it)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def plant(backend: Backend, *, host: str | None, pid: int | None, expires_in_s: float = 100.0) -> LeaseRecord:
    now = datetime.now(UTC)
    record = LeaseRecord(owner=f"nightly-audit on {host} pid {pid}", token="1" * 32, acquired_at=now,
                         expires_at=now + timedelta(seconds=expires_in_s), host=host, pid=pid, renewed_at=now)
    backend.put(KEY, record.to_bytes())
    return record


def test_a_lease_lives_two_minutes_and_records_where_its_holder_runs(backend: Backend) -> None:
    lease = acquire(backend.storage)
    assert lease is not None
    stored = orjson.loads(backend.get(KEY) or b"")
    assert stored["host"] == socket.gethostname() and stored["pid"] == os.getpid()
    ttl = datetime.fromisoformat(stored["expires_at"]) - datetime.fromisoformat(stored["acquired_at"])
    assert ttl == timedelta(seconds=DEFAULT_TTL_S) == timedelta(minutes=2)
    lease.renew()
    renewed = orjson.loads(backend.get(KEY) or b"")
    assert renewed["renewed_at"] > stored["renewed_at"] and renewed["token"] == stored["token"]
    assert lease.release()


def test_a_live_lease_of_a_dead_process_on_this_host_is_taken_over_at_once(backend: Backend) -> None:
    plant(backend, host=socket.gethostname(), pid=dead_pid())
    lease = acquire(backend.storage)
    assert lease is not None and lease.record.pid == os.getpid()
    lease.release()


@pytest.mark.parametrize(("host", "pid"), [("another-host", None), ("another-host", 1), (None, None)],
                         ids=["other host", "other host with pid", "old lease without host"])
def test_a_live_lease_held_elsewhere_is_respected(backend: Backend, host: str | None, pid: int | None) -> None:
    plant(backend, host=host, pid=pid)
    assert acquire(backend.storage) is None


def test_a_running_process_is_not_gone() -> None:
    now = datetime.now(UTC)
    record = LeaseRecord(owner="x", token="t", acquired_at=now, expires_at=now, host="h", pid=os.getppid())
    assert not holder_gone(record, host="h")
    assert holder_gone(LeaseRecord(owner="x", token="t", acquired_at=now, expires_at=now, host="h", pid=dead_pid()),
                       host="h")


def test_break_lease_without_a_lease_says_so(backend: Backend) -> None:
    result = break_lease(backend.storage, watch_s=0.1)
    uri = backend.storage.report_uri(".locks/audit.json")
    assert uri.endswith(KEY)
    assert result.outcome is BreakOutcome.NO_LEASE and result.message == f"no lease held: {uri} does not exist"


@pytest.mark.parametrize(("planted", "why"), [
    ({"host": "another-host", "pid": 3, "expires_in_s": -1.0}, "it expired (nightly-audit on another-host pid 3"),
    ({"host": "HERE", "pid": "DEAD"}, "is no longer running on this host"),
    ({"host": "another-host", "pid": 3}, "did not renew it in 0.3 s"),
], ids=["expired", "dead on this host", "not renewed while watched"])
def test_break_lease_ends_a_lease_whose_holder_is_gone(backend: Backend, planted: dict[str, object], why: str) -> None:
    values = {**planted}
    if values["host"] == "HERE":
        values["host"] = socket.gethostname()
    if values["pid"] == "DEAD":
        values["pid"] = dead_pid()
    plant(backend, **values)  # type: ignore[arg-type]
    result = break_lease(backend.storage, watch_s=0.3, sleep=lambda s: threading.Event().wait(min(s, 0.05)))
    assert result.outcome is BreakOutcome.BROKEN, result.message
    uri = backend.storage.report_uri(".locks/audit.json")
    assert result.message.startswith(f"lease {uri} broken: ") and why in result.message
    assert backend.get(KEY) is None
    assert acquire(backend.storage) is not None


def test_break_lease_leaves_a_lease_that_is_renewed_while_watched(backend: Backend) -> None:
    lease = acquire(backend.storage, owner="nightly-audit on a busy host")
    assert lease is not None
    with lease.kept_alive(every_s=0.2):
        result = break_lease(backend.storage, watch_s=5.0)
    assert result.outcome is BreakOutcome.ALIVE
    assert result.message == "lease left alone: nightly-audit on a busy host renewed it, so that audit is running"
    assert holder(backend.storage) is not None and lease.release()


def test_the_watch_outlasts_one_renewal_interval() -> None:
    assert WATCH_S > DEFAULT_TTL_S / 3


def test_cli_break_lease_then_audit_and_a_live_lease_is_exit_1(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    fleet = local_backend(tmp_path / "fleet")
    fleet.put("jobs/j/rank_0/telemetry.jsonl", b"")  # the preflight needs a job; the audit itself is not run
    lease = acquire(fleet.storage, owner="nightly-audit on a busy host")
    assert lease is not None
    with lease.kept_alive(every_s=0.2):
        code = main(["audit", "--storage", str(tmp_path / "fleet"), "--break-lease"])
    out = capsys.readouterr()
    assert code == 1 and out.err.startswith("error: lease left alone: nightly-audit on a busy host renewed it")
    assert lease.release()
