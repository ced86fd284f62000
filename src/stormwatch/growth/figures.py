"""The growth figure of one rank: the frozen record :mod:`.rank_growth` computes and model.json's
``fleet.growth`` holds, one per present rank in rank order.

Units: bytes per hour for slopes, bytes for totals, nanoseconds for ``duration_ns``, seconds for
``capacity_after_start_s``. Invariants (checked on construction):

* ``gap`` is None exactly when the rank has a growth figure: then ``judged_counter``,
  ``confidence`` and the judged counter's slope are set; with a gap every slope, ``confidence``,
  the interval and ``capacity_after_start_s`` are None and ``leak`` is False;
* ``low_bytes_per_hour <= high_bytes_per_hour`` (the 95% interval of the judged slope);
* ``confidence`` is in [0, 1]; ``leak`` implies a figure, a device total and
  ``capacity_after_start_s`` set.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class GrowthCounter(StrEnum):
    """The sample counter a slope is measured on (events frame column names)."""

    ALLOCATED = "allocator_allocated_bytes"
    RESERVED = "allocator_reserved_bytes"


class GrowthGap(StrEnum):
    """Why a rank has no growth figure (never a false finding instead)."""

    TOO_FEW_SAMPLES = "too_few_samples"      # fewer steady-state samples or windows than a slope needs
    TOO_SHORT = "too_short"                  # steady state spans too little time to judge
    NO_DEVICE_TOTAL = "no_device_total"      # a CPU rank or a device whose capacity was not recorded
    CLOCK_BACKWARDS = "clock_backwards"      # the rank's sample timestamps go backwards
    NO_COUNTER = "no_counter"                # no allocated or reserved counter on its samples

    @property
    def reason(self) -> str:
        """For people: why there is no figure."""
        return _REASONS[self]


_REASONS = {
    GrowthGap.TOO_FEW_SAMPLES: "too few samples after warm-up to measure growth",
    GrowthGap.TOO_SHORT: "ran too briefly after warm-up to measure growth",
    GrowthGap.NO_DEVICE_TOTAL: "no device capacity recorded (CPU or unknown device)",
    GrowthGap.CLOCK_BACKWARDS: "sample timestamps go backwards",
    GrowthGap.NO_COUNTER: "no allocated or reserved counter recorded",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class RankGrowth:
    """One rank's steady-state growth after warm-up (see the module docstring for the invariants)."""

    rank: int
    duration_ns: int | None                      # first to last sample of the rank; None under 2 samples
    allocated_bytes_per_hour: float | None
    reserved_bytes_per_hour: float | None
    judged_counter: GrowthCounter | None         # the counter the leak verdict is judged on
    low_bytes_per_hour: float | None             # 95% interval of the judged counter's slope
    high_bytes_per_hour: float | None
    confidence: float | None                     # that the judged slope is above zero, in [0, 1]
    leak: bool
    leak_min_bytes_per_hour: float | None        # the threshold it was judged against
    device_total_bytes: int | None
    capacity_after_start_s: float | None         # when, at this rate, the judged counter reaches the total
    gap: GrowthGap | None

    def __post_init__(self) -> None:
        slopes = (self.allocated_bytes_per_hour, self.reserved_bytes_per_hour)
        if self.gap is not None:
            if any(value is not None for value in (*slopes, self.confidence, self.low_bytes_per_hour,
                                                   self.high_bytes_per_hour, self.capacity_after_start_s,
                                                   self.judged_counter)) or self.leak:
                raise ValueError(f"rank {self.rank}: a growth gap ({self.gap}) carries no figure")
            return
        if self.judged_counter is None or self.confidence is None:
            raise ValueError(f"rank {self.rank}: a growth figure needs its judged counter and confidence")
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"rank {self.rank}: confidence {self.confidence} is outside [0, 1]")
        if (self.low_bytes_per_hour is not None and self.high_bytes_per_hour is not None
                and self.low_bytes_per_hour > self.high_bytes_per_hour):
            raise ValueError(f"rank {self.rank}: interval low {self.low_bytes_per_hour} > high")
        if self.leak and (self.device_total_bytes is None or self.capacity_after_start_s is None):
            raise ValueError(f"rank {self.rank}: a leak needs a device total and a projection")

    @property
    def judged_bytes_per_hour(self) -> float | None:
        """The slope of the judged counter (None with a gap)."""
        if self.judged_counter is GrowthCounter.ALLOCATED:
            return self.allocated_bytes_per_hour
        if self.judged_counter is GrowthCounter.RESERVED:
            return self.reserved_bytes_per_hour
        return None

    def as_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "duration_ns": self.duration_ns,
            "allocated_bytes_per_hour": self.allocated_bytes_per_hour,
            "reserved_bytes_per_hour": self.reserved_bytes_per_hour,
            "judged_counter": None if self.judged_counter is None else self.judged_counter.value,
            "low_bytes_per_hour": self.low_bytes_per_hour, "high_bytes_per_hour": self.high_bytes_per_hour,
            "confidence": self.confidence, "leak": self.leak,
            "leak_min_bytes_per_hour": self.leak_min_bytes_per_hour,
            "device_total_bytes": self.device_total_bytes,
            "capacity_after_start_s": self.capacity_after_start_s,
            "gap": None if self.gap is None else self.gap.value,
        }
