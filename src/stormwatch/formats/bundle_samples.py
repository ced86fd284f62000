"""A diagnose bundle's parallel sample lists as canonical sample events.

Every sample becomes a ``sample`` event of the bundle's session: ``timestamps``
in seconds (to ns by ``int(seconds * 1e9)``, as stormlog does), ``allocated`` and
``reserved`` in bytes, ``device_used = max(allocated, reserved)``, the change
from the previous kept sample, and the interval to it in ms. When every sample is
a plain number and passes stormlog's checks (the usual case) the columns are
computed with numpy; otherwise each sample is taken on its own, so a bad one
drops only itself, with its number in the warning.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from stormwatch.events.frame import frame_from_columns, frame_from_rows, repeated_string
from stormwatch.events.schema import COLUMNS, INT64_MAX, RecordError
from stormwatch.events.sessions import SessionSummary
from stormwatch.events.values import check_values

COLLECTOR = "stormlog.diagnose.timeline"
CONTEXT = "diagnose timeline sample"
#: The largest float64 below 2**63: counters and ns stamps at or above 2**63 are out of range.
_INT64_LIMIT = float(INT64_MAX)


def sample_events(
    stamps: list[Any], allocated: list[Any], reserved: list[Any], *, count: int, summary: SessionSummary
) -> tuple[pd.DataFrame, list[tuple[int, str]]]:
    """The first ``count`` samples as events, and (1-based sample number, reason) problems."""
    frame = _vectorised(stamps[:count], allocated[:count], reserved[:count], summary)
    if frame is not None:
        return frame, []
    rows, problems = _sample_rows(stamps, allocated, reserved, count, summary)
    return frame_from_rows(rows), problems


def _plain(values: list[Any], *, integers: bool) -> np.ndarray | None:
    """``values`` as an int64 (``integers``) or float64 array when numpy reads them as plain
    numbers of that kind (ints and bools; for floats, ints too), the values Python's
    ``int()``/``float()`` give them; else None (strings, None, ints past 64 bits...)."""
    try:
        array = np.asarray(values)
    except (ValueError, TypeError, OverflowError):  # lists of uneven depth, say: not numbers
        return None
    if array.ndim != 1:  # nested lists: not numbers
        return None
    if array.dtype == np.int64 or array.dtype == np.bool_:
        return array.astype(np.float64 if not integers else np.int64)
    if not integers and array.dtype == np.float64:
        return array
    return None


def _vectorised(
    stamps: list[Any], allocated: list[Any], reserved: list[Any], summary: SessionSummary
) -> pd.DataFrame | None:
    """The events when every sample is plain and valid, else None (the caller goes sample by sample)."""
    seconds = _plain(stamps, integers=False)
    alloc = _plain(allocated, integers=True)
    res = _plain(reserved, integers=True)
    if seconds is None or alloc is None or res is None:
        return None
    nanos = seconds * 1_000_000_000
    if not np.isfinite(nanos).all() or (nanos < 0).any() or (nanos >= _INT64_LIMIT).any():
        return None
    if (alloc < 0).any() or (res < 0).any() or summary.pid < -1:
        return None
    size = len(stamps)
    interval = np.zeros(size, dtype=np.int64)
    interval[1:] = np.maximum(0, np.rint((seconds[1:] - seconds[:-1]) * 1000)).astype(np.int64)
    change = np.diff(alloc, prepend=np.int64(0))
    none = np.full(size, None, dtype=object)
    missing = pd.arrays.IntegerArray(np.zeros(size, dtype=np.int64), np.ones(size, dtype=bool))
    columns: dict[str, Any] = {
        "session_id": repeated_string(summary.session_id, size),
        "timestamp_ns": np.trunc(nanos).astype(np.int64),
        "event_type": repeated_string("sample", size),
        "collector": repeated_string(COLLECTOR, size),
        "sampling_interval_ms": interval,
        "pid": np.full(size, summary.pid, dtype=np.int64),
        "host": repeated_string(summary.host, size),
        "device_id": np.zeros(size, dtype=np.int64),
        "allocator_allocated_bytes": alloc,
        "allocator_reserved_bytes": res,
        "allocator_active_bytes": missing,
        "allocator_inactive_bytes": missing,
        "allocator_change_bytes": change,
        "device_used_bytes": np.maximum(alloc, res),
        "device_free_bytes": missing,
        "device_total_bytes": missing,
        "context": repeated_string(CONTEXT, size),
        "job_id": none if summary.job_id is None else repeated_string(summary.job_id, size),
        "rank": np.full(size, summary.rank, dtype=np.int64),
        "local_rank": np.full(size, summary.local_rank, dtype=np.int64),
        "world_size": np.full(size, summary.world_size, dtype=np.int64),
        "metadata": none,
        "schema_version": np.full(size, 3, dtype=np.int64),
        "metadata_collective": np.zeros(size, dtype=bool),
    }
    return frame_from_columns(columns)


def _sample_rows(
    stamps: list[Any], allocated: list[Any], reserved: list[Any], count: int, summary: SessionSummary
) -> tuple[list[tuple[Any, ...]], list[tuple[int, str]]]:
    rows: list[tuple[Any, ...]] = []
    problems: list[tuple[int, str]] = []
    previous_allocated, previous_stamp = 0, None
    for index in range(count):
        try:
            stamp = float(stamps[index])
            alloc, res = int(allocated[index]), int(reserved[index])
            timestamp_ns = int(stamp * 1_000_000_000)
        except (TypeError, ValueError, OverflowError):
            problems.append((index + 1, "sample is not a number"))
            continue
        interval = 0 if previous_stamp is None else max(0, int(round((stamp - previous_stamp) * 1000)))
        values: dict[str, Any] = {
            "session_id": summary.session_id,
            "timestamp_ns": timestamp_ns,
            "event_type": "sample",
            "collector": COLLECTOR,
            "sampling_interval_ms": interval,
            "pid": summary.pid,
            "host": summary.host,
            "device_id": 0,
            "allocator_allocated_bytes": alloc,
            "allocator_reserved_bytes": res,
            "allocator_active_bytes": None,
            "allocator_inactive_bytes": None,
            "allocator_change_bytes": alloc - previous_allocated,
            "device_used_bytes": max(alloc, res),
            "device_free_bytes": None,
            "device_total_bytes": None,
            "context": CONTEXT,
            "job_id": summary.job_id,
            "rank": summary.rank,
            "local_rank": summary.local_rank,
            "world_size": summary.world_size,
            "metadata": None,
            "schema_version": 3,
            "metadata_collective": False,
        }
        try:
            check_values(values, nullable_core=False)
            if not all(
                -(2**63) <= values[k] < 2**63
                for k in ("timestamp_ns", "allocator_allocated_bytes", "allocator_reserved_bytes")
            ):
                raise RecordError("value outside the 64-bit range")
        except RecordError as exc:
            problems.append((index + 1, str(exc)))
            continue
        rows.append(tuple(values[name] for name in COLUMNS))
        previous_allocated, previous_stamp = alloc, stamp
    return rows, problems
