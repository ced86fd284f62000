"""A job's events as plain numpy columns in analysis order (time, then load order).

Nullable counters become ``int64`` arrays with a separate ``has_*`` mask, so
arithmetic stays in exact integers; missing values read as 0 and must be
masked by the caller. Every array has one entry per event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from stormwatch.tokens import COLLAPSED_PATTERN

_COUNTERS = (
    "allocator_allocated_bytes",
    "allocator_reserved_bytes",
    "allocator_inactive_bytes",
    "device_used_bytes",
    "device_total_bytes",
)


def _counter(frame: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    column = frame[name]
    present = column.notna().to_numpy()
    values = column.fillna(0).to_numpy(dtype=np.int64)
    return values, present


def _mentions_collective(column: pd.Series) -> np.ndarray:
    text = column.fillna("").astype(str).str.lower().str.replace(r"[-_]", "", regex=True)
    return text.str.contains(COLLAPSED_PATTERN, regex=True).to_numpy(dtype=bool)


@dataclass(frozen=True, eq=False)
class JobColumns:
    """Events sorted stably by ``timestamp_ns``; ``frame`` is that sorted view."""

    frame: pd.DataFrame
    timestamp_ns: np.ndarray
    rank: np.ndarray
    world_size: np.ndarray
    is_sample: np.ndarray
    is_v4: np.ndarray
    allocated_bytes: np.ndarray
    has_allocated: np.ndarray
    reserved_bytes: np.ndarray
    has_reserved: np.ndarray
    inactive_bytes: np.ndarray
    has_inactive: np.ndarray
    used_bytes: np.ndarray
    has_used: np.ndarray
    total_bytes: np.ndarray
    has_total: np.ndarray
    collective_marker: np.ndarray

    @classmethod
    def from_events(cls, events: pd.DataFrame) -> JobColumns:
        order = np.argsort(events["timestamp_ns"].to_numpy(dtype=np.int64), kind="stable")
        frame = events.iloc[order].reset_index(drop=True)
        kinds = frame["event_type"].astype(str)
        allocated, has_allocated = _counter(frame, "allocator_allocated_bytes")
        reserved, has_reserved = _counter(frame, "allocator_reserved_bytes")
        inactive, has_inactive = _counter(frame, "allocator_inactive_bytes")
        used, has_used = _counter(frame, "device_used_bytes")
        total, has_total = _counter(frame, "device_total_bytes")
        marker = (
            _mentions_collective(kinds)
            | _mentions_collective(frame["context"])
            | frame["metadata_collective"].to_numpy(dtype=bool)
        )
        return cls(
            frame=frame,
            timestamp_ns=frame["timestamp_ns"].to_numpy(dtype=np.int64),
            rank=frame["rank"].to_numpy(dtype=np.int64),
            world_size=frame["world_size"].to_numpy(dtype=np.int64),
            is_sample=(kinds.str.strip().str.lower() == "sample").to_numpy(dtype=bool),
            is_v4=(frame["schema_version"].to_numpy(dtype=np.int64) >= 4),
            allocated_bytes=allocated,
            has_allocated=has_allocated,
            reserved_bytes=reserved,
            has_reserved=has_reserved,
            inactive_bytes=inactive,
            has_inactive=has_inactive,
            used_bytes=used,
            has_used=has_used,
            total_bytes=total,
            has_total=has_total,
            collective_marker=marker,
        )

    def __len__(self) -> int:
        return len(self.timestamp_ns)

    @property
    def allocator_complete(self) -> np.ndarray:
        """Events with allocated, reserved and device-used counters (always true before schema v4)."""
        return self.has_allocated & self.has_reserved & self.has_used

    @property
    def gap_bytes(self) -> np.ndarray:
        """Hidden gap ``device_used - allocator_reserved``; meaningful where both are present."""
        return self.used_bytes - self.reserved_bytes
