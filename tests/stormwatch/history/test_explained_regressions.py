"""Issue 30's scenario: a device that adds hidden memory to every job on it owns the regressions it causes."""

from __future__ import annotations

import pytest

from stormwatch.history.regressions import Regression, RegressionMetric, RegressionThresholds
from stormwatch.history.sections import FleetComparisons, compare_fleet
from stormwatch.history.suspects import SuspectThresholds
from stormwatch.outputs.json_members import Members
from tests.stormwatch.history.device_scenario import BAD_DEVICE, BAD_HOST, NIGHTS, night_time, scenario_history

HISTORY = scenario_history()


def compared(night: int, suspects: SuspectThresholds | None = None) -> FleetComparisons:
    return compare_fleet(HISTORY, as_of=night_time(night), trend_days=30, regression=RegressionThresholds(),
                         suspects=suspects or SuspectThresholds())


@pytest.mark.parametrize("night", range(3, NIGHTS))
def test_the_bad_device_is_suspect_and_owns_every_hidden_gap_regression(night: int) -> None:
    found = compared(night)
    assert [(item.host, item.device_id) for item in found.suspects] == [(BAD_HOST, BAD_DEVICE)]
    assert found.regressions, "the scenario plants a hidden-gap spike on a job's latest run every night"
    for item in found.regressions:
        assert item.metric is RegressionMetric.HIDDEN_GAP_PEAK
        assert (item.rank, item.host, item.device_id) == (BAD_DEVICE, BAD_HOST, BAD_DEVICE)
        assert item.explained_by_suspect
        assert item.carrier_text == f"explained by suspect device {BAD_HOST}/{BAD_DEVICE}"
    unexplained = [item.job_name for item in found.regressions if not item.explained_by_suspect]
    assert unexplained == []


def test_the_fleet_json_members_carry_the_carrier_and_the_attribution() -> None:
    sections = compared(NIGHTS - 1).as_json()
    (entry,) = sections["regressions"]
    assert {key: entry[key] for key in ("rank", "host", "device_id", "explained_by_suspect")} == {
        "rank": BAD_DEVICE, "host": BAD_HOST, "device_id": BAD_DEVICE, "explained_by_suspect": True}
    assert Regression.from_json(Members(entry)).as_json() == entry
    assert sections["capacity"] == []  # flat reserved peaks: no trend toward the device


def test_before_the_device_is_suspect_a_regression_names_the_rank_host_and_device() -> None:
    found = compared(NIGHTS - 1, SuspectThresholds(min_jobs=100))  # nothing can be suspect yet
    assert found.suspects == ()
    (item,) = found.regressions
    assert not item.explained_by_suspect
    assert item.carrier_text == f"set by rank {BAD_DEVICE} on {BAD_HOST} GPU {BAD_DEVICE}"


def test_a_regression_a_healthy_device_carried_stays_the_job_s() -> None:
    history = HISTORY.copy()
    last = history["job_id"].astype(object) == f"train-a-{NIGHTS - 1:04d}"  # on node-3, not the bad host
    carrier = last & (history["rank"] == 5)
    history.loc[carrier, "hidden_gap_peak_bytes"] = history.loc[carrier, "hidden_gap_peak_bytes"] * 8
    found = compare_fleet(history, as_of=night_time(NIGHTS - 1), trend_days=30, regression=RegressionThresholds(),
                          suspects=SuspectThresholds())
    mine = {item.job_name: item for item in found.regressions}
    assert not mine["train-a"].explained_by_suspect
    assert mine["train-a"].carrier_text == "set by rank 5 on node-3 GPU 5"
    assert all(item.explained_by_suspect for name, item in mine.items() if name != "train-a")
