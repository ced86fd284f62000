"""The alert policy's durations and bounds, and the run order that picks a job name's latest run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from stormwatch.tasks.notify.observations import RunMark
from stormwatch.tasks.notify.policy import AlertPolicy, parse_duration


@pytest.mark.parametrize(("raw", "expected"), [
    ("7d", timedelta(days=7)), ("36h", timedelta(hours=36)), ("90m", timedelta(minutes=90)),
    ("3600s", timedelta(hours=1)), ("1.5d", timedelta(hours=36)), ("3600", timedelta(hours=1)),
    ("P7D", timedelta(days=7)), ("PT12H", timedelta(hours=12)), (timedelta(days=2), timedelta(days=2)),
    (60, timedelta(minutes=1)),
])
def test_durations(raw: object, expected: timedelta) -> None:
    assert parse_duration(raw) == expected


@pytest.mark.parametrize("raw", ["", "soon", "7w", "d", "0", "-1d", 0, True])
def test_bad_durations(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(raw)


def test_policy_bounds() -> None:
    with pytest.raises(ValidationError):
        AlertPolicy(group_above=-1)
    with pytest.raises(ValidationError):
        AlertPolicy(repeat_interval=timedelta(0))
    with pytest.raises(ValidationError):
        AlertPolicy(job_name_pattern="no group")
    assert AlertPolicy(job_name_pattern=r"(\w+)-\d+").job_names().name_of("llama-7") == "llama"


@pytest.mark.parametrize(("earlier", "later"), [
    (RunMark(1, "z-run"), RunMark(2, "a-run")),  # start time first
    (RunMark(5, "train-9"), RunMark(5, "train-10")),  # then job ids, numbers as numbers
    (RunMark(5, "train-2026-10-09"), RunMark(5, "train-2026-10-10")),
    (RunMark(-1, "x-1"), RunMark(0, "x-0")),  # an unknown start is the oldest
])
def test_runs_order(earlier: RunMark, later: RunMark) -> None:
    assert earlier < later and not later < earlier
