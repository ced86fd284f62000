"""A history store mixing files of every schema version, read by name by stormwatch, DuckDB, Polars,
pyarrow.dataset and pandas: no row loses ``session_id``/``session_verdict``, no column is
TIMESTAMP(NANOS) once written now, version 3 files read beside version 4's with null growth columns,
and fleet.parquet has the history's names and types."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from stormwatch.growth.figures import GrowthCounter, RankGrowth
from stormwatch.history.fleet_table import audit_of_key, fleet_rank_table
from stormwatch.history.schema import (
    GROWTH_COLUMNS,
    HISTORY_SCHEMA,
    PARQUET_METADATA_KEY,
    SCHEMA_VERSION_KEY,
    conform,
)
from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.tasks.history import append_history, read_history
from stormwatch.tasks.history_compact import compact_history
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import Storage, StorageSettings
from tests.stormwatch.history.synthetic import synthetic_fleet

_NS = pa.timestamp("ns", tz="UTC")
#: Version 1's schema exactly as its writer had it (git 6ca50c0, stormwatch/history/schema.py).
V1_SCHEMA = pa.schema([
    pa.field("audit_id", pa.string(), nullable=False), pa.field("audit_time", _NS, nullable=False),
    pa.field("job_id", pa.string(), nullable=False), pa.field("job_name", pa.string(), nullable=False),
    pa.field("world_size", pa.int32()), pa.field("rank", pa.int32(), nullable=False),
    pa.field("host", pa.string()), pa.field("device_id", pa.int32()), pa.field("samples", pa.int64()),
    pa.field("peak_allocated_bytes", pa.int64()), pa.field("peak_reserved_bytes", pa.int64()),
    pa.field("peak_device_used_bytes", pa.int64()), pa.field("device_total_bytes", pa.int64()),
    pa.field("hidden_gap_peak_bytes", pa.int64()), pa.field("hidden_gap_latest_bytes", pa.int64()),
    pa.field("allocated_delta_bytes", pa.int64()), pa.field("reserved_delta_bytes", pa.int64()),
    pa.field("first_anomaly_signal", pa.string()), pa.field("first_anomaly_severity", pa.string()),
    pa.field("first_anomaly_timestamp_ns", pa.int64()), pa.field("first_cause", pa.bool_(), nullable=False),
    pa.field("verdict", pa.string()), pa.field("input_fingerprint", pa.string()),
    pa.field("job_started_ns", pa.int64()),
])
#: Version 2's: version 1's and the session columns (git 5cad879).
V2_SCHEMA = V1_SCHEMA.append(pa.field("session_id", pa.string())).append(pa.field("session_verdict", pa.string()))
FLEET = synthetic_fleet(nights=2, jobs_per_night=3, world_sizes=(2, 4), seed=1)
OLD = synthetic_fleet(nights=3, jobs_per_night=2, world_sizes=(2,), seed=2)
#: Version 3's: today's without the growth columns version 4 added.
V3_SCHEMA = pa.schema([field for field in HISTORY_SCHEMA if field.name not in GROWTH_COLUMNS])


def _old_table(version: int, night: int) -> pa.Table:
    schema = {1: V1_SCHEMA, 2: V2_SCHEMA, 3: V3_SCHEMA}[version]
    table = OLD.nights[night]
    if version == 3:
        table = table.set_column(table.schema.get_field_index("schema_version"), "schema_version",
                                 pa.array([3] * table.num_rows, pa.int32()))
    columns = [table.column(field.name).cast(field.type) for field in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def write_v1(path: Path, table: pa.Table) -> None:
    """As version 1's ``parquet_bytes`` wrote it: ``pq.write_table`` with the Arrow schema stored."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata({PARQUET_METADATA_KEY: b'{"schema_version":1}'}), path,
                   compression="zstd")


def write_v2(path: Path, table: pa.Table) -> None:
    """As version 2's last ``parquet_bytes`` wrote it: key-value metadata only, no ARROW:schema."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, table.schema, compression="zstd", store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({PARQUET_METADATA_KEY: b'{"schema_version":2}'})


def write_v3(path: Path, table: pa.Table) -> None:
    """As version 3 wrote it: its schema, both footer keys naming version 3."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata({PARQUET_METADATA_KEY: b'{"schema_version":3}',
                                                  SCHEMA_VERSION_KEY: b"3"}), path, compression="zstd")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Storage, Path]]:
    """history/: the oldest night a version-1 file, the next a version-2 file, the next a version-3
    file, then files written now."""
    root = tmp_path / "fleet"
    folder = root / "reports" / "history"
    write_v1(folder / "date=2026-10-01" / "audit-20261001T020000Z-00000001.parquet", _old_table(1, 0))
    write_v2(folder / "date=2026-10-02" / "audit-20261002T020000Z-00000002.parquet", _old_table(2, 1))
    write_v3(folder / "date=2026-10-03" / "audit-20261003T020000Z-00000003.parquet", _old_table(3, 2))
    storage = storage_for(StorageSettings(uri=str(root)))
    for table, when in zip(FLEET.nights, FLEET.audit_times, strict=True):
        append_history(storage, table, audit_time=when)
    yield storage, folder


def _expected() -> tuple[int, int]:
    """(all rows, rows that have a session: versions 2 and later)."""
    new = sum(table.num_rows for table in FLEET.nights)
    old = sum(table.num_rows for table in OLD.nights)
    return old + new, old - OLD.nights[0].num_rows + new


def _nanosecond_columns(data: bytes) -> list[str]:
    schema = pq.ParquetFile(io.BytesIO(data)).schema
    return [schema.column(i).name for i in range(len(schema))
            if "timeUnit=nanoseconds" in str(schema.column(i).logical_type)]


def test_the_store_mixes_versions_as_the_issue_found_it(store: tuple[Storage, Path]) -> None:
    _, folder = store
    plain = pd.read_parquet(folder)  # the first file's schema: version 1's, without sessions
    assert "session_id" not in plain.columns  # what users lost, and why readers must read by name


def test_stormwatch_reads_every_version(store: tuple[Storage, Path]) -> None:
    storage, _ = store
    read = read_history(storage, since=datetime(2026, 9, 1, tzinfo=UTC), until=datetime(2026, 12, 1, tzinfo=UTC))
    total, with_session = _expected()

    assert read.warnings == () and len(read.rows) == total
    assert read.rows["session_id"].notna().sum() == with_session
    assert read.rows["session_verdict"].notna().sum() == with_session
    assert sorted(read.rows["schema_version"].unique().tolist()) == [1, 2, 3, 4]
    assert str(read.rows["audit_time"].dtype) == "datetime64[ns, UTC]"
    # versions 1-3 knew no growth: null there, the synthetic version-4 rows' duration set
    old = read.rows["schema_version"] < 4
    assert read.rows.loc[old, list(GROWTH_COLUMNS)].isna().all().all()
    assert read.rows.loc[~old, "duration_ns"].notna().all() and (~old).sum() == sum(t.num_rows for t in FLEET.nights)


def test_conform_migrates_an_old_file_in_the_current_schema(tmp_path: Path) -> None:
    path = tmp_path / "old.parquet"
    write_v1(path, _old_table(1, 0))
    table = conform(pq.read_table(path), name="history/old.parquet")

    assert table.schema.equals(HISTORY_SCHEMA) and table.num_rows == OLD.nights[0].num_rows
    assert table.column("audit_time").type == pa.timestamp("us", tz="UTC")
    assert table.column("audit_time").to_pylist()[0] == OLD.audit_times[0]
    assert table.column("session_id").null_count == table.num_rows
    assert set(table.column("schema_version").to_pylist()) == {1}


@pytest.mark.parametrize("reader", ["duckdb", "polars", "pyarrow.dataset", "pandas"])
def test_warehouse_readers_read_every_version_by_name(store: tuple[Storage, Path], reader: str) -> None:
    _, folder = store
    pattern = f"{folder}/*/*.parquet"
    if reader == "duckdb":
        frame = duckdb.connect().execute(
            "select * from read_parquet(?, hive_partitioning = true, union_by_name = true)", [pattern]).df()
    elif reader == "polars":  # the unified schema: files lacking a column get nulls, ns files cast to us
        schema = pl.from_arrow(HISTORY_SCHEMA.empty_table()).schema  # type: ignore[union-attr]
        frame = pl.scan_parquet(pattern, schema=schema, missing_columns="insert",
                                cast_options=pl.ScanCastOptions(datetime_cast="nanosecond-downcast")).collect().to_pandas()
    elif reader == "pyarrow.dataset":
        frame = ds.dataset(folder, schema=HISTORY_SCHEMA, format="parquet").to_table().to_pandas()
    else:
        frame = pd.read_parquet(folder, schema=HISTORY_SCHEMA)
    total, with_session = _expected()

    assert len(frame) == total
    assert frame["session_id"].notna().sum() == with_session
    assert frame["session_verdict"].notna().sum() == with_session
    assert frame["job_name"].notna().all() and frame["world_size"].notna().all()


def test_compaction_leaves_only_current_files_that_any_reader_reads_plainly(store: tuple[Storage, Path]) -> None:
    storage, folder = store
    total, with_session = _expected()
    compact_history(storage, before=datetime(2026, 12, 1, tzinfo=UTC).date())
    files = sorted(folder.rglob("*.parquet"))

    assert [path.name.startswith("compacted-") for path in files] == [True] * len(files)
    assert [_nanosecond_columns(path.read_bytes()) for path in files] == [[]] * len(files)
    plain = pd.read_parquet(folder)  # no schema given, no union by name: every file is version 4
    assert len(plain) == total and plain["session_id"].notna().sum() == with_session
    kind = duckdb.connect().execute("select typeof(audit_time) from read_parquet(?) limit 1",
                                    [f"{folder}/*/*.parquet"]).fetchone()
    assert kind == ("TIMESTAMP WITH TIME ZONE",)  # microseconds


def test_files_written_now_have_no_nanosecond_column(store: tuple[Storage, Path]) -> None:
    _, folder = store
    written_now = [path for path in folder.rglob("*.parquet") if "2026-10-0" not in str(path.parent)]
    assert written_now
    assert {path.name: _nanosecond_columns(path.read_bytes()) for path in written_now} == {
        path.name: [] for path in written_now}


def _fleet_row(job_id: str, *, session: str | None) -> FleetRow:
    rank = {"rank": 0, "availability": "present", "samples": 10, "allocated_delta_bytes": 1,
            "reserved_delta_bytes": 2, "hidden_gap_latest_bytes": 3, "hidden_gap_peak_abs_bytes": 4,
            "has_anomaly": True, "first_anomaly_timestamp_ns": 5, "first_anomaly_signal": "alert:critical",
            "first_anomaly_phase_path": "train/step", "host": "node-1", "device_id": 0,
            "peak_reserved_bytes": 6, "peak_device_used_bytes": 7, "device_total_bytes": 8,
            "session_id": session, "session_verdict": "critical", "outlier": False, "growth": None}
    growth = RankGrowth(rank=1, duration_ns=7_200_000_000_000, allocated_bytes_per_hour=1.5e8,
                        reserved_bytes_per_hour=2.5e9, judged_counter=GrowthCounter.RESERVED,
                        low_bytes_per_hour=2e9, high_bytes_per_hour=3e9, confidence=0.999, leak=True,
                        leak_min_bytes_per_hour=4.3e8, device_total_bytes=80 << 30, capacity_after_start_s=1e5,
                        gap=None)
    return FleetRow(job_id=job_id, status=JobStatus.DIAGNOSED, ranks_expected=2, input_fingerprint="sha256:x",
                    earliest={"rank": 0, "signal": "alert:critical"}, worst_session=session,
                    history_key=f"history/date=2026-10-03/audit-20261003T020000Z-0000abcd-b{'1' * 8}.parquet",
                    rank_rows=(rank, {**rank, "rank": 1, "has_anomaly": False, "growth": growth.as_json()}))


def test_fleet_parquet_has_the_history_schema(store: tuple[Storage, Path]) -> None:
    table = fleet_rank_table([_fleet_row("llama-8r-0142", session="s1")], name_of=lambda job: job.rsplit("-", 1)[0])

    assert table.schema.remove_metadata().equals(HISTORY_SCHEMA)
    assert table.schema.metadata[SCHEMA_VERSION_KEY] == b"4"
    assert PARQUET_METADATA_KEY not in table.schema.metadata  # not a history file
    row, grown = table.to_pylist()
    assert (row["job_name"], row["world_size"], row["schema_version"]) == ("llama-8r", 2, 4)
    assert all(row[name] is None for name in GROWTH_COLUMNS)  # rank 0 has no growth entry
    assert {name: grown[name] for name in GROWTH_COLUMNS} == {
        "duration_ns": 7_200_000_000_000, "allocated_growth_bytes_per_hour": 1.5e8,
        "reserved_growth_bytes_per_hour": 2.5e9, "growth_confidence": 0.999, "leak": True,
        "capacity_after_start_s": 1e5, "growth_gap": None}
    assert row["audit_id"] == "audit-20261003T020000Z-0000abcd" and row["audit_time"] is None
    assert row["hidden_gap_peak_bytes"] == 4 and table.column("first_cause").to_pylist() == [True, False]
    # and a warehouse unions it with the history by name
    _, folder = store
    fleet = folder.parent / "fleet.parquet"
    pq.write_table(table, fleet)
    count = duckdb.connect().execute("select count(*) from read_parquet([?, ?], union_by_name = true)",
                                     [str(fleet), f"{folder}/date=2026-11-0*/*.parquet"]).fetchone()
    assert count == (2 + sum(t.num_rows for t in FLEET.nights),)


@pytest.mark.parametrize(("key", "audit"), [
    ("history/date=2026-10-03/audit-20261003T020000Z-0000abcd-b11111111.parquet", "audit-20261003T020000Z-0000abcd"),
    ("history/date=2026-10-03/audit-20261003T020000Z-0000abcd.parquet", "audit-20261003T020000Z-0000abcd"),
    ("history/date=2026-10-03/compacted-0000abcd.parquet", None),
    (None, None),
])
def test_audit_of_key(key: str | None, audit: str | None) -> None:
    assert audit_of_key(key) == audit
