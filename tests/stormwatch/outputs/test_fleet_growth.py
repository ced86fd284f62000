"""Growth and headroom in fleet.json (issue 30): each row's ``used_percent``, ``unused_gib_hours``, ``leaks`` and
``leak``, the fleet's bounded ``headroom``, and the leaking runs in ``attention``; and in metrics.prom: the
fleet's unused GPU memory, each job name's leaking ranks and capacity warning, with bounded labels."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime

import orjson
import pandas as pd
import pytest

from stormwatch.growth.figures import GrowthGap
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.fleet import FleetRow, JobStatus, row_from_document
from stormwatch.outputs.fleet_metrics import MetricsLimits, fleet_metrics_text
from stormwatch.outputs.fleet_summary import MAX_UNDER_HALF_LISTED, counted_frame, headroom, summary_document
from stormwatch.outputs.verdict import VerdictStatus
from tests.prometheus_parts import openmetrics_families, promtool_check
from tests.reports.growth_builders import HOUR_NS, capacity_entry, gap, leaking, steady
from tests.stormwatch.outputs.test_fleet import GIB, document

AT = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def grown(figures: list[object] | None, *, fleet: bool = True) -> JobDocument:
    """The test_fleet document (ranks 0 and 1 use 3 and 31 GiB of 80 GiB) with ``fleet.growth`` set."""
    base = document(fleet=fleet)
    if not fleet or figures is None:
        return base
    facts = dataclasses.replace(base.fleet.facts, growth=tuple(figures))  # type: ignore[union-attr,arg-type]
    return dataclasses.replace(base, fleet=dataclasses.replace(base.fleet, facts=facts))  # type: ignore[arg-type]


def test_a_row_carries_its_headroom_and_its_leak_soonest_to_run_out() -> None:
    slow, fast = leaking(0, per_hour_bytes=300 * 2**20, after_s=40 * 3600), leaking(1, after_s=3.4 * 3600)
    row = row_from_document(grown([slow, fast]), status=JobStatus.DIAGNOSED, report="r.html")
    assert row.used_percent == pytest.approx(31 / 80 * 100)
    assert row.unused_gib_hours == pytest.approx((77 + 49) * 2)  # 2 h each
    assert row.leaks == 2
    assert row.leak == {"rank": 1, "host": "node-1", "device_id": 1, "bytes_per_hour": 1.2 * GIB,
                        "device_total_bytes": 80 * GIB, "capacity_after_start_s": 3.4 * 3600}
    data = orjson.loads(orjson.dumps(row.as_json()))
    assert FleetRow.from_json(data) == row


@pytest.mark.parametrize(("figures", "fleet", "leaks", "used"), [
    pytest.param(None, True, None, 31 / 80 * 100, id="written-before-growth: headroom without durations"),
    pytest.param([steady(0), gap(1, GrowthGap.TOO_SHORT)], True, 0, 31 / 80 * 100, id="no-leak"),
    pytest.param(None, False, None, None, id="no-fleet-member"),
])
def test_rows_without_a_leak_or_without_growth(figures: list[object] | None, fleet: bool, leaks: int | None,
                                               used: float | None) -> None:
    row = row_from_document(grown(figures, fleet=fleet), status=JobStatus.DIAGNOSED, report="r.html")
    assert row.leaks == leaks and row.leak is None
    assert row.used_percent == (None if used is None else pytest.approx(used))
    older = {key: value for key, value in row.as_json().items()
             if key not in ("used_percent", "unused_gib_hours", "leaks", "leak")}
    assert FleetRow.from_json(older).leaks is None  # a fleet.json written before issue 30 still reads


def fleet_row(job_id: str, used: float | None, *, unused: float | None = 10.0, leaks: int | None = 0,
              verdict: VerdictStatus = VerdictStatus.CLEAN) -> FleetRow:
    return FleetRow(job_id=job_id, status=JobStatus.DIAGNOSED, verdict=verdict,
                    diagnosed_at=f"2026-12-01T01:{len(job_id):02d}:00+00:00", report=f"{job_id}/report.html",
                    used_percent=used, unused_gib_hours=unused, leaks=leaks)


def test_the_fleets_headroom_sums_unused_gib_hours_and_lists_jobs_under_half_least_used_first() -> None:
    rows = [fleet_row("a-1", 12.5, unused=100.0), fleet_row("b-1", 49.9, unused=50.5), fleet_row("c-1", 50.0),
            fleet_row("cpu-1", None, unused=None)]
    assert headroom(rows) == {
        "unused_gib_hours": 160.5, "jobs_counted": 3, "under_percent": 50.0, "jobs_under_half_count": 2,
        "jobs_under_half": [{"job_id": "a-1", "used_percent": 12.5, "report": "a-1/report.html"},
                            {"job_id": "b-1", "used_percent": 49.9, "report": "b-1/report.html"}]}


def test_the_headroom_member_stays_bounded_at_10_000_jobs() -> None:
    rows = [fleet_row(f"job-{index:05d}", index / 250) for index in range(10_000)]
    member = headroom(rows)
    assert member["jobs_under_half_count"] == 10_000 * 50 // 40 // 10 * 8  # 0 .. 49.996 %: 8 in 10 of them
    assert len(member["jobs_under_half"]) == MAX_UNDER_HALF_LISTED
    assert len(orjson.dumps(member)) < 10_000


def test_fleet_json_has_the_headroom_member_and_leaking_runs_need_attention() -> None:
    rows = [fleet_row("leaky-1", 70.0, leaks=2), fleet_row("quiet-1", 20.0),
            fleet_row("bad-1", 90.0, verdict=VerdictStatus.CRITICAL, leaks=1)]
    doc = summary_document(rows, name_of=lambda job_id: job_id.rsplit("-", 1)[0],
                           counted=counted_frame(rows, name_of=str, night=date(2026, 12, 1)), files={},
                           generated_at=AT, storage="mem://", window_days=7, since=date(2026, 11, 25))
    assert doc["headroom"]["jobs_under_half_count"] == 1
    assert [entry["job_id"] for entry in doc["attention"]] == ["bad-1", "leaky-1"]  # critical, then the leak
    assert doc["attention"][1]["leaks"] == 2
    assert {job["job_id"]: job["used_percent"] for job in doc["jobs"]} == {"bad-1": 90.0, "leaky-1": 70.0,
                                                                          "quiet-1": 20.0}


def _metrics_document(**changes: object) -> dict[str, object]:
    latest = {name: {"job_id": f"{name}-1", "verdict": "clean", "diagnosed_at": "2026-12-01T01:00:00+00:00",
                     "night": "2026-12-01"} for name in ("leaky", "quiet", "llama-7b")}
    base = {"generated_at": AT.isoformat(), "summary": {"jobs": 3, "diagnosed": 3, "clean": 3},
            "latest": latest, "jobs": [{"job_id": "leaky-1", "leaks": 2}, {"job_id": "quiet-1", "leaks": 0},
                                       {"job_id": "llama-7b-1"}],
            "capacity": [capacity_entry(job_name="llama-7b", job_id="llama-7b-1")],
            "headroom": {"unused_gib_hours": 1234.5, "jobs_counted": 3, "jobs_under_half_count": 1,
                         "jobs_under_half": []}}
    return {**base, **changes}


def _per_job(text: str, name: str) -> dict[str, float]:
    family = openmetrics_families(text).get(name)
    return {} if family is None else {sample.labels["job_name"]: sample.value for sample in family.samples}


def test_metrics_hold_unused_gib_hours_leaking_ranks_and_capacity_warnings() -> None:
    text = fleet_metrics_text(_metrics_document(), pd.DataFrame())
    checked = promtool_check(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    families = openmetrics_families(text)
    unused = families["stormwatch_fleet_unused_gpu_memory_byte_seconds"]
    assert unused.unit == "byte_seconds" and unused.samples[0].value == 1234.5 * 2**30 * 3600
    assert families["stormwatch_fleet_jobs_under_half_gpu_memory"].samples[0].value == 1
    assert _per_job(text, "stormwatch_job_leaking_ranks") == {"leaky": 2, "quiet": 0}  # llama-7b's: not measured
    assert _per_job(text, "stormwatch_job_capacity_warning") == {"leaky": 0, "quiet": 0, "llama-7b": 1}


def test_metrics_of_an_older_fleet_json_leave_the_new_families_out() -> None:
    older = {key: value for key, value in _metrics_document().items() if key not in ("capacity", "headroom", "jobs")}
    families = openmetrics_families(fleet_metrics_text(older, None))
    assert not {"stormwatch_fleet_unused_gpu_memory_byte_seconds", "stormwatch_fleet_jobs_under_half_gpu_memory",
                "stormwatch_job_leaking_ranks", "stormwatch_job_capacity_warning"} & set(families)


def test_the_new_per_job_metrics_keep_the_job_name_bound() -> None:
    text = fleet_metrics_text(_metrics_document(), None, limits=MetricsLimits(max_job_names=1))
    for name in ("stormwatch_job_capacity_warning", "stormwatch_job_verdict"):
        assert len(_per_job(text, name)) == 1
    assert "leaky-1" not in text  # job ids are never label values


def test_durations_reach_the_row_only_through_growth() -> None:
    figure = dataclasses.replace(steady(0), duration_ns=4 * HOUR_NS)
    row = row_from_document(grown([figure]), status=JobStatus.DIAGNOSED, report="r.html")
    assert row.unused_gib_hours == pytest.approx(77 * 4)  # rank 1 has no growth entry: no duration, no GiB·h
