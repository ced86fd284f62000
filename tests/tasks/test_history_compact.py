"""Compacting a night's small history files into one, on a local folder and on S3 (moto over HTTP):
rows kept exactly, pending commits' files left alone, and a compaction killed between its write
and its deletes neither loses nor doubles a row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stormwatch.history.schema import REPLACES_KEY, is_compacted
from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.tasks.commits import commit_batch, pending_commits
from stormwatch.tasks.history import append_history, parquet_bytes, read_history
from stormwatch.tasks.history_compact import compact_history
from stormwatch.tasks.storage.protocol import Storage
from tests.stormwatch.history.synthetic import synthetic_fleet
from tests.tasks.storage.backends import Backend

FLEET = synthetic_fleet(nights=3, jobs_per_night=4, world_sizes=(2, 4), seed=5)
SINCE, UNTIL = datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 12, 31, tzinfo=UTC)


def history_keys(backend: Backend) -> list[str]:
    return sorted(key.removeprefix("reports/") for key in backend.stored_keys() if "/history/" in f"/{key}")


def rows_of(storage: Storage) -> list[tuple[Any, ...]]:
    """Every row read, as comparable tuples (a row counted twice shows twice)."""
    frame = read_history(storage, since=SINCE, until=UNTIL).rows
    return sorted(frame[["audit_id", "job_id", "session_id", "rank"]].astype(str).itertuples(index=False, name=None))


def small_files(backend: Backend) -> None:
    """Night 1: three audits' files (a post-job's each); night 2: one; night 3 (the audit's own): two."""
    for night, (table, when) in enumerate(zip(FLEET.nights, FLEET.audit_times, strict=True)):
        jobs = sorted(set(table.column("job_id").to_pylist()))
        parts = [jobs[:1], jobs[1:2], jobs[2:]] if night == 0 else [jobs] if night == 1 else [jobs[:2], jobs[2:]]
        for number, part in enumerate(parts):
            chosen = table.filter(pa.compute.is_in(table.column("job_id"), pa.array(part)))
            audit = f"audit-{when + timedelta(minutes=number):%Y%m%dT%H%M%SZ}-0000000{number}"
            chosen = chosen.set_column(0, "audit_id", pa.array([audit] * chosen.num_rows))
            append_history(backend.storage, chosen, audit_time=when + timedelta(minutes=number))


class KilledBeforeDeletes:
    """The storage of a compaction killed once its compacted file is written: deletes never happen."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    def delete_report(self, key: str) -> bool:
        raise KeyboardInterrupt(f"killed before deleting {key}")


def test_each_earlier_night_becomes_one_file_with_every_row(backend: Backend) -> None:
    small_files(backend)
    before = rows_of(backend.storage)
    audit_night = FLEET.audit_times[2].date()

    done = compact_history(backend.storage, before=audit_night)

    assert [(night.night, len(night.replaced), night.rows) for night in done] == [
        (FLEET.audit_times[0].date(), 3, FLEET.nights[0].num_rows),
        (FLEET.audit_times[1].date(), 1, FLEET.nights[1].num_rows)]
    keys = history_keys(backend)
    assert [is_compacted(key) for key in keys] == [True, True, False, False]  # the audit's own night kept
    assert rows_of(backend.storage) == before
    replaces = pq.read_metadata(pa.BufferReader(backend.get(f"reports/{keys[0]}") or b"")).metadata[REPLACES_KEY]
    assert replaces.count(b"audit-") == 3
    assert compact_history(backend.storage, before=audit_night) == []  # a night is compacted once


def test_a_night_gets_new_files_compacted_with_its_compacted_one(backend: Backend) -> None:
    small_files(backend)
    first = compact_history(backend.storage, before=FLEET.audit_times[2].date())
    late = FLEET.nights[0].slice(0, 2).set_column(0, "audit_id", pa.array(["audit-20261101T230000Z-0000000f"] * 2))
    append_history(backend.storage, late, audit_time=FLEET.audit_times[0] + timedelta(hours=21))

    again = compact_history(backend.storage, before=FLEET.audit_times[2].date())

    assert len(again) == 1 and first[0].key in again[0].replaced and again[0].rows == first[0].rows + 2
    night = f"history/date={FLEET.audit_times[0]:%Y-%m-%d}/"
    assert len([key for key in history_keys(backend) if key.startswith(night)]) == 1


def test_a_compaction_killed_before_its_deletes_loses_and_doubles_nothing(backend: Backend) -> None:
    small_files(backend)
    before = rows_of(backend.storage)
    with pytest.raises(KeyboardInterrupt):
        compact_history(KilledBeforeDeletes(backend.storage), before=FLEET.audit_times[1].date())  # type: ignore[arg-type]
    assert len(history_keys(backend)) == 7  # the compacted file and the three it replaces, all there

    assert rows_of(backend.storage) == before  # the reader skips the replaced files

    done = compact_history(backend.storage, before=FLEET.audit_times[1].date())
    assert done == []  # the same night's compacted file, its leftovers deleted: nothing more to do
    assert len(history_keys(backend)) == 4
    assert rows_of(backend.storage) == before


def test_a_pending_commits_file_once_compacted_is_never_copied_back(backend: Backend) -> None:
    small_files(backend)
    when = FLEET.audit_times[0] + timedelta(hours=5)
    table = FLEET.nights[0].slice(0, 2)
    job = table.column("job_id")[0].as_py()
    row = FleetRow(job_id=job, status=JobStatus.DIAGNOSED, verdict=VerdictStatus.CLEAN)
    commit = commit_batch(backend.storage, [row], table, audit="audit-20261101T070000Z-000000aa", audit_time=when)
    assert commit is not None
    before = rows_of(backend.storage)

    done = compact_history(backend.storage, before=FLEET.audit_times[1].date())
    assert commit.history_key in done[0].replaced and commit.history_key not in history_keys(backend)
    assert len(pending_commits(backend.storage).commits) == 1  # applied again, as every audit does
    assert commit.history_key not in history_keys(backend)  # not copied back: the compacted file holds it
    assert rows_of(backend.storage) == before


def test_a_file_written_again_after_compaction_is_not_counted_twice(backend: Backend) -> None:
    small_files(backend)
    before = rows_of(backend.storage)
    done = compact_history(backend.storage, before=FLEET.audit_times[1].date())
    replayed = done[0].replaced[0]  # a replay of the same audit --as-of the same time writes the same key
    backend.put(f"reports/{replayed}", _bytes_before(backend, replayed, done[0].key))

    assert rows_of(backend.storage) == before  # the reader skips it
    assert compact_history(backend.storage, before=FLEET.audit_times[1].date()) == []  # deleted, not added
    assert replayed not in history_keys(backend) and rows_of(backend.storage) == before


def _bytes_before(backend: Backend, key: str, compacted: str) -> bytes:
    """The rows ``key`` held, as a history file again (taken from the compacted file)."""
    data = backend.get(f"reports/{compacted}") or b""
    table = pq.read_table(pa.BufferReader(data))
    audit = key.rsplit("/", 1)[-1].removesuffix(".parquet")
    mine = table.filter(pa.compute.equal(table.column("audit_id"), audit))
    assert mine.num_rows
    return parquet_bytes(mine)


def test_nights_outside_the_window_are_left_to_the_prune(backend: Backend) -> None:
    small_files(backend)
    done = compact_history(backend.storage, before=FLEET.audit_times[2].date(), keep_days=2)
    assert [night.night for night in done] == [FLEET.audit_times[1].date()]
    assert len([key for key in history_keys(backend) if f"date={FLEET.audit_times[0]:%Y-%m-%d}" in key]) == 3
