"""Issue 30's bad-device scenario as history rows: 12 nights of 10 job names on 8 hosts, one host's
GPU 2 adding a 6 GiB hidden-memory spike to every job placed on it.

Each job name (``train-a`` .. ``train-j``) runs once a night with 8 ranks on one host, rank r on
device r; job j runs on host (j + night) % 8 (so each name meets the bad host about once in 8
nights, and the bad host sees one or two names a night). Its hidden-gap peak is its own level
(0.5-1.4 GiB) with 2 % noise on every rank; its reserved peak is flat. On the bad host, rank 2 (on
GPU 2) carries 6 GiB more hidden memory and is the job's first cause; elsewhere one job in three
has a first cause on a rank of its own choosing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from tests.stormwatch.history.synthetic import history_of

GIB = 1 << 30
FIRST_NIGHT = datetime(2026, 11, 1, 2, tzinfo=UTC)
NIGHTS = 12
NAMES = tuple(f"train-{letter}" for letter in "abcdefghij")
HOSTS = tuple(f"node-{index}" for index in range(7)) + ("node-bad",)
BAD_HOST, BAD_DEVICE = "node-bad", 2
WORLD = 8


def night_time(night: int) -> datetime:
    return FIRST_NIGHT + timedelta(days=night)


def scenario_history(*, seed: int = 30, spike_bytes: int = 6 * GIB) -> pd.DataFrame:
    """Every night's rank rows (the analytics' DataFrame)."""
    rng = np.random.default_rng(seed)
    levels = rng.uniform(0.5, 1.4, size=len(NAMES)) * GIB
    reserved = rng.uniform(20, 60, size=len(NAMES)) * GIB
    rows: list[dict[str, object]] = []
    for night in range(NIGHTS):
        when = night_time(night)
        audit = f"audit-{when:%Y%m%dT%H%M%SZ}-0000{night:04d}"
        for index, name in enumerate(NAMES):
            host = HOSTS[(index + night) % len(HOSTS)]
            bad = host == BAD_HOST
            cause = BAD_DEVICE if bad else (int(rng.integers(0, WORLD)) if rng.random() < 1 / 3 else None)
            gaps = levels[index] * rng.normal(1.0, 0.02, size=WORLD)
            for rank in range(WORLD):
                gap = gaps[rank] + (spike_bytes if bad and rank == BAD_DEVICE else 0)
                rows.append({
                    "audit_id": audit, "audit_time": when, "job_id": f"{name}-{night:04d}", "job_name": name,
                    "world_size": WORLD, "rank": rank, "host": host, "device_id": rank,
                    "peak_reserved_bytes": int(reserved[index] * (1.0 if rank == 0 else 0.98)),
                    "peak_device_used_bytes": int(reserved[index] + gap),
                    "device_total_bytes": 80 * GIB,
                    "hidden_gap_peak_bytes": int(gap),
                    "first_cause": rank == cause,
                    "verdict": "critical" if cause is not None else "clean",
                    "job_started_ns": int(when.timestamp()) * 10**9 - 3_600 * 10**9,
                })
    return history_of(rows)
