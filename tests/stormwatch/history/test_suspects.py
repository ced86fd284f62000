"""Suspect hosts and devices: the Wilson bound, table-driven small histories, a synthetic fleet."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from scipy.stats import binomtest

from stormwatch.history.frame import history_frame
from stormwatch.history.suspects import SuspectThresholds, device_rates, find_suspects, wilson_lower_bound
from tests.stormwatch.history.synthetic import FIRST_NIGHT, history_of, run_rows, synthetic_fleet


@pytest.mark.parametrize(("successes", "trials"), [(0, 10), (5, 10), (10, 10), (1, 100), (3, 3), (40, 1000)])
def test_wilson_lower_bound_matches_scipy(successes: int, trials: int) -> None:
    expected = binomtest(successes, trials).proportion_ci(confidence_level=0.95, method="wilson").low
    found = float(wilson_lower_bound(np.array([successes]), np.array([trials]))[0])
    assert found == pytest.approx(expected, abs=2e-5)  # z = 1.96 against scipy's 1.95996...


def test_wilson_lower_bound_closed_forms() -> None:
    bounds = wilson_lower_bound(np.array([10, 0, 0]), np.array([10, 10, 0]), z=1.96)
    assert bounds.tolist() == pytest.approx([1 / (1 + 1.96**2 / 10), 0.0, 0.0])  # no trials: no evidence


def _fleet_rows(nights: int, *, bad: tuple[str, int] | None, jobs_per_night: int = 6) -> list[dict[str, object]]:
    """Single-rank jobs spread over node-00..node-05 (device 0); the first of each night's jobs
    has a cause; jobs on ``bad`` always do."""
    rows: list[dict[str, object]] = []
    for night in range(nights):
        for index in range(jobs_per_night):
            host = f"node-{(index + night) % 6:02d}"
            caused = index == 0 or (bad is not None and (host, 0) == bad)
            rows += run_rows(f"job{index}-{night:04d}", night=night, world_size=1, hosts=(host,),
                             first_cause_rank=0 if caused else None)
    return rows


def test_a_device_where_first_causes_gather_is_a_suspect() -> None:
    history = history_of(_fleet_rows(14, bad=("node-03", 0)))
    as_of = FIRST_NIGHT + timedelta(days=13)

    found = find_suspects(history, as_of=as_of)

    assert [(item.host, item.device_id) for item in found] == [("node-03", 0)]
    suspect = found[0].as_json()
    assert (suspect["jobs"], suspect["anomalous_jobs"], suspect["rate"]) == (14, 14, 1.0)
    devices, fleet_rate = device_rates(history, as_of=as_of, nights=14)
    assert fleet_rate == pytest.approx(float(devices["anomalous_jobs"].sum()) / (14 * 6))
    assert suspect["fleet_rate"] == pytest.approx(fleet_rate)


@pytest.mark.parametrize(
    ("thresholds", "expected"),
    [
        (SuspectThresholds(), 1),
        (SuspectThresholds(min_jobs=15), 0),   # 14 jobs on it: not enough
        (SuspectThresholds(nights=2), 0),      # two nights: 2 jobs on it
        (SuspectThresholds(factor=10.0), 0),
    ],
)
def test_thresholds_are_parameters(thresholds: SuspectThresholds, expected: int) -> None:
    history = history_of(_fleet_rows(14, bad=("node-03", 0)))
    assert len(find_suspects(history, as_of=FIRST_NIGHT + timedelta(days=13), thresholds=thresholds)) == expected


def test_an_even_fleet_has_no_suspect_and_nights_after_as_of_do_not_count() -> None:
    history = history_of(_fleet_rows(14, bad=None) + _fleet_rows(30, bad=("node-03", 0))[14 * 6 :])
    assert find_suspects(history, as_of=FIRST_NIGHT + timedelta(days=13)) == ()
    assert len(find_suspects(history, as_of=FIRST_NIGHT + timedelta(days=29))) == 1


def test_a_job_counts_once_per_device_and_unknown_hosts_count_for_nothing() -> None:
    rows = run_rows("wide-0000", night=0, world_size=16, hosts=("node-00", "node-01"), first_cause_rank=9)
    rows += run_rows("wide-0000", night=1, world_size=16, hosts=("node-00", "node-01"), first_cause_rank=9,
                     audit="audit-20261102T020000Z-11111111")  # re-audited: counts once
    rows += [{**row, "host": None} for row in run_rows("dark-0000", night=1, world_size=2, first_cause_rank=0)]
    devices, fleet_rate = device_rates(history_of(rows), as_of=FIRST_NIGHT + timedelta(days=1), nights=14)

    assert len(devices) == 16
    assert set(devices["jobs"]) == {1}
    caused = devices.loc[devices["anomalous_jobs"] == 1, ["host", "device_id"]].astype(str).values.tolist()
    assert caused == [["node-01", "1"]]
    assert fleet_rate == pytest.approx(1 / 16)


def test_an_empty_history_has_no_suspects() -> None:
    assert find_suspects(history_of([]), as_of=FIRST_NIGHT) == ()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_planted_bad_device_is_found_with_at_most_one_false_finding(seed: int) -> None:
    fleet = synthetic_fleet(nights=30, jobs_per_night=40, seed=seed)

    found = {(item.host, item.device_id) for item in find_suspects(history_frame(fleet.table()), as_of=fleet.as_of)}

    assert fleet.bad_devices <= found
    assert len(found - fleet.bad_devices) <= 1
