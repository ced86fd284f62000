"""A job's events as plain numpy columns in analysis order (time, then load order).

Nullable counters become ``int64`` arrays with a separate ``has_*`` mask, so
arithmetic stays in exact integers; missing values read as 0 and must be
masked by the caller. Every array has one entry per event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from stormwatch.events.collective_tokens import has_collective_token

#: Jobs with at most this many ranks find each rank's events with one scan per rank
#: (cheaper than a stable sort of the whole rank column); larger jobs sort.
_SCAN_RANKS = 64
ALERT_TYPES = frozenset({"warning", "critical", "error"})
_COUNTERS = (
    "allocator_allocated_bytes",
    "allocator_reserved_bytes",
    "allocator_inactive_bytes",
    "device_used_bytes",
    "device_total_bytes",
)


def _counter(frame: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    column = frame[name].array
    return column.to_numpy(dtype=np.int64, na_value=0), ~np.asarray(column.isna(), dtype=bool)


@dataclass(frozen=True, eq=False)
class Coded:
    """A string column as codes into its distinct values (``-1``: missing); tests run per value."""

    codes: np.ndarray
    values: np.ndarray  # object: the distinct strings

    @classmethod
    def of(cls, column: pd.Series) -> Coded:
        """The column's own codes when it is categorical (the loader's string columns), else factorized."""
        if isinstance(column.dtype, pd.CategoricalDtype):
            return cls(column.cat.codes.to_numpy(dtype=np.int64), np.asarray(column.cat.categories, dtype=object))
        codes, uniques = pd.factorize(column, use_na_sentinel=True)
        return cls(np.asarray(codes, dtype=np.int64), np.asarray(uniques, dtype=object))

    def at(self, position: int) -> str | None:
        code = int(self.codes[position])
        return None if code < 0 else str(self.values[code])

    def where(self, test: Callable[[str], bool]) -> np.ndarray:
        """Per-event mask of ``test(value)``, evaluated once per distinct value; missing is False."""
        hits = np.array([bool(test(str(value))) for value in self.values] + [False], dtype=bool)
        return hits[self.codes]  # code -1 picks the trailing False


def _mentions_collective(column: Coded) -> np.ndarray:
    return column.where(has_collective_token)


@dataclass(frozen=True, eq=False)
class JobColumns:
    """Events sorted stably by ``timestamp_ns``; ``frame`` is that sorted view."""

    frame: pd.DataFrame
    event_type: Coded
    context: Coded
    session_id: Coded
    metadata: np.ndarray  # object: dict or None
    timestamp_ns: np.ndarray
    rank: np.ndarray
    world_size: np.ndarray
    is_sample: np.ndarray
    is_alert: np.ndarray  # event_type exactly warning, critical or error
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
            order = np.argsort(stamps, kind="stable")
            frame, stamps = events.iloc[order].reset_index(drop=True), stamps[order]
        else:  # the loader's order is already by time: no copy
            frame = events.reset_index(drop=True)
        kinds = Coded.of(frame["event_type"])
        context = Coded.of(frame["context"])
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
            session_id=Coded.of(frame["session_id"]),
            metadata=frame["metadata"].to_numpy(dtype=object),
            timestamp_ns=stamps,
            rank=frame["rank"].to_numpy(dtype=np.int64),
            world_size=frame["world_size"].to_numpy(dtype=np.int64),
            is_sample=kinds.where(lambda kind: kind.strip().lower() == "sample"),
            is_alert=kinds.where(lambda kind: kind in ALERT_TYPES),
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

    @cached_property
    def nullable_counters(self) -> bool:
        """Whether the job follows stormlog 0.4.3 (nullable counters) rather than 0.3.5.

        The rule: the job holds at least one schema-v4 event (``schema_version`` 4, as the
        loader records stormlog 0.4.x records), counted over every event before any rank
        filter. Capabilities play no part: 0.4.3 writes ``None`` wherever a rank has no
        counter to report (a missing rank, a rank without samples) whatever the data's
        schema, so the only choice is which reference a job follows; 0.3.5 rejects v4
        records, so a job with any of them can only be 0.4.3's, and a job with none is
        0.3.5's (which writes 0 there).
        """
        return bool(self.is_v4.any())

    @cached_property
    def allocator_complete(self) -> np.ndarray:
        """Events with allocated, reserved and device-used counters (always true before schema v4)."""
        return self.has_allocated & self.has_reserved & self.has_used

    @cached_property
    def rank_positions(self) -> dict[int, np.ndarray]:
        """Each rank's event positions (time order), ranks ascending."""
        ranks = distinct_ints(self.rank).tolist()
        if len(ranks) <= _SCAN_RANKS:
            return {rank: np.flatnonzero(self.rank == rank) for rank in ranks}
        order = np.argsort(self.rank, kind="stable")
        bounds = [*np.searchsorted(self.rank[order], ranks).tolist(), len(order)]
        return {rank: order[bounds[index] : bounds[index + 1]] for index, rank in enumerate(ranks)}


def distinct_ints(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an int64 array; a bincount when they span a small range."""
    if values.size == 0:
        return values
    low, high = int(values.min()), int(values.max())
    if high - low < 1 << 16:
        return np.flatnonzero(np.bincount(values - low)) + low
    return np.unique(values)
