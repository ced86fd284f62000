"""Every Parquet file the nightly audit and a post-job write, as a warehouse reads them: microsecond
timestamps only, fleet.parquet in the history's schema, and the next audit compacting the night's
small files into one without losing or doubling a row, before it reads the history (so a rerun at
the same audit time finds the same files and takes the comparisons from fleet.json)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.post_job import post_job
from stormwatch.history.schema import HISTORY_SCHEMA, SCHEMA_VERSION_KEY
from tests import builders as b
from tests.tasks.storage.backends import Backend

pytestmark = pytest.mark.usefixtures("prefect_api")
NIGHT_1 = datetime(2026, 10, 1, 2, 0, tzinfo=UTC)


def params(backend: Backend, as_of: datetime, **options: object) -> AuditParameters:
    return AuditParameters(storage=backend.settings.uri, endpoint_url=backend.settings.endpoint_url,
                           as_of=as_of.isoformat(), job_name_pattern=r"(.+)-n\d+", **options)


def nanosecond_columns(data: bytes) -> list[str]:
    schema = pq.ParquetFile(io.BytesIO(data)).schema
    return [schema.column(i).name for i in range(len(schema))
            if "nanoseconds" in str(schema.column(i).logical_type).lower()]


def parquet_files(backend: Backend) -> dict[str, bytes]:
    return {key: backend.get(key) or b"" for key in sorted(backend.stored_keys())
            if key.startswith("reports/") and key.endswith(".parquet")}


def test_an_audit_writes_only_microseconds_and_compacts_the_nights_small_files(
        backend: Backend, tmp_path: Path) -> None:
    for job in ("train-a-n1", "train-b-n1"):
        b.write_multi_rank_job(tmp_path / job, world_size=2)  # clean: the flows end Completed
        backend.upload(tmp_path / job, f"jobs/{job}")
    nightly_audit(params(backend, NIGHT_1))
    b.write_multi_rank_job(tmp_path / "train-c-n1", world_size=2, samples=9)
    backend.upload(tmp_path / "train-c-n1", "jobs/train-c-n1")
    post_job(job_id="train-c-n1", params=params(backend, NIGHT_1 + timedelta(hours=6)))
    night_1 = sorted(key for key in parquet_files(backend) if key.startswith("reports/history/date=2026-10-01/"))
    assert len(night_1) == 2  # the audit's batch and the post-job's: two small files

    def history_rows() -> list[tuple[str, str, int]]:
        rows = []
        for key, data in parquet_files(backend).items():
            if key.startswith("reports/history/"):
                table = pq.read_table(io.BytesIO(data), columns=["job_id", "session_id", "rank"])
                rows += [tuple(row.values()) for row in table.to_pylist()]
        return sorted(rows)  # type: ignore[arg-type]

    before = history_rows()
    nightly_audit(params(backend, NIGHT_1 + timedelta(days=1)))  # compacts the nights before its own

    night_1 = sorted(key for key in parquet_files(backend) if key.startswith("reports/history/date=2026-10-01/"))
    assert len(night_1) == 1 and "/compacted-" in night_1[0]
    assert history_rows() == before  # nothing lost, nothing twice (the second audit diagnosed nothing new)
    files = parquet_files(backend)
    assert {"reports/fleet.parquet"} < set(files) and any("/_fleet/runs/" in key for key in files)
    assert {key: nanosecond_columns(data) for key, data in files.items()} == {key: [] for key in files}
    fleet = pq.read_table(io.BytesIO(files["reports/fleet.parquet"]))
    history = pq.read_table(io.BytesIO(files[night_1[0]]))
    assert fleet.schema.remove_metadata().equals(history.schema.remove_metadata())
    assert fleet.schema.remove_metadata().equals(HISTORY_SCHEMA)
    assert fleet.schema.metadata[SCHEMA_VERSION_KEY] == history.schema.metadata[SCHEMA_VERSION_KEY] == b"4"
    assert sorted(set(fleet.column("job_name").to_pylist())) == ["train-a", "train-b", "train-c"]
    for table in (fleet, history):  # version 4: every rank's growth figure or the reason it has none
        assert table.column("growth_gap").null_count + table.column("growth_confidence").null_count == table.num_rows
        assert table.column("duration_ns").null_count == 0
    copy = tmp_path / "warehouse"  # the files as a warehouse gets them: the history and fleet.parquet together
    for key, data in files.items():
        if key.startswith("reports/history/") or key == "reports/fleet.parquet":
            (copy / key).parent.mkdir(parents=True, exist_ok=True)
            (copy / key).write_bytes(data)
    found = duckdb.connect().execute(
        "select count(*) filter (audit_time is not null), count(session_id) filter (audit_time is not null),"
        " count(*) filter (audit_time is null) from read_parquet(?, union_by_name = true)",
        [f"{copy}/reports/**/*.parquet"]).fetchone()
    assert found == (len(before), len(before), fleet.num_rows)
