"""The alert policy's bounds, and the run order that picks a job name's latest run."""

from __future__ import annotations

from datetime import timedelta

import pytest

from stormwatch.alerting.observations import RunMark
from stormwatch.alerting.policy import AlertPolicy


def test_policy_bounds() -> None:
    with pytest.raises(ValueError):
        AlertPolicy(group_above=-1)
    with pytest.raises(ValueError):
        AlertPolicy(repeat_interval=timedelta(0))
    with pytest.raises(ValueError):
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
