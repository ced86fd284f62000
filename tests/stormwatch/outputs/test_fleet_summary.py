"""fleet.json's bounded ``jobs``: per job name its newest run, and every run not diagnosed."""

from __future__ import annotations

import pytest

from stormwatch.history.job_names import JobNamePattern
from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.outputs.fleet_summary import latest_rows
from stormwatch.outputs.verdict import VerdictStatus

NAMES = JobNamePattern()


def row(job_id: str, at: str | None, status: JobStatus = JobStatus.DIAGNOSED) -> FleetRow:
    verdict = VerdictStatus.CLEAN if status is JobStatus.DIAGNOSED else None
    return FleetRow(job_id=job_id, status=status, verdict=verdict, diagnosed_at=at)


@pytest.mark.parametrize(("rows", "listed"), [
    ([], []),
    ([row("a-1", "2026-11-01T02:00:00"), row("a-2", "2026-11-02T02:00:00")], ["a-2"]),
    # diagnosed later wins, whatever the run id says
    ([row("a-9", "2026-11-01T02:00:00"), row("a-10", "2026-11-03T02:00:00")], ["a-10"]),
    # a failed run stays listed (nothing else says why it failed), beside the name's newest
    ([row("a-1", "2026-11-01T02:00:00"), row("a-2", None, JobStatus.FAILED), row("a-3", "2026-11-03T02:00:00")],
     ["a-2", "a-3"]),
    ([row("bad id", None, JobStatus.REFUSED), row("b-1", "2026-11-01T02:00:00")], ["b-1", "bad id"]),
    ([row("a-1", "2026-11-01T02:00:00"), row("b-1", "2026-11-01T02:00:00")], ["a-1", "b-1"]),
])
def test_latest_rows(rows: list[FleetRow], listed: list[str]) -> None:
    assert [item.job_id for item in latest_rows(rows, name_of=NAMES.name_of)] == listed
