"""Which jobs an audit diagnoses, decided from one inventory and the previous fleet."""

from __future__ import annotations

import dataclasses
import io
from datetime import UTC, datetime

import orjson
import pyarrow as pa
import pytest

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.load.tree import Entry
from stormwatch.outputs.fleet import FleetRow, JobStatus, rank_table
from stormwatch.outputs.verdict import ExitCode, VerdictStatus
from stormwatch.severity import FailOn
from stormwatch.tasks.audit_job import AuditOptions
from stormwatch.tasks.commits import Commit, PendingCommits
from stormwatch.tasks.plan import PreviousFleet, migrated_rows, plan_audit, unchanged_exit_code
from stormwatch.tasks.storage.inventory import Inventory, JobInputs

OPTIONS = AuditOptions(diagnose=DiagnoseOptions())
JOB = JobInputs("job-1", (Entry("rank_0/events.jsonl", 100, "v1"),))


def make_row(**changes: object) -> FleetRow:
    row = FleetRow(job_id="job-1", status=JobStatus.DIAGNOSED, verdict=VerdictStatus.CRITICAL, exit_code=0,
                   ranks_present=1, input_fingerprint=JOB.fingerprint, options=OPTIONS.diagnose.recorded(),
                   report="job-1/report.html", rank_rows=({"rank": 0, "samples": 5, "availability": "present"},))
    return dataclasses.replace(row, **changes)


def previous_of(*rows: FleetRow) -> PreviousFleet:
    return PreviousFleet.of_rows(rows)


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
    previous = previous_of(row) if row is not None else PreviousFleet()
    plan = plan_audit(inventory, previous, options=options)
    assert [job.job_id for job in plan.diagnose] == (["job-1"] if diagnosed else [])
    assert list(plan.kept["job_id"]) == ([] if diagnosed else ["job-1"])


def test_an_unchanged_job_keeps_its_row_and_ranks_with_this_runs_exit_code() -> None:
    options = AuditOptions(diagnose=DiagnoseOptions.parse(fail_on="warning"))
    row = make_row(options=options.diagnose.recorded())
    plan = plan_audit(Inventory((JOB,), (), frozenset({"job-1"})), previous_of(row), options=options)
    (kept,) = plan.unchanged_rows(options.diagnose.fail_on)
    assert kept.status is JobStatus.SKIPPED and kept.verdict is VerdictStatus.CRITICAL
    assert kept.exit_code == ExitCode.FINDINGS and options.diagnose.fail_on is FailOn.WARNING
    assert kept.rank_rows == row.rank_rows
    assert unchanged_exit_code(plan, options.diagnose.fail_on) == ExitCode.FINDINGS


def test_a_row_from_a_pending_commit_wins_over_the_stored_run() -> None:
    stored = make_row(committed_at="2026-12-01T01:00:00+00:00")
    newer = make_row(committed_at="2026-12-01T02:00:00+00:00",
                     rank_rows=({"rank": 0, "samples": 9, "availability": "present"},))
    commit = Commit(key="k", audit_id="a", audit_time=datetime(2026, 12, 1, tzinfo=UTC),
                    committed_at=datetime(2026, 12, 1, 2, tzinfo=UTC), history_key="h", rows=(newer,),
                    history=pa.table({}))
    previous = PreviousFleet.of_rows([stored], PendingCommits((commit,)))
    plan = plan_audit(Inventory((JOB,), (), frozenset({"job-1"})), previous, options=OPTIONS)
    (kept,) = plan.unchanged_rows(FailOn.NEVER)
    assert kept.rank_rows == newer.rank_rows and kept.committed_at == newer.committed_at


def test_a_version_1_row_whose_ranks_left_fleet_parquet_is_diagnosed_again() -> None:
    document = {"schema_version": 1, "jobs": [make_row().as_json()]}
    assert migrated_rows(orjson.dumps(document), None) == []
    buffer = io.BytesIO()
    rank_table([make_row()]).to_parquet(buffer, index=False)
    (row,) = migrated_rows(orjson.dumps(document), buffer.getvalue())
    assert row.job_id == "job-1" and [rank["rank"] for rank in row.rank_rows] == [0]
    plan = plan_audit(Inventory((JOB,), (), frozenset({"job-1"})), PreviousFleet.of_rows([row]), options=OPTIONS)
    assert not plan.diagnose


@pytest.mark.parametrize(("fleet_json", "fleet_parquet"), [(b"{not json", None), (b"[1, 2]", b"PAR1 torn")])
def test_damaged_previous_outputs_count_as_absent(fleet_json: bytes, fleet_parquet: bytes | None) -> None:
    assert migrated_rows(fleet_json, fleet_parquet) == []


def test_a_version_2_fleet_json_is_not_read_as_rows() -> None:
    document = {"schema_version": 2, "jobs": [make_row().as_json()]}
    assert migrated_rows(orjson.dumps(document), None) == []


REPAIRS = {"reports deleted"}  # diagnosed only to rewrite outputs: its inputs and options are those committed


@pytest.mark.parametrize(("name", "row", "inventory", "options", "diagnosed"), CASES, ids=[c[0] for c in CASES])
def test_only_a_job_diagnosed_for_its_outputs_alone_is_a_repair(name: str, row: FleetRow | None,
                                                                inventory: Inventory, options: AuditOptions,
                                                                diagnosed: bool) -> None:
    committed = None if row is None else dataclasses.replace(row, history_key="history/date=2026-12-01/a.parquet")
    previous = previous_of(committed) if committed is not None else PreviousFleet()
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
