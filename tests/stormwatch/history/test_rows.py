"""History rows from real model.json documents (diagnosed from jobs written by stormlog's own writers)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest

from stormwatch.diagnose import DiagnoseOptions, diagnose
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.rows import history_rows
from stormwatch.history.schema import HISTORY_SCHEMA, PARQUET_METADATA_KEY, history_key
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.document_fleet import FleetMember
from stormwatch.peers.job_facts import FleetFacts
from stormwatch.peers.rank_facts import RankFacts
from tests.builders import DEFAULT_ALERTS, GIB, MIB, write_multi_rank_job

AUDIT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
SAMPLES = 12


def _document(root: Path, job_id: str, **job: Any) -> JobDocument:
    """A job's model.json as written and read back."""
    folder = root / job_id
    write_multi_rank_job(folder, job_id=job_id, samples=SAMPLES, **job)
    result = diagnose([str(folder)], job_id=job_id, source_name=str(folder), options=DiagnoseOptions(ranks="all"))
    return JobDocument.from_json(result.model_json(), name=f"{job_id}/model.json")


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, JobDocument]:
    root = tmp_path_factory.mktemp("jobs")
    return {
        "alerts": _document(root, "llama-8r-0142", world_size=4, alerts=DEFAULT_ALERTS),
        "clean": _document(root, "bert-2026-11-30", world_size=2),
        "missing": _document(root, "gpt-7", world_size=4, missing_ranks=(2,)),
        "two-hosts": _document(root, "wide-01", world_size=4, gpus_per_node=2),
    }


def _rows(*docs: JobDocument, audit_time: datetime = AUDIT) -> list[dict[str, Any]]:
    return history_rows(docs, job_names=JobNamePattern(), audit_time=audit_time).to_pylist()


def _reserved_peak(rank: int) -> int:
    """tests.builders.ramp: reserved = 1 GiB + rank·16 MiB + i·8 MiB + 64 MiB, highest at the last sample."""
    return GIB + rank * 16 * MIB + (SAMPLES - 1) * 8 * MIB + 64 * MIB


def _without_fleet(document: JobDocument) -> JobDocument:
    return dataclasses.replace(document, fleet=None)


def _without_fleet_ranks(document: JobDocument) -> JobDocument:
    assert document.fleet is not None
    facts = dataclasses.replace(document.fleet.facts, ranks=())
    return dataclasses.replace(document, fleet=dataclasses.replace(document.fleet, facts=facts))


def test_rows_follow_the_schema_and_carry_its_version(documents: dict[str, JobDocument]) -> None:
    table = history_rows(documents.values(), job_names=JobNamePattern(), audit_time=AUDIT)

    assert table.schema.equals(HISTORY_SCHEMA)
    assert orjson.loads(table.schema.metadata[PARQUET_METADATA_KEY]) == {"schema_version": 4}
    assert table.num_rows == 4 + 2 + 4 + 4
    assert table.column("job_id").to_pylist() == sorted(table.column("job_id").to_pylist())
    assert set(table.column("audit_time").to_pylist()) == {AUDIT}


@pytest.mark.parametrize(
    ("case", "job_name", "world", "verdict", "first_cause_ranks", "severities"),
    [
        ("alerts", "llama-8r", 4, "critical", [0], {"warning"}),
        ("clean", "bert", 2, "clean", [], {None}),
        ("missing", "gpt", 4, "warning", [], {None}),
        ("two-hosts", "wide", 4, "clean", [], {None}),
    ],
)
def test_job_level_columns(
    documents: dict[str, JobDocument], case: str, job_name: str, world: int, verdict: str,
    first_cause_ranks: list[int], severities: set[str | None],
) -> None:
    document = documents[case]
    rows = _rows(document)

    assert [row["rank"] for row in rows] == list(range(world))
    assert {row["job_name"] for row in rows} == {job_name}
    assert {row["world_size"] for row in rows} == {world}
    assert {row["verdict"] for row in rows} == {verdict} == {document.verdict.status.value}
    assert {row["input_fingerprint"] for row in rows} == {document.input_fingerprint}
    assert [row["rank"] for row in rows if row["first_cause"]] == first_cause_ranks
    assert {row["first_anomaly_severity"] for row in rows} == severities
    assert {row["job_started_ns"] for row in rows} == {min(s.started_at_ns for s in document.sessions)}


def test_rank_columns_come_from_the_model_rows(documents: dict[str, JobDocument]) -> None:
    document = documents["alerts"]
    for row, model_row in zip(_rows(document), document.model.rows, strict=True):
        assert row["samples"] == model_row.samples == SAMPLES
        assert row["allocated_delta_bytes"] == model_row.allocated_delta_bytes
        assert row["reserved_delta_bytes"] == model_row.reserved_delta_bytes
        assert row["hidden_gap_latest_bytes"] == model_row.hidden_gap_latest_bytes
        assert row["hidden_gap_peak_bytes"] == model_row.hidden_gap_peak_abs_bytes
        assert row["first_anomaly_signal"] == model_row.first_anomaly_signal == "alert:warning"
        assert row["first_anomaly_timestamp_ns"] == model_row.first_anomaly_timestamp_ns


def test_a_missing_rank_has_a_row_without_measurements(documents: dict[str, JobDocument]) -> None:
    missing = [row for row in _rows(documents["missing"]) if row["rank"] == 2]

    assert len(missing) == 1
    assert missing[0]["samples"] == 0
    assert missing[0]["peak_reserved_bytes"] is None
    assert missing[0]["first_anomaly_signal"] is None


@pytest.mark.parametrize("strip", [_without_fleet, _without_fleet_ranks])
def test_without_the_fleet_member_host_and_peaks_come_from_sessions_and_timelines(
    documents: dict[str, JobDocument], strip: Callable[[JobDocument], JobDocument]
) -> None:
    rows = _rows(strip(documents["two-hosts"]))

    assert [row["host"] for row in rows] == ["node-0", "node-0", "node-1", "node-1"]
    assert [row["peak_reserved_bytes"] for row in rows] == [_reserved_peak(rank) for rank in range(4)]
    assert all(row["device_id"] is None and row["peak_device_used_bytes"] is None for row in rows)


def test_the_fleet_member_wins_and_its_nulls_fall_back(documents: dict[str, JobDocument]) -> None:
    document = documents["alerts"]
    assert document.fleet is not None
    ranks = (RankFacts(rank=0, host="gpu-a", device_id=5, samples=SAMPLES, peak_allocated_bytes=11,
                       peak_reserved_bytes=22, peak_device_used_bytes=33, device_total_bytes=44,
                       hidden_gap_peak_bytes=55),
             RankFacts(rank=1, host=None, device_id=None, samples=0, peak_allocated_bytes=None,
                       peak_reserved_bytes=None, peak_device_used_bytes=None, device_total_bytes=None,
                       hidden_gap_peak_bytes=None))
    fleet = FleetMember(facts=FleetFacts(ranks, (), document.fleet.facts.coverage))
    rows = {row["rank"]: row for row in _rows(dataclasses.replace(document, fleet=fleet))}

    first = rows[0]
    assert (first["host"], first["device_id"], first["peak_allocated_bytes"], first["peak_reserved_bytes"],
            first["peak_device_used_bytes"], first["device_total_bytes"]) == ("gpu-a", 5, 11, 22, 33, 44)
    assert first["hidden_gap_peak_bytes"] == document.model.rows[0].hidden_gap_peak_abs_bytes
    second = rows[1]
    assert (second["host"], second["device_id"]) == ("node-0", None)
    assert second["peak_reserved_bytes"] == _reserved_peak(1)
    assert rows[2]["peak_reserved_bytes"] == _reserved_peak(2)  # a rank the member does not list


def test_the_audit_id_names_the_audit_and_its_jobs(documents: dict[str, JobDocument]) -> None:
    first = _rows(documents["alerts"], documents["clean"])
    again = _rows(documents["clean"], documents["alerts"])
    changed = _rows(documents["alerts"], dataclasses.replace(documents["clean"], input_fingerprint="sha256:other"))
    later = _rows(documents["alerts"], documents["clean"], audit_time=AUDIT + timedelta(hours=1))

    audit = first[0]["audit_id"]
    assert audit.startswith("audit-20261130T020000Z-")
    assert {row["audit_id"] for row in first} == {row["audit_id"] for row in again} == {audit}
    assert changed[0]["audit_id"] != audit
    assert later[0]["audit_id"].startswith("audit-20261130T030000Z-")
    assert history_key(AUDIT, audit) == f"history/date=2026-11-30/{audit}.parquet"


@pytest.mark.parametrize(
    ("audit_time", "expected"),
    [
        (datetime(2026, 11, 30, 2, 0), datetime(2026, 11, 30, 2, 0, tzinfo=UTC)),  # naive: UTC
        (datetime(2026, 11, 30, 1, 0, tzinfo=timezone(timedelta(hours=-3))), datetime(2026, 11, 30, 4, 0, tzinfo=UTC)),
    ],
)
def test_audit_time_is_stored_in_utc(
    documents: dict[str, JobDocument], audit_time: datetime, expected: datetime
) -> None:
    rows = _rows(documents["clean"], audit_time=audit_time)
    assert {row["audit_time"] for row in rows} == {expected}


def test_a_repeated_job_counts_once(documents: dict[str, JobDocument]) -> None:
    rows = _rows(documents["clean"], documents["clean"])
    assert [row["job_id"] for row in rows] == ["bert-2026-11-30"] * 2


def test_no_documents_give_an_empty_table() -> None:
    table = history_rows([], job_names=JobNamePattern(), audit_time=AUDIT)
    assert table.num_rows == 0
    assert table.schema.equals(HISTORY_SCHEMA)
    assert isinstance(table, pa.Table)


def test_peaks_from_a_timeline_skip_its_nulls(documents: dict[str, JobDocument]) -> None:
    """A schema-v4 counter missing on some samples: the peak is that of the samples that hold it."""
    document = _without_fleet(documents["alerts"])
    timeline = dict(document.model.per_rank_timelines[0])
    reserved = np.empty(3, dtype=object)
    reserved[:] = [None, 5, None]
    timeline["reserved"] = reserved
    timelines = {**document.model.per_rank_timelines, 0: timeline}
    model = dataclasses.replace(document.model, per_rank_timelines=timelines)
    row = _rows(dataclasses.replace(document, model=model))[0]
    assert row["peak_reserved_bytes"] == 5
