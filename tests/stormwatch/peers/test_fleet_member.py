"""End to end: diagnose() writes the job's fleet facts beside the reference model, and fleet.parquet
flags the outlier rank."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pandas as pd

from stormwatch.diagnose import DiagnoseOptions, diagnose
from stormwatch.outputs.fleet import FleetRow, JobStatus, rank_table, row_from_document
from stormwatch.outputs.job_document import session_document
from tests.builders import GIB, MIB, Sample, ramp, write_multi_rank_job

HEAVY_RANK = 5


def samples(rank: int) -> list[Sample]:
    """Every rank ramps from 1 GiB; rank 5 also keeps 20 GiB of cached (reserved, unallocated) blocks."""
    slack = 20 * GIB if rank == HEAVY_RANK else 64 * MIB
    return ramp(8, base=GIB + rank * 16 * MIB, slack=slack)


def test_one_heavy_rank_of_eight_is_the_one_outlier(tmp_path: Path) -> None:
    write_multi_rank_job(tmp_path / "job", world_size=8, samples=samples, job_id="heavy")
    diagnosis = diagnose([tmp_path / "job"], job_id="heavy", source_name="heavy")
    document = orjson.loads(diagnosis.model_json())

    fleet = document["fleet"]
    assert set(fleet) == {"ranks", "outlier_ranks", "coverage", "regression", "growth"} and fleet["regression"] is None
    # eight samples a rank are too few to measure growth: a reason each, never a leak
    assert [(item["rank"], item["gap"], item["leak"]) for item in fleet["growth"]] == [
        (rank, "too_few_samples", False) for rank in range(8)]
    assert [fact["rank"] for fact in fleet["ranks"]] == list(range(8))
    heavy = fleet["ranks"][HEAVY_RANK]
    assert heavy["peak_reserved_bytes"] == GIB + HEAVY_RANK * 16 * MIB + 7 * 8 * MIB + 20 * GIB
    (outlier,) = fleet["outlier_ranks"]
    assert (outlier["rank"], outlier["metric"], outlier["value_bytes"]) == (
        HEAVY_RANK, "peak_reserved_bytes", heavy["peak_reserved_bytes"])
    assert outlier["median_bytes"] < 2 * GIB and outlier["robust_z"] > 3.5
    assert fleet["coverage"]["ranks_present_percent"] == 100.0 and fleet["coverage"]["sessions"] == 8

    # the fleet member only adds: every other member is the same bytes as a document without it
    plain = session_document(diagnosis.loaded, diagnosis.model, diagnosis.verdict, job_id="heavy", source="heavy",
                             fingerprint=document["input_fingerprint"], engine_version=document["engine_version"],
                             options=document["options"], fleet=None, generated_at=diagnosis.document.generated_at)
    assert plain.fleet is None and list(document)[-2:] == ["model", "fleet"]
    assert plain.to_json() == orjson.dumps({**document, "fleet": None})

    row = row_from_document(diagnosis.document, status=JobStatus.DIAGNOSED, report="heavy/report.html")
    assert row.outlier_ranks == (outlier,) and row.coverage == fleet["coverage"]
    assert FleetRow.from_json(orjson.loads(orjson.dumps(row.as_json()))) == row
    buffer = io.BytesIO()
    rank_table([row]).to_parquet(buffer, index=False)
    table = pd.read_parquet(io.BytesIO(buffer.getvalue()))
    assert table.loc[table["outlier"], "rank"].tolist() == [HEAVY_RANK]
    assert table["outlier"].notna().all()
    assert table["host"].tolist() == ["node-0"] * 8 and table["device_id"].tolist() == list(range(8))
    assert table.loc[HEAVY_RANK, "peak_reserved_bytes"] == heavy["peak_reserved_bytes"]
    assert (table["device_total_bytes"] == 80 * GIB).all()


def test_a_rank_filter_limits_the_fleet_facts(tmp_path: Path) -> None:
    write_multi_rank_job(tmp_path / "job", world_size=8, samples=samples, job_id="heavy")
    diagnosis = diagnose([tmp_path / "job"], job_id="heavy", source_name="heavy",
                         options=DiagnoseOptions(ranks="0-4"))
    fleet = diagnosis.document.fleet
    assert fleet is not None and [fact.rank for fact in fleet.facts.ranks] == [0, 1, 2, 3, 4]
    assert fleet.facts.outlier_ranks == () and fleet.facts.coverage.expected_ranks == 5


def test_an_empty_job_has_fleet_facts_without_ranks(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    fleet = diagnose([tmp_path / "job"], job_id="empty", source_name="empty").document.fleet
    assert fleet is not None and fleet.facts.ranks == () and fleet.facts.outlier_ranks == ()
    assert fleet.facts.coverage.ranks_present_percent is None
