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


def _mentions_collective(values: np.ndarray) -> np.ndarray:
    """Token test per distinct value (few: event types, repeated contexts), mapped back."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    text = pd.Series(uniques, dtype=object).astype(str).str.lower().str.replace(r"[-_]", "", regex=True)
    hits = text.str.contains(COLLAPSED_PATTERN, regex=True).to_numpy(dtype=bool)
    return np.where(codes >= 0, hits[np.maximum(codes, 0)] if len(hits) else False, False)


def _is_sample(kinds: np.ndarray) -> np.ndarray:
    codes, uniques = pd.factorize(kinds)
    hits = np.array([str(kind).strip().lower() == "sample" for kind in uniques], dtype=bool)
    return hits[codes] if len(hits) else np.zeros(len(kinds), dtype=bool)


@dataclass(frozen=True, eq=False)
class JobColumns:
    """Events sorted stably by ``timestamp_ns``; ``frame`` is that sorted view."""

    frame: pd.DataFrame
    event_type: np.ndarray  # object: str
    context: np.ndarray  # object: str or None
    session_id: np.ndarray  # object: str
    metadata: np.ndarray  # object: dict or None
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
    gap_bytes: np.ndarray  # device_used - allocator_reserved; meaningful where both are present

    @classmethod
    def from_events(cls, events: pd.DataFrame) -> JobColumns:
        stamps = events["timestamp_ns"].to_numpy(dtype=np.int64)
        if len(stamps) and bool((np.diff(stamps) < 0).any()):
            frame = events.iloc[np.argsort(stamps, kind="stable")].reset_index(drop=True)
        else:  # the loader's order is already by time: no copy
            frame = events.reset_index(drop=True)
        kinds = frame["event_type"].to_numpy(dtype=object)
        context = frame["context"].to_numpy(dtype=object, na_value=None)
        allocated, has_allocated = _counter(frame, "allocator_allocated_bytes")
        reserved, has_reserved = _counter(frame, "allocator_reserved_bytes")
        inactive, has_inactive = _counter(frame, "allocator_inactive_bytes")
        used, has_used = _counter(frame, "device_used_bytes")
        total, has_total = _counter(frame, "device_total_bytes")
        marker = (
            _mentions_collective(kinds)
            | _mentions_collective(context)
            | frame["metadata_collective"].to_numpy(dtype=bool)
        )
        return cls(
            frame=frame,
            event_type=kinds,
            context=context,
            session_id=frame["session_id"].to_numpy(dtype=object),
            metadata=frame["metadata"].to_numpy(dtype=object),
            timestamp_ns=frame["timestamp_ns"].to_numpy(dtype=np.int64),
            rank=frame["rank"].to_numpy(dtype=np.int64),
            world_size=frame["world_size"].to_numpy(dtype=np.int64),
            is_sample=_is_sample(kinds),
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
            gap_bytes=used - reserved,
        )

    def __len__(self) -> int:
        return len(self.timestamp_ns)

    @property
    def allocator_complete(self) -> np.ndarray:
        """Events with allocated, reserved and device-used counters (always true before schema v4)."""
        return self.has_allocated & self.has_reserved & self.has_used
