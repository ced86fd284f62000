"""What an audit shows, counts and asks the notify step to look at, from the plan's columns."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from stormwatch.outputs.fleet import JobStatus
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.severity import FailOn
from stormwatch.tasks.fleet_view import fleet_view, notify_candidates
from stormwatch.tasks.plan import PreviousFleet, plan_audit
from stormwatch.tasks.storage.inventory import Inventory
from tests.tasks.test_plan import JOB, OPTIONS, make_row

NOW = datetime(2026, 12, 1, 2, tzinfo=UTC)


def test_an_old_never_notified_run_is_looked_at_again_without_its_row() -> None:
    row = make_row(committed_at="2026-11-01T02:00:00+00:00", diagnosed_at="2026-11-01T02:00:00+00:00")
    previous = PreviousFleet.of_rows([row])
    plan = plan_audit(Inventory((JOB,), (), frozenset({"job-1"})), previous, options=OPTIONS)
    plan = dataclasses.replace(plan, current=plan.current.assign(row=None))  # outside the window: row not read
    view = fleet_view(plan, [], audit_time=NOW, days=7, name_of=str, fail_on=FailOn.NEVER)
    assert view.shown == [] and list(view.counted["status"]) == [JobStatus.SKIPPED.value]
    (candidate,) = notify_candidates(plan, [])
    assert candidate.job_id == "job-1" and candidate.notified_at is None
    assert candidate.committed_at == row.committed_at and candidate.verdict is VerdictStatus.CRITICAL


def test_a_notified_clean_run_outside_the_window_costs_nothing() -> None:
    row = make_row(verdict=VerdictStatus.CLEAN, committed_at="2026-11-01T02:00:00+00:00",
                   notified_at="2026-11-01T02:00:00+00:00", diagnosed_at="2026-11-01T02:00:00+00:00")
    plan = plan_audit(Inventory((JOB,), (), frozenset({"job-1"})), PreviousFleet.of_rows([row]), options=OPTIONS)
    view = fleet_view(plan, [], audit_time=NOW, days=7, name_of=str, fail_on=FailOn.NEVER)
    assert notify_candidates(plan, []) == [] and view.shown == []
