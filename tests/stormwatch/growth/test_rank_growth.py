"""rank_growth on generated training memory: table-driven verdicts, gaps and the projection."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from stormwatch.growth.figures import GrowthCounter, GrowthGap
from stormwatch.growth.leak_min import LeakMin
from stormwatch.growth.rank_growth import DEFAULT_GROWTH_SETTINGS, GrowthSettings, rank_growth
from tests.stormwatch.growth.frames import GIB, MIB, Memory, job_frame, rank_frame

FLAT = Memory()
LEAK = Memory(leak_bytes_per_hour=2 * GIB)


@pytest.mark.parametrize(
    ("case", "memory", "leak", "judged_gib_per_hour"),
    [
        ("flat sawtooth", FLAT, False, 0.0),
        ("sparse samples, long steps", dataclasses.replace(FLAT, interval_s=30, step_s=7.7), False, 0.0),
        ("warm-up ramp alone", Memory(ramp_s=900, duration_s=2 * 3600), False, None),
        ("restarts", Memory(restarts_at_s=(3600, 4 * 3600), ramp_s=300), False, 0.0),
        ("planted leak", LEAK, True, 2.0),
        ("leak under a warm-up ramp", dataclasses.replace(LEAK, ramp_s=600), True, 2.0),
        ("leak reset by a restart", dataclasses.replace(LEAK, restarts_at_s=(3600,)), True, 2.0),
        ("leak below the leak-min", Memory(leak_bytes_per_hour=150 * MIB), False, 150 / 1024),
        ("leak on a 40 GiB device", Memory(leak_bytes_per_hour=0.5 * GIB, total_bytes=40 * GIB,
                                           floor_bytes=10 * GIB), True, 0.5),
    ],
)
def test_verdicts(case: str, memory: Memory, leak: bool, judged_gib_per_hour: float | None) -> None:
    (growth,) = rank_growth(rank_frame(memory), [0], settings=DEFAULT_GROWTH_SETTINGS)

    assert growth.gap is None and growth.leak is leak, case
    assert growth.judged_counter is GrowthCounter.RESERVED
    slope = growth.judged_bytes_per_hour
    assert slope is not None
    if judged_gib_per_hour is not None:  # within 5 % of the planted rate (a flat one: within 20 MiB/h)
        assert abs(slope / GIB - judged_gib_per_hour) <= max(0.05 * judged_gib_per_hour, 20 / 1024), case
    if leak:
        assert growth.confidence is not None and growth.confidence > 0.999
        assert growth.low_bytes_per_hour is not None and growth.low_bytes_per_hour > 0


def test_the_projection_of_a_known_leak() -> None:
    (growth,) = rank_growth(rank_frame(LEAK), [0])
    # reserved's floor: floor + activations + 256 MiB slack, about 3 sigma of noise above; +2 GiB/h
    start_bytes = 20 * GIB + 10 * GIB + 256 * MIB + 3 * 30 * MIB
    expected_s = (80 * GIB - start_bytes) / (2 * GIB) * 3600
    assert growth.capacity_after_start_s == pytest.approx(expected_s, rel=0.02)
    assert growth.device_total_bytes == 80 * GIB and growth.leak_min_bytes_per_hour == 0.005 * 80 * GIB


def test_the_projection_after_a_restart_follows_the_process_measured() -> None:
    (growth,) = rank_growth(rank_frame(dataclasses.replace(LEAK, restarts_at_s=(3600,))), [0])
    start_bytes = 20 * GIB + 10 * GIB + 256 * MIB + 3 * 30 * MIB
    assert growth.capacity_after_start_s == pytest.approx(3600 + (80 * GIB - start_bytes) / (2 * GIB) * 3600, rel=0.02)


def test_allocated_is_judged_without_reserved() -> None:
    frame = rank_frame(LEAK)
    frame["allocator_reserved_bytes"] = pd.array([None] * len(frame), dtype="Int64")
    (growth,) = rank_growth(frame, [0])
    assert growth.judged_counter is GrowthCounter.ALLOCATED and growth.reserved_bytes_per_hour is None
    assert growth.leak and growth.judged_bytes_per_hour == pytest.approx(2 * GIB, rel=0.05)


@pytest.mark.parametrize(
    ("case", "memory", "gap"),
    [
        ("too few samples", Memory(duration_s=3 * 3600, interval_s=600), GrowthGap.TOO_FEW_SAMPLES),
        ("too short", Memory(duration_s=1500), GrowthGap.TOO_SHORT),
        ("CPU tracker", dataclasses.replace(LEAK, device_id=-1), GrowthGap.NO_DEVICE_TOTAL),
        ("no device total", dataclasses.replace(LEAK, total_bytes=None), GrowthGap.NO_DEVICE_TOTAL),
    ],
)
def test_gaps(case: str, memory: Memory, gap: GrowthGap) -> None:
    (growth,) = rank_growth(rank_frame(memory), [0])
    assert (growth.gap, growth.leak, growth.judged_bytes_per_hour, growth.capacity_after_start_s) == (
        gap, False, None, None), case
    assert growth.duration_ns == int(rank_frame(memory)["timestamp_ns"].agg(np.ptp))


def test_a_clock_going_backwards_gets_a_gap_never_a_leak() -> None:
    frame = rank_frame(LEAK)
    order = np.arange(len(frame))
    order[1000:1100] = order[1000:1100][::-1]  # arrival order: a stretch of samples stamped backwards
    (growth,) = rank_growth(frame.iloc[order].reset_index(drop=True), [0])
    assert growth.gap is GrowthGap.CLOCK_BACKWARDS and not growth.leak


def test_missing_counters() -> None:
    frame = rank_frame(LEAK)
    nan_rows = np.random.default_rng(1).random(len(frame)) < 0.3
    for column in ("allocator_allocated_bytes", "allocator_reserved_bytes"):
        frame.loc[nan_rows, column] = pd.NA
    (growth,) = rank_growth(frame, [0])
    assert growth.leak and growth.judged_bytes_per_hour == pytest.approx(2 * GIB, rel=0.05)

    frame[["allocator_allocated_bytes", "allocator_reserved_bytes"]] = pd.NA
    (none,) = rank_growth(frame, [0])
    assert none.gap is GrowthGap.NO_COUNTER and not none.leak


def test_one_figure_per_present_rank_in_rank_order_and_only_samples_count() -> None:
    frame = job_frame(FLAT, LEAK, FLAT)
    lifecycle = frame.iloc[:50].assign(event_type=" START ", allocator_reserved_bytes=79 * GIB)
    frame = pd.concat([frame, lifecycle], ignore_index=True)  # not samples: never counted
    growth = rank_growth(frame, [2, 1, 0, 7])
    assert [item.rank for item in growth] == [0, 1, 2, 7]
    assert [item.leak for item in growth] == [False, True, False, False]
    assert growth[3].gap is GrowthGap.TOO_FEW_SAMPLES and growth[3].duration_ns is None  # no samples at all
    assert rank_growth(frame, []) == ()


def test_a_leak_min_given_applies_to_every_device() -> None:
    slow = Memory(leak_bytes_per_hour=150 * MIB)
    (growth,) = rank_growth(rank_frame(slow), [0], settings=GrowthSettings(leak_min=LeakMin(bytes_per_hour=100 * MIB)))
    assert growth.leak and growth.leak_min_bytes_per_hour == 100 * MIB


@pytest.mark.parametrize("bad", [{"warmup_share": 1.0}, {"min_windows": 2}, {"significance": 0.7},
                                 {"window_count": 2}, {"min_samples": 4}])
def test_settings_are_checked(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        GrowthSettings(**bad)  # type: ignore[arg-type]


def test_many_clean_ranks_give_no_false_leak() -> None:
    rng = np.random.default_rng(7)
    memories = [Memory(duration_s=float(rng.uniform(1.5, 30) * 3600), interval_s=float(rng.choice([5, 10, 30])),
                       floor_bytes=float(rng.uniform(8, 40)) * GIB, activations_bytes=float(rng.uniform(4, 30)) * GIB,
                       step_s=float(rng.uniform(0.5, 8)), ramp_s=float(rng.uniform(0, 900)),
                       restarts_at_s=(3600.0,) if rng.random() < 0.3 else (), seed=seed) for seed in range(24)]
    growth = rank_growth(job_frame(*memories), range(len(memories)))
    assert not any(item.leak for item in growth)
    assert sum(item.gap is None for item in growth) >= 20
