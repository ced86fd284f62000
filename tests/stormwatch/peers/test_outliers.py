"""The robust-z outlier rule, table-driven over hand-made rank facts (bytes)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from stormwatch.peers.outliers import OutlierMetric, OutlierRank, OutlierThresholds, outlier_ranks
from stormwatch.peers.rank_facts import RankFacts

GIB, MIB = 1024**3, 1024**2
RESERVED, GAP = OutlierMetric.PEAK_RESERVED_BYTES, OutlierMetric.HIDDEN_GAP_PEAK_BYTES


def facts(reserved: Sequence[int | None], *, gaps: Sequence[int | None] | None = None,
          total: int | None = 80 * GIB) -> list[RankFacts]:
    gaps = [0] * len(reserved) if gaps is None else gaps
    return [RankFacts(rank=rank, host="node-0", device_id=rank, samples=10, peak_allocated_bytes=value,
                      peak_reserved_bytes=value, peak_device_used_bytes=value, device_total_bytes=total,
                      hidden_gap_peak_bytes=gap)
            for rank, (value, gap) in enumerate(zip(reserved, gaps, strict=True))]


def flagged(found: Sequence[OutlierRank], metric: OutlierMetric = RESERVED) -> list[int]:
    return [item.rank for item in found if item.metric is metric]


# Spread ranks (MAD > 0): 10 GiB +- a few hundred MiB; the absolute floor is max(1 GiB, 2% of 80 GiB) = 1.6 GiB.
SPREAD = [10 * GIB + delta * 100 * MIB for delta in (-3, -1, 0, 1, 2, -2, 3)]

CASES = [
    # (name, reserved per rank, device total, outlier ranks)
    ("one rank far above its peers", [*SPREAD, 30 * GIB], 80 * GIB, [7]),
    ("one rank far below its peers", [*SPREAD, 1 * GIB], 80 * GIB, [7]),
    ("no outlier in a tight spread", SPREAD, 80 * GIB, []),
    # z is huge (MAD ~100 MiB) but 1.5 GiB above the median is under the 1.6 GiB floor (2% of 80 GiB)
    ("large z under the fraction floor", [*SPREAD, 10 * GIB + 1536 * MIB], 80 * GIB, []),
    # the same 1.5 GiB clears the floor when the device is small (1 GiB floor wins over 2% of 16 GiB)
    ("large z over the bytes floor", [*SPREAD, 10 * GIB + 1536 * MIB], 16 * GIB, [7]),
    # no device total known: 1 GiB alone
    ("no device total: 1 GiB floor", [*SPREAD, 10 * GIB + 1536 * MIB], None, [7]),
    # MAD 0: the ratio rule, >= 1.5x (or <= 1/1.5x) the median and >= the floor
    ("MAD 0, 1.5x the median", [4 * GIB] * 7 + [6 * GIB], 80 * GIB, [7]),
    ("MAD 0, 1.4x the median", [4 * GIB] * 7 + [5 * GIB + 600 * MIB], 16 * GIB, []),  # over the 1 GiB floor
    ("MAD 0, 1.5x but under the floor", [1 * GIB] * 7 + [1536 * MIB], 80 * GIB, []),
    ("MAD 0, a rank far below", [9 * GIB] * 7 + [2 * GIB], 80 * GIB, [7]),
    ("MAD 0, zero median", [0] * 5 + [3 * GIB], 80 * GIB, [5]),
    ("all equal", [4 * GIB] * 8, 80 * GIB, []),
    ("three ranks are skipped", [1 * GIB, 1 * GIB, 40 * GIB], 80 * GIB, []),
    ("four ranks are enough", [1 * GIB, 1 * GIB, 1 * GIB, 40 * GIB], 80 * GIB, [3]),
    ("ranks without a value do not count", [1 * GIB, 1 * GIB, None, 40 * GIB], 80 * GIB, []),
]


@pytest.mark.parametrize(("name", "reserved", "total", "expected"), CASES, ids=[case[0] for case in CASES])
def test_robust_z_rule(name: str, reserved: list[int | None], total: int | None, expected: list[int]) -> None:
    assert flagged(outlier_ranks(facts(reserved, total=total))) == expected


def test_an_outlier_reports_value_median_and_z() -> None:
    (found,) = outlier_ranks(facts([*SPREAD, 30 * GIB]))
    median = 10 * GIB + 50 * MIB  # between the 4th and 5th of 8 values
    assert (found.rank, found.metric, found.value_bytes, found.median_bytes) == (7, RESERVED, 30 * GIB, median)
    # |deviations| in 100 MiB: 0.5 0.5 1.5 1.5 2.5 2.5 3.5 and the outlier's: MAD = 200 MiB
    assert found.robust_z == pytest.approx(0.6745 * (30 * GIB - median) / (200 * MIB), abs=1e-3)


def test_mad_zero_reports_no_z() -> None:
    (found,) = outlier_ranks(facts([4 * GIB] * 7 + [8 * GIB]))
    assert found.robust_z is None and found.median_bytes == 4 * GIB and found.value_bytes == 8 * GIB


def test_even_count_median_is_rounded_to_a_byte() -> None:
    (found,) = outlier_ranks(facts([GIB, GIB + 1, GIB + 2, GIB + 3, 40 * GIB, GIB + 4]))
    assert found.rank == 4 and found.median_bytes == GIB + 2  # (GIB + 2 + GIB + 3) / 2, half to even


def test_both_metrics_are_checked_and_ordered_by_metric_then_rank() -> None:
    gaps = [0, 0, 0, 6 * GIB, 0, 0, 0, 5 * GIB]
    found = outlier_ranks(facts([*SPREAD, 30 * GIB], gaps=gaps))
    assert [(item.metric, item.rank) for item in found] == [(RESERVED, 7), (GAP, 3), (GAP, 7)]


def test_thresholds_are_configurable() -> None:
    values = [4 * GIB] * 7 + [5 * GIB + 600 * MIB]
    relaxed = OutlierThresholds(mad_zero_ratio=1.3)
    assert flagged(outlier_ranks(facts(values, total=16 * GIB), thresholds=relaxed)) == [7]
    assert flagged(outlier_ranks(facts([1, 1, 40 * GIB]), thresholds=OutlierThresholds(min_ranks=3))) == [2]
    assert OutlierThresholds().floor_bytes(None) == GIB
    assert OutlierThresholds().floor_bytes(100 * GIB) == pytest.approx(2 * GIB)


def test_the_job_device_total_can_be_given() -> None:
    values = [*SPREAD, 10 * GIB + 1536 * MIB]
    assert flagged(outlier_ranks(facts(values, total=None), device_total_bytes=80 * GIB)) == []
