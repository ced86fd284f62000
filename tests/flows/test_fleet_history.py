"""Thirty nights of a 40-job fleet replayed with ``--as-of``: the planted problems are found.

Planted: three job names whose last run regresses (peak reserved 1.6x), one bad host whose
ranks raise a critical alert in every job that runs on it, two job names with one rank far
above its peers every night, one run that loses a rank. Everything else is quiet except a few
scattered alerts (the fleet's own rate). Every planted problem must be found, with at most
one false finding among regressions, suspect hosts, outlier ranks and lost ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.parameters import AuditParameters
from tests import builders as b

NIGHTS, JOBS, HOSTS = 30, 40, 20
FIRST_NIGHT = datetime(2026, 10, 1, 2, 0, tzinfo=UTC)
REGRESSED = {"train-05", "train-17", "train-29"}  # on the last night
BAD_HOST = "node-13"
OUTLIERS = {"train-33": 6, "train-34": 2}  # job name -> the rank far above its peers, every night
LOSES_RANK = ("train-39", NIGHTS - 1)  # (job name, night) losing rank 3


def job_name(k: int) -> str:
    return f"train-{k:02d}"


def samples_of(k: int, night: int) -> Callable[[int], Sequence[b.Sample]]:
    """Five samples per rank; a name's level is steady from night to night (±1%)."""
    wobble = 1 + 0.01 * (((k * 7 + night * 13) % 5) - 2) / 2
    level = int((b.GIB + k * 64 * b.MIB) * wobble)
    if job_name(k) in REGRESSED and night == NIGHTS - 1:
        level = int(level * 1.6)

    def ranks(rank: int) -> Sequence[b.Sample]:
        base = level + (6 * b.GIB if OUTLIERS.get(job_name(k)) == rank else 0)
        return b.ramp(5, base=base + rank * 16 * b.MIB)

    return ranks


def write_night(root: Path, night: int) -> None:
    day = (FIRST_NIGHT + timedelta(days=night)).date()
    for k in range(JOBS):
        world = 8 if job_name(k) in OUTLIERS else 4
        hosts = {rank: f"node-{(4 * k + rank + 7 * night) % HOSTS:02d}" for rank in range(world)}
        on_bad = [rank for rank, host in hosts.items() if host == BAD_HOST]
        scattered = (night * JOBS + k) % 17 == 0 and not on_bad
        alerting = set(on_bad) | ({k % world} if scattered else set())

        def alerts(rank: int, alerting: set[int] = alerting) -> Sequence[b.Alert]:
            return (b.Alert(1.0, "critical", "Memory usage above 95%"),) if rank in alerting else ()

        missing = (3,) if (job_name(k), night) == LOSES_RANK else ()
        b.write_multi_rank_job(root / "jobs" / f"{job_name(k)}-{day.isoformat()}", world_size=world,
                               samples=samples_of(k, night), job_id=f"{job_name(k)}-{day.isoformat()}",
                               host_of=hosts.__getitem__, alerts_of=alerts, missing_ranks=missing)


def name_of(job_id: str) -> str:
    return job_id.rsplit("-", 3)[0]


@pytest.mark.usefixtures("prefect_api")
def test_thirty_nights_find_every_planted_problem(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    found: dict[str, set[Any]] = {"regressions": set(), "suspects": set(), "outliers": set(), "lost": set()}
    fleet: dict[str, Any] = {}
    for night in range(NIGHTS):
        write_night(root, night)
        as_of = FIRST_NIGHT + timedelta(days=night, hours=1)
        result = nightly_audit(AuditParameters(storage=str(root), as_of=as_of, workers=2))
        assert result["summary"]["diagnosed"] == JOBS and result["summary"]["skipped"] == JOBS * night
        fleet = orjson.loads((root / "reports" / "fleet.json").read_bytes())
        found["regressions"] |= {item["job_name"] for item in fleet["regressions"]}
        found["suspects"] |= {item["host"] for item in fleet["suspect_hosts"]}
        for job in fleet["jobs"]:
            found["outliers"] |= {(name_of(job["job_id"]), item["rank"]) for item in job["outlier_ranks"]}
            if job["missing_ranks"]:
                found["lost"].add((name_of(job["job_id"]), tuple(job["missing_ranks"])))
    planted = {"regressions": REGRESSED, "suspects": {BAD_HOST}, "outliers": set(OUTLIERS.items()),
               "lost": {(LOSES_RANK[0], (3,))}}
    missed = {kind: planted[kind] - found[kind] for kind in planted if planted[kind] - found[kind]}
    false = {kind: found[kind] - planted[kind] for kind in planted if found[kind] - planted[kind]}
    print(f"found: {found}\nfalse: {false}")
    assert not missed
    assert sum(len(items) for items in false.values()) <= 1

    # one history file per night, in its partition; DuckDB reads them all
    files = sorted((root / "reports" / "history").glob("date=*/*.parquet"))
    assert len(files) == NIGHTS
    ((count, jobs),) = duckdb.sql(f"select count(*), count(distinct job_id) from read_parquet("
                                  f"'{root}/reports/history/*/*.parquet', hive_partitioning = true)").fetchall()
    ranks = sum(8 if name in OUTLIERS else 4 for name in map(job_name, range(JOBS)))
    assert jobs == NIGHTS * JOBS and count == ranks * NIGHTS  # a row per expected rank and run, a lost one too
    assert fleet["coverage"]["present_ranks"] == fleet["coverage"]["expected_ranks"] - 1
    assert len(fleet["trends"]) == NIGHTS and fleet["trends"][-1]["jobs"] == JOBS

    # the index shows them: its sections name the regressed jobs and the bad host
    index = (root / "reports" / "index.html").read_text()
    regressions = index[index.index("<h2>Regressions</h2>"):index.index("<h2>Suspect hosts and devices</h2>")]
    suspects = index[index.index("<h2>Suspect hosts and devices</h2>"):index.index("<h2>Coverage</h2>")]
    assert all(name in regressions for name in REGRESSED) and BAD_HOST in suspects

    # the last night's regressions reach the jobs' own model.json and report
    last_day = (FIRST_NIGHT + timedelta(days=NIGHTS - 1)).date().isoformat()
    document = orjson.loads((root / "reports" / f"train-05-{last_day}" / "model.json").read_bytes())
    assert document["fleet"]["regression"]["status"] == "regression"
    assert document["generated_at"].startswith(last_day)
    report = (root / "reports" / f"train-05-{last_day}" / "report.html").read_text()
    assert "<h2>Compared with earlier runs</h2>" in report and "regression" in report

    # replaying the last night adds no row: every job is unchanged
    again = nightly_audit(AuditParameters(storage=str(root), as_of=FIRST_NIGHT + timedelta(days=NIGHTS - 1, hours=2),
                                          workers=2))
    assert again["summary"]["diagnosed"] == 0
    assert len(sorted((root / "reports" / "history").glob("date=*/*.parquet"))) == NIGHTS
