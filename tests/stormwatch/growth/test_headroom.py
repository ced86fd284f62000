"""Headroom of ranks, jobs and the fleet: percentages and GiB-hours on known figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stormwatch.growth.headroom import GIB, NS_PER_HOUR, headroom_arrays, job_headroom, rank_headroom
from stormwatch.peers.rank_facts import RankFacts


def _fact(rank: int, *, device: int | None, reserved: int | None, total: int | None) -> RankFacts:
    return RankFacts(rank=rank, host="node-1", device_id=rank, samples=100, peak_allocated_bytes=None,
                     peak_reserved_bytes=reserved, peak_device_used_bytes=device, device_total_bytes=total,
                     hidden_gap_peak_bytes=None)


@pytest.mark.parametrize(
    ("device", "reserved", "total", "duration_h", "percent", "unused"),
    [
        (60 * GIB, 50 * GIB, 80 * GIB, 2, 75.0, 40.0),        # device use wins over reserved
        (None, 20 * GIB, 80 * GIB, 1, 25.0, 60.0),            # no device counter: reserved
        (90 * GIB, None, 80 * GIB, 1, 112.5, 0.0),            # an overshooting counter: nothing unused
        (None, None, 80 * GIB, 1, None, None),                # no peak
        (10 * GIB, None, None, 1, None, None),                # CPU: no total
        (40 * GIB, None, 80 * GIB, None, 50.0, None),         # no duration: no GiB-hours
    ],
)
def test_rank_headroom(device: int | None, reserved: int | None, total: int | None, duration_h: float | None,
                       percent: float | None, unused: float | None) -> None:
    duration = None if duration_h is None else int(duration_h * NS_PER_HOUR)
    headroom = rank_headroom(_fact(0, device=device, reserved=reserved, total=total), duration)
    assert headroom.used_percent == percent and headroom.unused_gib_hours == unused


def test_job_headroom_is_its_fullest_rank_and_the_sum_of_unused() -> None:
    facts = [_fact(0, device=20 * GIB, reserved=None, total=80 * GIB),
             _fact(1, device=30 * GIB, reserved=None, total=80 * GIB),
             _fact(2, device=None, reserved=None, total=None)]
    job = job_headroom(facts, {0: NS_PER_HOUR, 1: 2 * NS_PER_HOUR})
    assert job.used_percent == 37.5 and job.ranks_counted == 2
    assert job.unused_gib_hours == 60.0 + 100.0 and [rank.rank for rank in job.ranks] == [0, 1, 2]
    assert job_headroom([], {}).used_percent is None


def test_headroom_arrays_over_history_rows() -> None:
    """The per-row rule the history and fleet.parquet columns use (fleet.json sums the rows' jobs)."""
    rows = pd.DataFrame({
        "job_id": ["a", "a", "b", "c", "c"],
        "peak_device_used_bytes": pd.array([20 * GIB, 30 * GIB, None, 70 * GIB, None], dtype="Int64"),
        "peak_reserved_bytes": pd.array([None, None, 50 * GIB, None, 1 * GIB], dtype="Int64"),
        "device_total_bytes": pd.array([80 * GIB, 80 * GIB, 80 * GIB, 80 * GIB, None], dtype="Int64"),
        "duration_ns": pd.array([NS_PER_HOUR, NS_PER_HOUR, None, 2 * NS_PER_HOUR, NS_PER_HOUR], dtype="Int64"),
    })
    floats = {name: rows[name].to_numpy(dtype=np.float64, na_value=np.nan) for name in rows.columns[1:]}
    percent, unused = headroom_arrays(device_used=floats["peak_device_used_bytes"],
                                      reserved=floats["peak_reserved_bytes"], total=floats["device_total_bytes"],
                                      duration_ns=floats["duration_ns"])
    counted = np.isfinite(unused)
    assert unused[counted].sum() == 60.0 + 50.0 + 20.0  # b has no duration, c's CPU rank no total
    assert int(counted.sum()) == 3
    jobs = pd.Series(percent).groupby(rows["job_id"].to_numpy()).max().dropna()
    assert len(jobs) == 3 and list(jobs.index[jobs.to_numpy() < 50.0]) == ["a"]  # a 37.5 %; b 62.5 %, c 87.5 %
    assert np.nansum(np.where(counted, percent / 100 * floats["device_total_bytes"], 0)) / (3 * 80 * GIB) \
        == pytest.approx((20 + 30 + 70) / 240)
    empty = np.array([], dtype=np.float64)
    arrays = headroom_arrays(device_used=empty, reserved=empty, total=empty, duration_ns=empty)
    assert [len(array) for array in arrays] == [0, 0]
