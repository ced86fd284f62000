"""Growth and headroom through a real audit: a leaking rank is in model.json's ``fleet.growth``, the
history, fleet.json, fleet.parquet and metrics.prom, and stays in fleet.parquet and fleet.json on the
next night, when its job is skipped as unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import orjson
import pytest

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.parameters import AuditParameters
from tests import builders as b

pytestmark = pytest.mark.usefixtures("prefect_api")
LEAKING_RANK = 1
FIRST_NIGHT = datetime(2026, 10, 1, 2, 0, tzinfo=UTC)


def fleet(root: Path) -> None:
    b.write_multi_rank_job(root / "jobs" / "leaky", world_size=4, job_id="leaky", samples=lambda rank: b.training(
        rank, leak_bytes_per_hour=4 * b.GIB if rank == LEAKING_RANK else 0.0))
    b.write_multi_rank_job(root / "jobs" / "steady", world_size=4, job_id="steady",
                           samples=lambda rank: b.training(rank, leak_bytes_per_hour=0.0))
    b.write_multi_rank_job(root / "jobs" / "short", world_size=2, job_id="short", samples=5)


def leaks_in_fleet_parquet(root: Path) -> list[tuple[str, int]]:
    return duckdb.sql(f"select job_id, rank from read_parquet('{root}/reports/fleet.parquet') where leak "
                      "order by job_id, rank").fetchall()


def test_a_leak_is_recorded_everywhere_and_kept_when_its_job_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    fleet(root)
    first = nightly_audit(AuditParameters(storage=str(root), as_of=FIRST_NIGHT, workers=1))
    assert first["summary"]["diagnosed"] == 3

    growth = orjson.loads((root / "reports" / "leaky" / "model.json").read_bytes())["fleet"]["growth"]
    assert [figure["leak"] for figure in growth] == [rank == LEAKING_RANK for rank in range(4)]
    leak = growth[LEAKING_RANK]
    assert leak["reserved_bytes_per_hour"] == pytest.approx(4 * b.GIB, rel=0.1)
    short = orjson.loads((root / "reports" / "short" / "model.json").read_bytes())["fleet"]["growth"]
    assert {figure["gap"] for figure in short} == {"too_few_samples"}  # a reason, never a false finding

    history = duckdb.sql(f"select job_id, rank from read_parquet('{root}/reports/history/*/*.parquet', "
                         "hive_partitioning = true, union_by_name = true) where leak").fetchall()
    assert history == [("leaky", LEAKING_RANK)]
    assert leaks_in_fleet_parquet(root) == [("leaky", LEAKING_RANK)]
    rows = {row["job_id"]: row for row in orjson.loads((root / "reports" / "fleet.json").read_bytes())["jobs"]}
    assert rows["leaky"]["leaks"] == 1 and rows["steady"]["leaks"] == 0
    for source in (f"'{root}/reports/fleet.parquet'", f"'{root}/reports/history/*/*.parquet'"):  # headroom, per rank
        headroom = duckdb.sql(f"select rank, used_percent, unused_gib_hours, peak_device_used_bytes, "
                              f"device_total_bytes, duration_ns from read_parquet({source}) "
                              "where job_id = 'steady' order by rank").fetchall()
        assert [rank for rank, *_ in headroom] == [0, 1, 2, 3]
        for _, percent, unused, peak, total, duration in headroom:
            assert percent == pytest.approx(peak / total * 100)
            assert unused == pytest.approx((total - peak) / 2**30 * duration / 3.6e12)
    assert 'stormwatch_job_leaking_ranks{job_name="leaky"} 1' in (root / "reports" / "metrics.prom").read_text()

    again = nightly_audit(AuditParameters(storage=str(root), as_of=FIRST_NIGHT + timedelta(days=1), workers=1))
    assert again["summary"]["diagnosed"] == 0 and again["summary"]["skipped"] == 3
    assert leaks_in_fleet_parquet(root) == [("leaky", LEAKING_RANK)]
    rows = {row["job_id"]: row for row in orjson.loads((root / "reports" / "fleet.json").read_bytes())["jobs"]}
    assert rows["leaky"]["leaks"] == 1
    assert (root / "reports" / "index.html").read_text().count("Memory leak") >= 1
