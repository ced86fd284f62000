"""Hidden-memory gap classification for one rank: spike, drift, fragmentation.

The hidden gap of a sample is ``device_used_bytes - allocator_reserved_bytes``:
memory the device reports in use that the allocator does not account for
(CUDA context, NCCL buffers, other processes). Rules and thresholds are
stormlog 0.3.5's gap analysis, computed with the same numpy operations in the
same order so every float (and so every rounding and comparison) is identical:

* nothing is classified with fewer than 3 usable samples, or when no sample's
  gap reaches ``gap_ratio`` of its device total;
* ``transient_spike``: some gap's z-score (sample std) exceeds ``spike_zscore``;
  critical above twice that; evidence at the largest gap;
* ``persistent_drift`` (>= 5 samples): least-squares slope of gap over time is
  positive with R^2 >= ``drift_r_squared``; critical above 0.85; evidence at
  the last sample;
* ``fragmentation_like``: the mean fragmentation ratio reaches
  ``fragmentation_ratio``; critical above 0.5; evidence at its largest value.

Findings come most severe first, then most confident (stable otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from stormwatch.severity import Severity


class GapClass(StrEnum):
    TRANSIENT_SPIKE = "transient_spike"
    PERSISTENT_DRIFT = "persistent_drift"
    FRAGMENTATION_LIKE = "fragmentation_like"


@dataclass(frozen=True)
class GapThresholds:
    """Ratios are fractions (0.05 = 5 %); the z-score is in sample standard deviations."""

    gap_ratio: float = 0.05
    spike_zscore: float = 2.0
    drift_r_squared: float = 0.6
    fragmentation_ratio: float = 0.3

    def __post_init__(self) -> None:
        if not (self.gap_ratio >= 0 and self.spike_zscore > 0 and 0 <= self.drift_r_squared <= 1):
            raise ValueError(f"invalid gap thresholds: {self}")


@dataclass(frozen=True)
class GapFinding:
    """One classification; ``position`` indexes the usable samples given to :func:`classify_gaps`."""

    classification: GapClass
    severity: Severity
    confidence: float
    position: int
    description: str


def classify_gaps(
    timestamps_ns: np.ndarray,
    gaps_bytes: np.ndarray,
    *,
    totals_bytes: np.ndarray,
    fragmentation: np.ndarray,
    thresholds: GapThresholds,
) -> tuple[GapFinding, ...]:
    """Classify one rank's usable samples (time order, device total > 0).

    ``fragmentation`` holds each sample's fragmentation ratio, NaN where it is
    not defined. Returns findings most severe first.
    """
    if len(gaps_bytes) < 3:
        return ()
    ratios = np.abs(gaps_bytes) / totals_bytes
    if not float(ratios.max()) >= thresholds.gap_ratio:
        return ()
    gaps = gaps_bytes.astype(np.float64)
    found = [
        finding
        for finding in (
            _spike(gaps, thresholds.spike_zscore),
            _drift(timestamps_ns, gaps, thresholds.drift_r_squared),
            _fragmentation(fragmentation, thresholds.fragmentation_ratio),
        )
        if finding is not None
    ]
    found.sort(key=lambda finding: (-finding.severity.level, -finding.confidence))  # most severe first
    return tuple(found)


def _spike(gaps: np.ndarray, z_threshold: float) -> GapFinding | None:
    mean = float(np.mean(gaps))
    std = float(np.std(gaps, ddof=1))
    if std == 0 or np.isnan(std):
        return None
    count = int(np.count_nonzero((gaps - mean) / std > z_threshold))
    if count == 0:
        return None
    position = int(np.argmax(gaps))
    max_z = (float(gaps[position]) - mean) / std
    return GapFinding(
        classification=GapClass.TRANSIENT_SPIKE,
        severity=Severity.CRITICAL if max_z > 2 * z_threshold else Severity.WARNING,
        confidence=round(min(1.0, max_z / (3 * z_threshold)), 3),
        position=position,
        description=(f"{count} transient spike(s) in the hidden gap; the largest is {max_z:.1f} standard deviations "
                     "above the mean."),
    )


def _drift(timestamps_ns: np.ndarray, gaps: np.ndarray, r_squared_threshold: float) -> GapFinding | None:
    if len(gaps) < 5:
        return None
    elapsed = timestamps_ns.astype(np.float64)
    elapsed = elapsed - elapsed[0]
    if elapsed.max() == elapsed.min():
        return None  # every sample at one instant: no time axis to regress on
    ssxm, ssxym, _, ssym = np.cov(elapsed, gaps, bias=True).flat
    slope = ssxym / ssxm
    flat = ssym == 0.0  # constant gaps: r is undefined (NaN) unless the covariance is not 0
    r = (np.nan if ssxym == 0 else 0.0) if flat else min(1.0, max(-1.0, ssxym / np.sqrt(ssxm * ssym)))
    r_squared = r**2
    if slope <= 0 or r_squared < r_squared_threshold:
        return None
    per_second = slope * 1e9
    return GapFinding(
        classification=GapClass.PERSISTENT_DRIFT,
        severity=Severity.CRITICAL if r_squared > 0.85 else Severity.WARNING,
        confidence=round(min(1.0, r_squared), 3),
        position=len(gaps) - 1,
        description=f"The hidden gap grows steadily, {per_second / 2**20:,.1f} MiB/s (R² {r_squared:.2f}).",
    )


def _fragmentation(fragmentation: np.ndarray, threshold: float) -> GapFinding | None:
    defined = np.flatnonzero(~np.isnan(fragmentation))
    if len(defined) == 0:
        return None
    values = fragmentation[defined]
    average = float(np.mean(values))
    if average < threshold:
        return None
    return GapFinding(
        classification=GapClass.FRAGMENTATION_LIKE,
        severity=Severity.CRITICAL if average > 0.5 else Severity.WARNING,
        confidence=round(min(1.0, average / 0.6), 3),
        position=int(defined[int(np.argmax(values))]),
        description=f"Reserved-but-unallocated memory averages {average:.0%} of the allocator's reservation.",
    )
