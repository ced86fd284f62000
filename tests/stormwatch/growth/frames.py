"""Events frames of one rank's training memory for the growth tests: only the columns
:func:`stormwatch.growth.rank_growth.rank_growth` reads, built columnar (numpy)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

GIB = 1 << 30
MIB = 1 << 20
NS_PER_S = 1_000_000_000
START_NS = 1_767_225_600 * NS_PER_S


@dataclass(frozen=True, kw_only=True)
class Memory:
    """One rank's memory: a floor under a step sawtooth, an optional linear leak and warm-up ramp.

    Bytes and seconds; ``leak_bytes_per_hour`` adds to the floor from the first sample on;
    ``ramp_s``: an exponential warm-up of that time constant from 40 % of the floor (0: none);
    ``restarts_at_s``: process restarts (new pid, memory back to the warm-up's start, leak reset).
    """

    duration_s: float = 6 * 3600
    interval_s: float = 10.0
    floor_bytes: float = 20 * GIB
    activations_bytes: float = 10 * GIB
    step_s: float = 2.3
    noise_bytes: float = 30 * MIB
    leak_bytes_per_hour: float = 0.0
    ramp_s: float = 0.0
    restarts_at_s: tuple[float, ...] = ()
    total_bytes: int | None = 80 * GIB
    device_id: int = 0
    seed: int = 0


def rank_frame(memory: Memory, *, rank: int = 0) -> pd.DataFrame:
    """The rank's sample events in time order (``pid`` changes at each restart)."""
    rng = np.random.default_rng(memory.seed + rank)
    offsets = np.arange(0.0, memory.duration_s, memory.interval_s)
    since, process = offsets.copy(), np.zeros(len(offsets), dtype=np.int64)
    for number, cut in enumerate(memory.restarts_at_s, start=1):
        later = offsets >= cut
        since[later], process[later] = offsets[later] - cut, number
    ramp = 1 - 0.6 * np.exp(-since / memory.ramp_s) if memory.ramp_s else np.ones(len(offsets))
    kept = memory.floor_bytes * ramp + memory.leak_bytes_per_hour * since / 3600 \
        + rng.normal(0, memory.noise_bytes, len(offsets))
    phase = (offsets / memory.step_s) % 1.0
    allocated = kept + memory.activations_bytes * phase
    reserved = np.empty(len(offsets))
    peaks = np.ceil((kept + memory.activations_bytes + 256 * MIB) / (2 * MIB)) * (2 * MIB)
    for number in np.unique(process):
        rows = process == number
        reserved[rows] = np.maximum.accumulate(peaks[rows])
    total = memory.total_bytes
    return pd.DataFrame({
        "rank": np.full(len(offsets), rank, dtype=np.int64),
        "event_type": "sample",
        "timestamp_ns": START_NS + (offsets * NS_PER_S).astype(np.int64),
        "pid": 1000 + process,
        "device_id": np.full(len(offsets), memory.device_id, dtype=np.int64),
        "device_total_bytes": pd.array([total] * len(offsets), dtype="Int64"),
        "allocator_allocated_bytes": pd.array(allocated.astype(np.int64), dtype="Int64"),
        "allocator_reserved_bytes": pd.array(reserved.astype(np.int64), dtype="Int64"),
    })


def job_frame(*ranks: Memory) -> pd.DataFrame:
    """Several ranks (rank = position) merged in time order, as the loader gives them."""
    frame = pd.concat([rank_frame(memory, rank=rank) for rank, memory in enumerate(ranks)], ignore_index=True)
    return frame.iloc[np.argsort(frame["timestamp_ns"].to_numpy(), kind="stable")].reset_index(drop=True)
