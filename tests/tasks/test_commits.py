"""Commit records on a local folder and on S3 (moto over HTTP): a batch's commit is one object, applying it
to the history is idempotent, pending commits are found (damaged ones named) and laid over fleet.json's
rows, the newest winning; clearing deletes only what it is given."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.tasks.commits import (
    batch_name,
    clear,
    commit_batch,
    commit_key,
    commit_key_of,
    decode,
    newest_rows,
    pending_commits,
    with_audit_id,
)
from stormwatch.tasks.history import read_history
from tests.stormwatch.history.synthetic import synthetic_fleet
from tests.tasks.storage.backends import Backend

FLEET = synthetic_fleet(nights=1, jobs_per_night=4, world_sizes=(2,), seed=3)
NIGHT = FLEET.nights[0]
WHEN = FLEET.audit_times[0]
AUDIT = "audit-20261001T020000Z-0123abcd"
JOBS = sorted(set(NIGHT.column("job_id").to_pylist()))


def row(job_id: str, *, status: JobStatus = JobStatus.DIAGNOSED, fingerprint: str = "sha256:1") -> FleetRow:
    return FleetRow(job_id=job_id, status=status, verdict=VerdictStatus.CLEAN if status is JobStatus.DIAGNOSED
                    else None, input_fingerprint=fingerprint, options={"preset": "medium"},
                    rank_rows=({"rank": 0, "session_id": "s-1"},))


def history_keys(backend: Backend) -> list[str]:
    return sorted(key for key in backend.stored_keys() if "/history/" in f"/{key}")


def test_a_commit_is_one_object_and_its_history_file_holds_its_rows(backend: Backend) -> None:
    commit = commit_batch(backend.storage, [row(job) for job in JOBS] + [row("broken", status=JobStatus.FAILED)],
                          NIGHT, audit=AUDIT, audit_time=WHEN)
    assert commit is not None
    name = batch_name(AUDIT, JOBS)
    assert commit.key == commit_key(name) == f".commits/{name}.parquet"
    assert commit.history_key == f"history/date={WHEN.date().isoformat()}/{name}.parquet"
    assert [r.job_id for r in commit.rows] == JOBS  # the failed job is not committed
    assert {r.history_key for r in commit.rows} == {commit.history_key}
    assert all(commit_key_of(r) == commit.key for r in commit.rows)
    assert commit.rows[0].rank_rows == ({"rank": 0, "session_id": "s-1"},)
    read = read_history(backend.storage, since=WHEN - timedelta(days=1), until=WHEN + timedelta(days=1))
    assert read.warnings == () and len(read.rows) == NIGHT.num_rows
    assert set(read.rows["audit_id"].astype(str)) == {AUDIT}


def test_applying_a_pending_commit_again_writes_the_same_history_file(backend: Backend) -> None:
    commit = commit_batch(backend.storage, [row(job) for job in JOBS], NIGHT, audit=AUDIT, audit_time=WHEN)
    assert commit is not None
    before = {key: backend.get(key) for key in history_keys(backend)}
    backend.storage.delete_report(commit.history_key)  # killed after the commit, before the history copy
    found = pending_commits(backend.storage)
    assert found.keys == (commit.key,) and found.damaged == ()
    assert {key: backend.get(key) for key in history_keys(backend)} == before
    pending_commits(backend.storage)  # and once more: nothing new, nothing twice
    assert {key: backend.get(key) for key in history_keys(backend)} == before
    rows = read_history(backend.storage, since=WHEN - timedelta(days=1), until=WHEN + timedelta(days=1)).rows
    keys = rows[["audit_id", "job_id", "session_id", "rank"]].astype(str)
    assert not keys.duplicated().any() and len(rows) == NIGHT.num_rows


def test_a_retried_batch_writes_the_same_keys(backend: Backend) -> None:
    first = commit_batch(backend.storage, [row(job) for job in JOBS], NIGHT, audit=AUDIT, audit_time=WHEN)
    again = commit_batch(backend.storage, [row(job) for job in reversed(JOBS)], NIGHT, audit=AUDIT, audit_time=WHEN)
    assert first is not None and again is not None and first.key == again.key
    assert len(history_keys(backend)) == 1
    assert len(pending_commits(backend.storage).commits) == 1


def test_nothing_diagnosed_commits_nothing(backend: Backend) -> None:
    failed = [row("x", status=JobStatus.FAILED)]
    assert commit_batch(backend.storage, failed, None, audit=AUDIT, audit_time=WHEN) is None
    assert backend.stored_keys() == set()


@pytest.mark.parametrize("damage", [b"", b"PAR1 torn", b"not parquet at all"], ids=["empty", "torn", "garbage"])
def test_a_damaged_commit_is_named(backend: Backend, damage: bytes) -> None:
    backend.put(f"reports/{commit_key('audit-20261001T020000Z-0123abcd-b00000000')}", damage)
    found = pending_commits(backend.storage)
    assert found.commits == ()
    (problem,) = found.damaged
    assert problem.startswith(".commits/audit-20261001T020000Z-0123abcd-b00000000.parquet: ")


def test_the_history_rows_carry_the_audit_id_given() -> None:
    table = NIGHT.set_column(NIGHT.schema.get_field_index("audit_id"), "audit_id",
                             pa.array(["other"] * NIGHT.num_rows, type=pa.string()))
    assert pc.unique(with_audit_id(table, AUDIT).column("audit_id")).to_pylist() == [AUDIT]


def test_committed_rows_lie_over_fleet_json_the_newest_winning(backend: Backend) -> None:
    old = commit_batch(backend.storage, [row("a", fingerprint="sha256:old")], None, audit=AUDIT, audit_time=WHEN,
                       now=datetime(2026, 10, 1, 2, 5, tzinfo=UTC))
    new = commit_batch(backend.storage, [row("a", fingerprint="sha256:new")], None,
                       audit="audit-20260930T020000Z-0123abcd", audit_time=WHEN - timedelta(days=1),
                       now=datetime(2026, 10, 1, 2, 9, tzinfo=UTC))  # a replay --as-of an earlier night, made later
    assert old is not None and new is not None
    published = {"a": row("a", fingerprint="sha256:published"), "b": row("b")}
    merged = newest_rows(published, pending_commits(backend.storage).commits)
    assert merged["a"].input_fingerprint == "sha256:new" and merged["b"] == published["b"]
    assert decode(new.key, backend.storage.read_report(new.key) or b"").rows == new.rows


def test_clear_deletes_only_the_keys_given(backend: Backend) -> None:
    one = commit_batch(backend.storage, [row("a")], None, audit=AUDIT, audit_time=WHEN)
    two = commit_batch(backend.storage, [row("b")], None, audit=AUDIT, audit_time=WHEN)
    assert one is not None and two is not None
    assert clear(backend.storage, [one.key]) == [one.key]
    assert pending_commits(backend.storage).keys == (two.key,)
