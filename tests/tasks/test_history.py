"""The history store on a local folder and on S3 (moto over HTTP): append, read, prune, bad files,
and the files as pandas and DuckDB read them."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stormwatch.diagnose import DiagnoseOptions, diagnose
from stormwatch.history.frame import ANALYTICS_COLUMNS
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.rows import history_rows
from stormwatch.history.schema import HISTORY_SCHEMA_VERSION, PARQUET_METADATA_KEY
from stormwatch.outputs.document import JobDocument
from stormwatch.tasks.history import append_history, parquet_bytes, prune_history, read_history
from tests.builders import DEFAULT_ALERTS, write_multi_rank_job
from tests.stormwatch.history.synthetic import FIRST_NIGHT, synthetic_fleet
from tests.tasks.storage.backends import Backend

FLEET = synthetic_fleet(nights=5, jobs_per_night=4, world_sizes=(2, 8), seed=0)
NIGHT = timedelta(days=1)


def _append_all(backend: Backend, nights: int = 5) -> list[str]:
    keys = [append_history(backend.storage, table, audit_time=when)
            for table, when in zip(FLEET.nights[:nights], FLEET.audit_times[:nights], strict=True)]
    return [key for key in keys if key is not None]


def _history_objects(backend: Backend) -> dict[str, bytes]:
    return {key: backend.get(key) or b"" for key in sorted(backend.stored_keys()) if "/history/" in f"/{key}"}


def test_append_writes_one_file_per_audit_in_its_date_partition(backend: Backend) -> None:
    keys = _append_all(backend)

    assert [key.split("/")[1] for key in keys] == [f"date=2026-11-0{day}" for day in range(1, 6)]
    assert all(key.startswith("history/") and key.endswith(".parquet") for key in keys)
    assert set(_history_objects(backend)) == {f"reports/{key}" for key in keys}
    table = pq.read_table(io.BytesIO(backend.get(f"reports/{keys[0]}") or b""))
    assert orjson.loads(table.schema.metadata[PARQUET_METADATA_KEY]) == {"schema_version": HISTORY_SCHEMA_VERSION}
    assert table.num_rows == FLEET.nights[0].num_rows


def test_read_returns_the_rows_of_the_window(backend: Backend) -> None:
    _append_all(backend)

    whole = read_history(backend.storage, since=FIRST_NIGHT, until=FLEET.as_of)
    part = read_history(backend.storage, since=FIRST_NIGHT + NIGHT, until=FIRST_NIGHT + 2 * NIGHT)
    before = read_history(backend.storage, since=FIRST_NIGHT - 9 * NIGHT, until=FIRST_NIGHT - NIGHT)
    same_day = read_history(backend.storage, since=FIRST_NIGHT + timedelta(hours=1), until=FLEET.as_of)
    naive = read_history(backend.storage, since=FIRST_NIGHT.replace(tzinfo=None),
                         until=FLEET.as_of.replace(tzinfo=None))

    assert len(whole.rows) == sum(table.num_rows for table in FLEET.nights) == len(naive.rows)
    assert (whole.warnings, len(whole.keys)) == ((), 5)
    assert set(part.rows["audit_time"]) == {pd.Timestamp(FIRST_NIGHT + NIGHT), pd.Timestamp(FIRST_NIGHT + 2 * NIGHT)}
    assert len(part.keys) == 2
    assert before.rows.empty and list(before.rows.columns) == list(whole.rows.columns)
    assert pd.Timestamp(FIRST_NIGHT) not in set(same_day.rows["audit_time"])  # its partition read, its rows not
    expected = FLEET.table().to_pandas()
    pd.testing.assert_frame_equal(
        whole.rows.astype({name: object for name in whole.rows.select_dtypes("category")}).reset_index(drop=True),
        expected.astype({name: object for name in expected.select_dtypes(["object", "string"])}),
        check_dtype=False,
    )


def test_read_can_take_only_the_analytics_columns(backend: Backend) -> None:
    _append_all(backend, nights=2)
    read = read_history(backend.storage, since=FIRST_NIGHT, until=FLEET.as_of, columns=ANALYTICS_COLUMNS)
    assert list(read.rows.columns) == list(ANALYTICS_COLUMNS)
    empty = read_history(backend.storage, since=FLEET.as_of, until=FLEET.as_of, columns=ANALYTICS_COLUMNS)
    assert list(empty.rows.columns) == list(ANALYTICS_COLUMNS)


def test_replaying_an_audit_rewrites_its_own_key_only(backend: Backend) -> None:
    first = _append_all(backend)
    again = append_history(backend.storage, FLEET.nights[2], audit_time=FLEET.audit_times[2])

    assert again == first[2]
    assert len(_history_objects(backend)) == 5


def test_an_audit_without_rows_writes_nothing_and_rows_of_two_audits_are_refused(backend: Backend) -> None:
    assert append_history(backend.storage, FLEET.nights[0].slice(0, 0), audit_time=FIRST_NIGHT) is None
    assert _history_objects(backend) == {}
    with pytest.raises(ValueError, match="2 audits"):
        append_history(backend.storage, pa.concat_tables(FLEET.nights[:2]), audit_time=FIRST_NIGHT)


def _foreign_parquet() -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"x": [1, 2]}), sink)
    return sink.getvalue()


def _future_version() -> bytes:
    table = FLEET.nights[0].replace_schema_metadata({PARQUET_METADATA_KEY: b'{"schema_version": 99}'})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _wrong_types() -> bytes:
    table = FLEET.nights[0].set_column(5, "rank", pa.array(["r"] * FLEET.nights[0].num_rows))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("history/date=2026-11-02/audit-20261102T030000Z-0000dead.parquet", b"PAR1 garbage", "not readable as Parquet"),
        ("history/date=2026-11-02/audit-20261102T030000Z-0000beef.parquet", parquet_bytes(FLEET.nights[1])[:-40],
         "not readable as Parquet"),
        ("history/date=2026-11-03/audit-20261103T030000Z-000f0e19.parquet", _foreign_parquet(),
         "not a stormwatch history file"),
        ("history/date=2026-11-03/audit-20261103T030000Z-00000099.parquet", _future_version(), "schema version 99"),
        ("history/date=2026-11-03/audit-20261103T030000Z-0000abcd.parquet", _wrong_types(), "wrong type"),
        ("history/date=2026-11-03/notes.txt", b"hello", "not a history file name"),
        ("history/README.parquet", _foreign_parquet(), "not a history file name"),
    ],
    ids=["garbage", "truncated", "foreign", "future-version", "wrong-types", "text-file", "outside-partitions"],
)
def test_a_damaged_or_foreign_file_is_skipped_with_a_warning_naming_it(
    backend: Backend, name: str, data: bytes, words: str
) -> None:
    _append_all(backend)
    backend.put(f"reports/{name}", data)
    before = _history_objects(backend)

    read = read_history(backend.storage, since=FIRST_NIGHT, until=FLEET.as_of)
    tonight = FLEET.nights[4].set_column(
        0, "audit_id", pa.array(["audit-20261106T020000Z-12345678"] * FLEET.nights[4].num_rows))
    append_history(backend.storage, tonight, audit_time=FLEET.as_of + NIGHT)

    assert len(read.rows) == sum(table.num_rows for table in FLEET.nights)
    assert len(read.warnings) == 1
    assert name in read.warnings[0] and words in read.warnings[0]
    after = _history_objects(backend)
    assert {key: after[key] for key in before} == before  # nothing rewritten, the bad file included
    assert len(after) == len(before) + 1


def test_prune_deletes_nights_before_the_retention_only(backend: Backend) -> None:
    keys = _append_all(backend)
    backend.put("reports/history/date=2026-10-01/notes.txt", b"kept: not a history file")
    backend.put("reports/job-1/model.json", b"{}")

    assert prune_history(backend.storage, keep_days=30, as_of=FLEET.as_of) == []
    deleted = prune_history(backend.storage, keep_days=2, as_of=FLEET.as_of)
    replayed = prune_history(backend.storage, keep_days=1, as_of=FIRST_NIGHT)  # an old --as-of keeps newer nights

    assert deleted == keys[:3]
    assert replayed == []
    assert set(_history_objects(backend)) == {f"reports/{key}" for key in keys[3:]} | {
        "reports/history/date=2026-10-01/notes.txt"}
    assert backend.get("reports/job-1/model.json") == b"{}"
    with pytest.raises(ValueError):
        prune_history(backend.storage, keep_days=0, as_of=FLEET.as_of)


@pytest.fixture(scope="module")
def real_table(tmp_path_factory: pytest.TempPathFactory) -> pa.Table:
    """History rows of two jobs diagnosed from stormlog-written artifacts."""
    root = tmp_path_factory.mktemp("jobs")
    documents: list[JobDocument] = []
    for job_id, alerts in (("llama-8r-0142", DEFAULT_ALERTS), ("train-a-2026-11-30", ())):
        folder = root / job_id
        write_multi_rank_job(folder, job_id=job_id, world_size=4, alerts=alerts)
        job = diagnose([str(folder)], job_id=job_id, source_name=str(folder), options=DiagnoseOptions(ranks="all"))
        documents.append(JobDocument.from_json(job.model_json(), name=f"{job_id}/model.json"))
    return history_rows(documents, job_names=JobNamePattern(), audit_time=datetime(2026, 11, 30, 2, tzinfo=UTC))


def test_duckdb_and_pandas_read_the_store(tmp_path: Path, real_table: pa.Table) -> None:
    from tests.tasks.storage.backends import local_backend

    backend = local_backend(tmp_path / "fleet")
    _append_all(backend)
    append_history(backend.storage, real_table, audit_time=datetime(2026, 11, 30, 2, tzinfo=UTC))
    folder = tmp_path / "fleet" / "reports" / "history"
    pattern = f"{folder}/*/*.parquet"
    total = sum(table.num_rows for table in FLEET.nights) + real_table.num_rows

    con = duckdb.connect()
    count, nights = con.execute(
        "select count(*), count(distinct date) from read_parquet(?, hive_partitioning = true)", [pattern]).fetchone()
    names = con.execute(
        "select distinct job_name from read_parquet(?, hive_partitioning = true) "
        "where date = '2026-11-30' order by 1", [pattern]).fetchall()
    kind = con.execute("select typeof(audit_time) from read_parquet(?) limit 1", [pattern]).fetchone()
    metadata = con.execute("select distinct decode(value) from parquet_kv_metadata(?) where decode(key) = ?",
                           [pattern, PARQUET_METADATA_KEY.decode()]).fetchall()
    frame = pd.read_parquet(folder)

    assert (count, nights) == (total, 6)
    assert names == [("llama-8r",), ("train-a",)]
    assert kind == ("TIMESTAMP WITH TIME ZONE",)  # microseconds, UTC: what Spark, Trino and BigQuery read
    assert metadata == [('{"schema_version":4}',)]
    assert len(frame) == total
    assert str(frame["audit_time"].dtype) == "datetime64[us, UTC]"
    assert sorted(frame["date"].astype(str).unique())[-1] == "2026-11-30"
