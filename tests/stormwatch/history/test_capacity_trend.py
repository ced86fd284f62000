"""The capacity trend: a job name rising toward its device warns before it runs out; noise and jumps do not."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

import pytest

from stormwatch.history.capacity_trend import (
    CapacityThresholds,
    CapacityWarning,
    find_capacity_warnings,
)
from stormwatch.history.regressions import RegressionThresholds
from stormwatch.history.sections import compare_fleet
from stormwatch.history.suspects import SuspectThresholds
from stormwatch.outputs.json_members import Members
from tests.stormwatch.history.synthetic import FIRST_NIGHT, GIB, history_of

TOTAL = 80 * GIB


def runs_to_exceed(latest_bytes: float, total_bytes: float, growth: float) -> int | None:
    """The projection by hand: runs until ``latest_bytes`` growing by ``growth`` (a fraction) a run
    exceeds ``total_bytes`` (None when it never does)."""
    if growth <= 0:
        return None
    return 1 if latest_bytes >= total_bytes else math.floor(math.log(total_bytes / latest_bytes) /
                                                            math.log1p(growth)) + 1


def runs_of(name: str, peaks_gib: Sequence[float | None], *, totals_gib: list[float] | None = None,
            used: bool = True, hosts: tuple[str, str] = ("node-1", "node-2")) -> list[dict[str, object]]:
    """One 2-rank run a night: rank 1 (on ``hosts[1]`` device 1) holds the peak, rank 0 90 % of it."""
    rows: list[dict[str, object]] = []
    for night, peak in enumerate(peaks_gib):
        if peak is None:
            continue
        when = FIRST_NIGHT + timedelta(days=night)
        total = (totals_gib[night] if totals_gib else 80) * GIB
        for rank in range(2):
            value = int(peak * GIB * (1.0 if rank == 1 else 0.9))
            rows.append({
                "audit_id": f"audit-{when:%Y%m%dT%H%M%SZ}-00000000", "audit_time": when,
                "job_id": f"{name}-{night:04d}", "job_name": name, "world_size": 2, "rank": rank,
                "host": hosts[rank], "device_id": rank,
                "peak_device_used_bytes": value if used else None,
                "peak_reserved_bytes": int(value * 0.95) if not used else int(value * 0.8),
                "device_total_bytes": int(total), "job_started_ns": int(when.timestamp()) * 10**9,
            })
    return rows


def rising(start_gib: float, pct: float, runs: int) -> list[float]:
    return [start_gib * (1 + pct / 100) ** index for index in range(runs)]


WARNS = [
    # (case, peaks, expected runs_to_capacity): 80 / latest at +6 %/run
    ("6 %/run, 5 runs, 3 runs left", rising(55.0, 6, 5), 3),   # 69.4 -> 73.6, 78.0, 82.7
    ("6 %/run, 5 runs, 4 runs left", rising(52.0, 6, 5), 4),   # 65.6 -> 69.6, 73.8, 78.2, 82.9
    ("6 %/run, 5 runs, 1 run left", rising(60.0, 6, 5), 1),    # 75.7 -> 80.3
    ("10 %/run, the last 5 of 8 runs", rising(30.0, 10, 8), 4),  # 58.5 -> 64.3, 70.7, 77.8, 85.6
    ("6 %/run with a night without a run", [55.0, 58.3, None, 61.8, 65.5, 69.4], 3),
]


@pytest.mark.parametrize(("case", "peaks", "expected"), WARNS, ids=[c[0] for c in WARNS])
def test_a_steady_rise_toward_the_device_warns_with_the_runs_left(case: str, peaks: list[float | None],
                                                                   expected: int) -> None:
    present = [value for value in peaks if value is not None]
    latest, growth = present[-1] * GIB, present[-1] / present[-2] - 1
    assert runs_to_exceed(latest, TOTAL, growth) == expected  # the table's own arithmetic
    (warning,) = find_capacity_warnings(history_of(runs_of("llama-7b", peaks)))
    assert warning.runs_to_capacity == expected, case
    assert warning.growth_pct_per_run == pytest.approx(growth * 100, abs=0.1)
    assert warning.latest_peak_bytes == int(present[-1] * GIB)
    assert warning.device_total_bytes == TOTAL
    assert warning.runs == min(len(present), 5)
    assert (warning.job_id, warning.rank, warning.host, warning.device_id) == (
        f"llama-7b-{len(peaks) - 1:04d}", 1, "node-2", 1)


QUIET = [
    ("flat", [70.0] * 8),
    ("noisy around a level near the device", [72.0, 73.4, 71.1, 72.9, 70.8, 73.3, 71.9, 72.6]),
    ("one jump, then flat", [50.0, 50.2, 49.9, 50.1, 66.0, 66.2, 65.9, 66.1]),
    ("one jump at the last run", [60.0, 60.3, 59.8, 60.1, 75.0]),
    ("a climb out of a dip", [74.0, 74.5, 73.8, 74.2, 66.0, 68.0, 70.5, 72.0, 74.6]),
    ("rising, but too few runs", rising(60.0, 6, 4)),
    ("rising 0.5 %/run: below the growth threshold", rising(77.0, 0.5, 8)),
    ("rising 6 %/run, far from the device", rising(20.0, 6, 8)),
    ("falling", list(reversed(rising(52.0, 6, 6)))),
]


@pytest.mark.parametrize(("case", "peaks"), QUIET, ids=[c[0] for c in QUIET])
def test_noise_jumps_and_short_series_do_not_warn(case: str, peaks: list[float | None]) -> None:
    assert find_capacity_warnings(history_of(runs_of("llama-7b", peaks))) == (), case


def test_a_move_to_larger_devices_starts_a_new_series() -> None:
    peaks = rising(20.0, 6, 8)  # ~28 GiB: near a 32 GiB device, far from an 80 GiB one
    assert find_capacity_warnings(history_of(runs_of("small", peaks, totals_gib=[32.0] * 8)))
    moved = [32.0] * 4 + [80.0] * 4  # the last 4 runs alone are too few
    assert find_capacity_warnings(history_of(runs_of("small", peaks, totals_gib=moved))) == ()


def test_reserved_peaks_stand_in_when_no_rank_recorded_device_use() -> None:
    (warning,) = find_capacity_warnings(history_of(runs_of("cpu-free", rising(52.0, 6, 5), used=False)))
    assert warning.latest_peak_bytes == int(int(rising(52.0, 6, 5)[-1] * GIB) * 0.95)


def test_names_are_judged_apart_soonest_first() -> None:
    rows = runs_of("b-soon", rising(60.0, 6, 5)) + runs_of("a-later", rising(55.0, 6, 5)) + runs_of("flat", [60.0] * 5)
    found = find_capacity_warnings(history_of(rows))
    assert [(item.job_name, item.runs_to_capacity) for item in found] == [("b-soon", 1), ("a-later", 3)]


def test_the_text_and_the_json() -> None:
    (warning,) = find_capacity_warnings(history_of(runs_of("llama-7b", rising(55.0, 6, 5))))
    assert warning.text == ("llama-7b: peak up 6 % a run over 5 runs; at this trend it needs more than 80 GiB "
                            "within 3 runs")
    item = warning.as_json()
    assert item["text"] == warning.text and item["peaks_bytes"][-1] == warning.latest_peak_bytes
    assert CapacityWarning.from_json(Members(item)) == warning
    assert "within the next run" in CapacityWarning.from_json(Members({**item, "runs_to_capacity": 1})).text


def test_the_fleet_section_holds_the_warnings() -> None:
    history = history_of(runs_of("llama-7b", rising(55.0, 6, 5)))
    sections = compare_fleet(history, as_of=FIRST_NIGHT + timedelta(days=4), trend_days=30,
                             regression=RegressionThresholds(), suspects=SuspectThresholds(),
                             capacity=CapacityThresholds()).as_json()
    assert [item["job_name"] for item in sections["capacity"]] == ["llama-7b"]
    earlier = compare_fleet(history, as_of=FIRST_NIGHT + timedelta(days=3), trend_days=30,
                            regression=RegressionThresholds(), suspects=SuspectThresholds()).as_json()
    assert earlier["capacity"] == []  # four runs so far


@pytest.mark.parametrize("bad", [{"min_runs": 3}, {"min_runs": 6}, {"horizon_runs": 0}, {"max_step_share": 0.0}])
def test_thresholds_are_checked(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        CapacityThresholds(**bad)  # type: ignore[arg-type]
