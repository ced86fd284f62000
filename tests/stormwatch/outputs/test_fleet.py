"""fleet.json rows and fleet.parquet rank rows carry the job's fleet facts (model.json's ``fleet``)."""

from __future__ import annotations

import io

import orjson
import pandas as pd

from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.fleet import (
    FACT_COLUMNS,
    RANK_COLUMNS,
    FleetRow,
    JobStatus,
    rank_table,
    row_from_document,
)
from tests.stormwatch.outputs.golden_jobs import expected

GIB = 1024**3
COVERAGE = {"expected_ranks": 3, "present_ranks": 2, "missing_ranks": [2], "ranks_present_percent": 66.67,
            "sessions": 2, "sessions_without_stop": 0, "session_ids_without_stop": [],
            "schema_versions": {"3": 20}, "collectors": {"stormlog.cuda_tracker": 20}, "load_warnings": 0,
            "ended_abruptly": 0, "ended_abruptly_ranks": []}
OUTLIER = {"rank": 1, "metric": "peak_reserved_bytes", "value_bytes": 30 * GIB, "median_bytes": 2 * GIB,
           "robust_z": None}


def fact(rank: int, reserved: int) -> dict[str, object]:
    return {"rank": rank, "host": f"node-{rank}", "device_id": rank, "samples": 10, "peak_allocated_bytes": reserved,
            "peak_reserved_bytes": reserved, "peak_device_used_bytes": reserved + GIB,
            "device_total_bytes": 80 * GIB, "hidden_gap_peak_bytes": GIB}


def document(job_id: str = "job-1", *, fleet: bool = True) -> JobDocument:
    """A real model.json (a golden one) with three ranks, rank 2 missing, and the facts above."""
    rows = [{"rank": rank, "availability": "missing" if rank == 2 else "present", "samples": 0 if rank == 2 else 10,
             "has_anomaly": False} for rank in range(3)]
    doc = orjson.loads(expected("one-session/model.json"))
    doc.update(job_id=job_id, verdict={"status": "clean", "exit_code": 0, "summary": "clean: 2/3 ranks present"},
               model={"rows": rows, "indicators": [], "expected_ranks": [0, 1, 2], "present_ranks": [0, 1],
                      "missing_ranks": [2], "per_rank_timelines": {}},
               fleet={"ranks": [fact(0, 2 * GIB), fact(1, 30 * GIB)], "outlier_ranks": [OUTLIER], "coverage": COVERAGE,
                      "regression": None} if fleet else None)
    return JobDocument.from_data(doc, name=f"{job_id}/model.json")


def row_of(doc: JobDocument) -> FleetRow:
    return row_from_document(doc, status=JobStatus.DIAGNOSED, report="r.html")


def test_a_row_carries_outliers_and_coverage_through_fleet_json() -> None:
    row = row_of(document())
    assert row.outlier_ranks == (OUTLIER,) and row.coverage == COVERAGE
    data = orjson.loads(orjson.dumps(row.as_json()))
    assert data["outlier_ranks"] == [OUTLIER] and data["coverage"] == COVERAGE and "rank_rows" not in data
    assert FleetRow.from_json(data) == row


def test_rows_without_fleet_facts() -> None:
    row = row_of(document(fleet=False))
    assert row.outlier_ranks == () and row.coverage is None
    older = {key: value for key, value in row.as_json().items() if key not in ("outlier_ranks", "coverage")}
    assert FleetRow.from_json(older) == row  # a fleet.json written before these fields
    table = rank_table([row])
    assert table[list(FACT_COLUMNS)].isna().all().all() and table["outlier"].isna().all()


def test_rank_table_holds_facts_and_the_outlier_flag() -> None:
    table = rank_table([row_of(document())])
    assert tuple(table.columns) == RANK_COLUMNS
    assert table["outlier"].tolist() == [False, True, False]  # the missing rank is no outlier
    assert table["host"].tolist()[:2] == ["node-0", "node-1"] and table["host"].isna().tolist() == [False, False, True]
    assert table["peak_reserved_bytes"].tolist()[:2] == [2 * GIB, 30 * GIB]
    assert table.loc[2, ["device_id", "peak_device_used_bytes", "device_total_bytes"]].isna().all()
    assert {name: str(table[name].dtype) for name in ("host", "device_id", "device_total_bytes", "outlier")} == {
        "host": "string", "device_id": "Int64", "device_total_bytes": "Int64", "outlier": "boolean"}


def parquet_round_trip(table: pd.DataFrame) -> pd.DataFrame:
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    return pd.read_parquet(io.BytesIO(buffer.getvalue()))


