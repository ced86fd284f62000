"""Which jobs an audit diagnoses, decided from one inventory and the previous fleet."""

from __future__ import annotations

import dataclasses
import io

import pandas as pd
import pytest

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.load.tree import Entry
from stormwatch.outputs.fleet import FleetRow, JobStatus, rank_table
from stormwatch.outputs.verdict import ExitCode, VerdictStatus
from stormwatch.severity import FailOn
from stormwatch.tasks.audit_job import AuditOptions
from stormwatch.tasks.plan import PreviousFleet, plan_audit
from stormwatch.tasks.storage.inventory import Inventory, JobInputs

OPTIONS = AuditOptions(diagnose=DiagnoseOptions())
JOB = JobInputs("job-1", (Entry("rank_0/events.jsonl", 100, "v1"),))


def make_row(**changes: object) -> FleetRow:
    row = FleetRow(job_id="job-1", status=JobStatus.DIAGNOSED, verdict=VerdictStatus.CRITICAL, exit_code=0,
                   ranks_present=1, input_fingerprint=JOB.fingerprint, options=OPTIONS.diagnose.recorded(),
                   report="job-1/report.html", rank_rows=({"rank": 0, "samples": 5, "availability": "present"},))
    return dataclasses.replace(row, **changes)


def previous_of(*rows: FleetRow) -> PreviousFleet:
    return PreviousFleet({row.job_id: row for row in rows}, rank_table(rows))


CASES = [
    ("unchanged", make_row(), Inventory((JOB,), (), frozenset({"job-1"})), OPTIONS, False),
    ("unchanged twice", make_row(status=JobStatus.SKIPPED), Inventory((JOB,), (), frozenset({"job-1"})), OPTIONS,
     False),
    ("new job", None, Inventory((JOB,), (), frozenset()), OPTIONS, True),
    ("inputs changed", make_row(input_fingerprint="sha256:old"), Inventory((JOB,), (), frozenset({"job-1"})),
     OPTIONS, True),
    ("other preset", make_row(), Inventory((JOB,), (), frozenset({"job-1"})),
     AuditOptions(diagnose=DiagnoseOptions.parse(preset="high")), True),
    ("older fleet.json without options", make_row(options=None), Inventory((JOB,), (), frozenset({"job-1"})),
     OPTIONS, True),
    ("failed last time", make_row(status=JobStatus.FAILED), Inventory((JOB,), (), frozenset({"job-1"})), OPTIONS,
     True),
    ("reports deleted", make_row(), Inventory((JOB,), (), frozenset()), OPTIONS, True),
    ("forced", make_row(), Inventory((JOB,), (), frozenset({"job-1"})), AuditOptions(diagnose=DiagnoseOptions(),
                                                                                     force=True),
     True),
]


@pytest.mark.parametrize(("name", "row", "inventory", "options", "diagnosed"), CASES, ids=[c[0] for c in CASES])
def test_plan(name: str, row: FleetRow | None, inventory: Inventory, options: AuditOptions, diagnosed: bool) -> None:
    previous = previous_of(row) if row is not None else PreviousFleet({})
    plan = plan_audit(inventory, previous, options=options)
    assert [job.job_id for job in plan.diagnose] == (["job-1"] if diagnosed else [])
    assert [kept.job_id for kept in plan.unchanged] == ([] if diagnosed else ["job-1"])


def test_an_unchanged_job_keeps_its_row_and_ranks_with_this_runs_exit_code() -> None:
    options = AuditOptions(diagnose=DiagnoseOptions.parse(fail_on="warning"))
    row = make_row(options=options.diagnose.recorded())
    from_fleet_json = dataclasses.replace(row, rank_rows=())  # fleet.json rows hold no rank rows
    previous = PreviousFleet({"job-1": from_fleet_json}, rank_table([row]))
    plan = plan_audit(Inventory((JOB,), (), frozenset({"job-1"})), previous, options=options)
    (kept,) = plan.unchanged
    assert kept.status is JobStatus.SKIPPED and kept.verdict is VerdictStatus.CRITICAL
    assert kept.exit_code == ExitCode.FINDINGS and options.diagnose.fail_on is FailOn.WARNING
    assert plan.unchanged_ranks is not None and list(plan.unchanged_ranks["job_id"]) == ["job-1"]


def test_a_row_from_a_pending_commit_brings_its_own_ranks_never_twice() -> None:
    committed = make_row(rank_rows=({"rank": 0, "samples": 9, "availability": "present"},))
    stale = rank_table([make_row()])  # fleet.parquet still holds the ranks of the diagnosis before
    plan = plan_audit(Inventory((JOB,), (), frozenset({"job-1"})), PreviousFleet({"job-1": committed}, stale),
                      options=OPTIONS)
    (kept,) = plan.unchanged
    assert kept.rank_rows == committed.rank_rows and plan.unchanged_ranks is None


def test_a_job_whose_ranks_left_fleet_parquet_is_diagnosed_again() -> None:
    from_fleet_json = make_row(rank_rows=())  # fleet.json rows hold no rank rows
    plan = plan_audit(Inventory((JOB,), (), frozenset({"job-1"})), PreviousFleet({"job-1": from_fleet_json}, None),
                      options=OPTIONS)
    assert [job.job_id for job in plan.diagnose] == ["job-1"]


@pytest.mark.parametrize(("fleet_json", "fleet_parquet"), [(b"{not json", None), (b"[1, 2]", b"PAR1 torn")])
def test_damaged_previous_outputs_count_as_absent(fleet_json: bytes, fleet_parquet: bytes | None) -> None:
    previous = PreviousFleet.from_bytes(fleet_json, fleet_parquet)
    assert previous.rows == {} and previous.ranks is None


def test_previous_outputs_round_trip() -> None:
    row = make_row()
    buffer = io.BytesIO()
    rank_table([row]).to_parquet(buffer, index=False)
    import orjson

    from stormwatch.outputs.fleet import fleet_document
    document = fleet_document([row], generated_at=pd.Timestamp("2026-01-01", tz="UTC").to_pydatetime(), storage="x")
    previous = PreviousFleet.from_bytes(orjson.dumps(document), buffer.getvalue())
    assert previous.rows["job-1"] == dataclasses.replace(row, rank_rows=())
    assert previous.ranks is not None and list(previous.ranks["rank"]) == [0]


REPAIRS = {"reports deleted"}  # diagnosed only to rewrite outputs: its inputs and options are those committed


@pytest.mark.parametrize(("name", "row", "inventory", "options", "diagnosed"), CASES, ids=[c[0] for c in CASES])
def test_only_a_job_diagnosed_for_its_outputs_alone_is_a_repair(name: str, row: FleetRow | None,
                                                                inventory: Inventory, options: AuditOptions,
                                                                diagnosed: bool) -> None:
    committed = None if row is None else dataclasses.replace(row, history_key="history/date=2026-12-01/a.parquet")
    previous = previous_of(committed) if committed is not None else PreviousFleet({})
    plan = plan_audit(inventory, previous, options=options)
    assert dict(plan.repairs) == ({"job-1": "history/date=2026-12-01/a.parquet"} if name in REPAIRS else {})
    if row is not None:  # committed before rows named their history file: never taken for a repair
        assert not plan_audit(inventory, previous_of(row), options=options).repairs


@pytest.mark.parametrize(("listed", "diagnosed"), [
    ({"job-1/model.json": 120, "job-1/report.html": 900}, False),
    ({"job-1/model.json": 64, "job-1/report.html": 900}, True),  # cut short
    ({"job-1/model.json": 0, "job-1/report.html": 900}, True),  # emptied
], ids=["whole", "truncated model.json", "zero-byte model.json"])
def test_a_report_file_whose_size_is_not_the_committed_one_is_diagnosed_again(
        listed: dict[str, int], diagnosed: bool) -> None:
    row = make_row(output_bytes={"model.json": 120, "report.html": 900})
    inventory = Inventory((JOB,), (), frozenset({"job-1"}), listed)
    plan = plan_audit(inventory, previous_of(row), options=OPTIONS)
    assert [job.job_id for job in plan.diagnose] == (["job-1"] if diagnosed else [])
    assert plan.damaged == ((f"job-1/model.json: {listed['job-1/model.json']} bytes where 120 were written; "
                             "damaged, so the job is diagnosed again",) if diagnosed else ())
    repaired = plan_audit(inventory, previous_of(dataclasses.replace(row, history_key="history/a.parquet")),
                          options=OPTIONS).repairs
    assert dict(repaired) == ({"job-1": "history/a.parquet"} if diagnosed else {})
