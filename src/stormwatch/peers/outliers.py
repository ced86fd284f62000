"""Outlier ranks within one job: ranks whose memory differs from their peers' by a wide margin.

For each :class:`OutlierMetric` (a :class:`~stormwatch.peers.rank_facts.RankFacts`
field in bytes), over the ranks that have a value for it:

* fewer than ``thresholds.min_ranks`` (4) such ranks: nothing is flagged (a
  median of 2 or 3 says little about what is normal);
* the **robust z** of a rank is ``0.6745 * (x - median) / MAD``, MAD being the
  median of ``|x - median|`` (Iglewicz and Hoaglin's modified z score; 0.6745
  makes it comparable to a standard score under a normal distribution). A rank
  is flagged when ``|z| > thresholds.robust_z`` (3.5), above *or* below its peers;
* **MAD 0** (at least half the ranks hold exactly the median, the usual case for
  a hidden gap that is 0 on most ranks): z is undefined, so the rank is flagged
  when the larger of ``x`` and the median is at least ``thresholds.mad_zero_ratio``
  (1.5) times the smaller (a zero median against any positive ``x`` counts as an
  infinite ratio); its ``robust_z`` is reported as ``None``;
* either way, a rank is flagged only when ``|x - median|`` is also at least the
  **absolute floor**: ``max(thresholds.min_bytes, thresholds.min_fraction_of_total
  * device_total_bytes)`` (1 GiB, 2 % of the job's largest device total; 1 GiB
  alone when no device total is known), so small jobs with tight distributions
  do not flag a few MiB of noise.

Arithmetic is float64 over the ranks' values (exact for values below 2**53 bytes,
8 PiB); ``median_bytes`` is the median rounded to the nearest byte. Columnar over
ranks: one numpy pass per metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from stormwatch.peers.rank_facts import RankFacts, job_device_total_bytes

GIB = 1024**3
#: Scales a MAD-based deviation to a standard score (the 0.75 quantile of the standard normal).
MAD_SCALE = 0.6745


class OutlierMetric(StrEnum):
    """What an outlier is measured on: a :class:`RankFacts` field name (bytes)."""

    PEAK_RESERVED_BYTES = "peak_reserved_bytes"
    HIDDEN_GAP_PEAK_BYTES = "hidden_gap_peak_bytes"


@dataclass(frozen=True)
class OutlierThresholds:
    """When a rank is an outlier; see the module docstring for the rule.

    ``robust_z``: flagged above this ``|z|`` (strictly). ``min_bytes`` and
    ``min_fraction_of_total`` (of the job's largest device total): the absolute
    floor on ``|x - median|`` in bytes. ``mad_zero_ratio``: larger/smaller ratio of
    value and median that flags a rank when the MAD is 0 (>= 1). ``min_ranks``:
    ranks with a value needed before anything is flagged.
    """

    robust_z: float = 3.5
    min_bytes: int = GIB
    min_fraction_of_total: float = 0.02
    mad_zero_ratio: float = 1.5
    min_ranks: int = 4

    def floor_bytes(self, device_total_bytes: int | None) -> float:
        """The smallest ``|x - median|`` (bytes) that may flag a rank."""
        if device_total_bytes is None:
            return float(self.min_bytes)
        return max(float(self.min_bytes), self.min_fraction_of_total * device_total_bytes)


DEFAULT_THRESHOLDS = OutlierThresholds()


@dataclass(frozen=True)
class OutlierRank:
    """A rank flagged on ``metric``: its value and the job's median (bytes), and its robust z
    rounded to 4 decimals (``None`` when the MAD was 0 and the ratio rule decided)."""

    rank: int
    metric: OutlierMetric
    value_bytes: int
    median_bytes: int
    robust_z: float | None


def _flagged(
    ranks: np.ndarray, exact: np.ndarray, metric: OutlierMetric, *, floor_bytes: float,
    thresholds: OutlierThresholds,
) -> list[OutlierRank]:
    """Outliers among ``exact`` (int64 bytes, one per rank of ``ranks``)."""
    values = exact.astype(np.float64)
    median = float(np.median(values))
    deviation = values - median
    mad = float(np.median(np.abs(deviation)))
    wide = np.abs(deviation) >= floor_bytes
    if mad > 0:
        z = MAD_SCALE * deviation / mad
        hits = wide & (np.abs(z) > thresholds.robust_z)
        scores: list[float | None] = [round(float(score), 4) for score in z[hits]]
    else:
        larger, smaller = np.maximum(values, median), np.minimum(values, median)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(smaller > 0, larger / np.where(smaller > 0, smaller, 1.0), np.inf)
        hits = wide & (ratio >= thresholds.mad_zero_ratio)
        scores = [None] * int(hits.sum())
    return [
        OutlierRank(rank=int(rank), metric=metric, value_bytes=int(value), median_bytes=int(round(median)),
                    robust_z=score)
        for rank, value, score in zip(ranks[hits], exact[hits], scores, strict=True)
    ]


def outlier_ranks(
    facts: Sequence[RankFacts], *, thresholds: OutlierThresholds = DEFAULT_THRESHOLDS,
    device_total_bytes: int | None = None,
) -> tuple[OutlierRank, ...]:
    """Outlier ranks of one job, by metric (in :class:`OutlierMetric` order) then rank.

    ``device_total_bytes`` sets the floor's fraction; by default the largest total any rank saw.
    """
    total = job_device_total_bytes(facts) if device_total_bytes is None else device_total_bytes
    floor_bytes = thresholds.floor_bytes(total)
    found: list[OutlierRank] = []
    for metric in OutlierMetric:
        pairs = [(fact.rank, getattr(fact, metric.value)) for fact in facts]
        known = [(rank, value) for rank, value in pairs if value is not None]
        if len(known) < thresholds.min_ranks:
            continue
        order = sorted(known)
        ranks = np.array([rank for rank, _ in order], dtype=np.int64)
        exact = np.array([value for _, value in order], dtype=np.int64)
        found.extend(_flagged(ranks, exact, metric, floor_bytes=floor_bytes, thresholds=thresholds))
    return tuple(found)
