"""``stormwatch post-job --job-timeout``: a job whose read never returns is killed after the timeout, recorded
failed ("timed out after N s") and the command exits 1, as the audit's ``--job-timeout`` does.

A post-job lists the job's files and reads them in one process, so a FIFO (never listed: see
tests/tasks/test_job_timeout.py) cannot stand for a stalled read here; a regular file under a
write lease (``F_SETLEASE``) can: listing it answers, opening it blocks for the kernel's
lease-break time (45 s by default), as a read from a stalled mount blocks. A FIFO there from
the start is passed over."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main
from tests import builders as b

pytestmark = pytest.mark.usefixtures("prefect_api")


@contextmanager
def stalled(path: Path) -> Iterator[None]:
    """Opening ``path`` blocks (for the lease-break time) until the block ends: a write lease held here."""
    previous = signal.signal(signal.SIGIO, signal.SIG_IGN)  # the kernel tells the lease holder by SIGIO
    descriptor = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.fcntl(descriptor, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        except OSError as exc:  # a file system without leases
            pytest.skip(f"no file leases here: {exc}")
        yield
    finally:
        os.close(descriptor)  # the lease ends with its descriptor
        signal.signal(signal.SIGIO, previous)


def write_job(root: Path, job_id: str) -> Path:
    b.write_multi_rank_job(root / "jobs" / job_id, world_size=2, samples=12, job_id=job_id)
    os.mkfifo(root / "jobs" / job_id / "rank_0" / "extra.jsonl")  # a FIFO from the start: never listed, never read
    return root / "jobs" / job_id


def test_a_post_job_whose_read_stalls_is_killed_at_the_job_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "fleet"
    folder = write_job(root, "stalls-job")
    first = sorted(path for path in folder.rglob("*") if path.is_file() and path.suffix != ".json")[0]
    with stalled(first):
        started = time.monotonic()
        code = main(["post-job", "stalls-job", "--storage", str(root), "--job-timeout", "3"])
        took_s = time.monotonic() - started
    out = capsys.readouterr().out
    assert code == 1
    assert "stalls-job: failed: timed out after 3 s (exit 1)" in out
    assert took_s < 40  # killed at the timeout, not released by the kernel's lease-break time (45 s)
    assert not (root / "reports" / "stalls-job" / "model.json").exists()


def test_a_post_job_within_the_timeout_is_diagnosed_past_a_fifo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "fleet"
    write_job(root, "ok-job")
    assert main(["post-job", "ok-job", "--storage", str(root), "--job-timeout", "120"]) == 0
    model = orjson.loads((root / "reports" / "ok-job" / "model.json").read_bytes())
    assert model["verdict"]["status"] == "clean"
    assert "extra.jsonl" not in orjson.dumps(model).decode()
    assert capsys.readouterr().out.startswith("ok-job: ")
