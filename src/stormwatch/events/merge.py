"""Combining canonical event frames: time order and stormlog's de-duplication.

stormlog concatenates the events of a session's artifacts, drops repeats of
its de-duplication key (:data:`~stormwatch.events.records.DEDUPE_KEY`, keeping the
first), then sorts stably by timestamp. Repeats share a timestamp, and a stable
sort keeps equal timestamps in concatenation order, so sorting first and then
dropping repeats gives the same rows in the same order; that order of work lets
the repeat check look only at rows whose timestamp is not unique.

Frames are usually sorted already (a session's artifacts, the ranks of a job),
so the time order is a k-way merge that a stable argsort of the concatenated
timestamps finds quickly; each column is then concatenated and taken in that
order once, in numpy or Arrow, large results on several threads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.events.frame import concat_strings, empty_frame, frame_from_columns, repeated_string
from stormwatch.events.schema import COLUMNS, COUNTER_COLUMNS, DEDUPE_KEY, STRING_COLUMNS

#: Results of at least this many rows are gathered on this many threads, one column at a time.
_PARALLEL_ROWS = 50_000
_WORKERS = min(4, os.cpu_count() or 1)


def _sorted(stamps: np.ndarray) -> bool:
    return bool(stamps.size < 2 or (stamps[1:] >= stamps[:-1]).all())


def _gather_column(name: str, arrays: Sequence[Any], order: np.ndarray | None) -> Any:
    """One column, given as each frame's array, concatenated then taken in ``order``
    (None: as they are). Reads only the arrays, so it may run on any thread."""
    if name in STRING_COLUMNS:
        return concat_strings(arrays, order)
    if name in COUNTER_COLUMNS:  # Int64 arrays: the extension interface's own concatenation and take
        counters = type(arrays[0])._concat_same_type(arrays) if len(arrays) > 1 else arrays[0]
        return counters if order is None else counters.take(order)
    values = np.concatenate([np.asarray(array) for array in arrays])
    return values if order is None else values[order]


def _gather(frames: Sequence[pd.DataFrame], order: np.ndarray | None, session_id: str | None) -> pd.DataFrame:
    """The frames' rows, concatenated then taken in ``order`` (None: as they are).

    Large results gather their columns on threads: concatenation and take run in
    numpy and Arrow without the GIL. The frames are only read here, on this thread.
    """
    size = sum(len(frame) for frame in frames)
    names = [name for name in COLUMNS if name != "session_id" or session_id is None]
    arrays = {name: [frame[name].array for frame in frames] for name in names}
    if size >= _PARALLEL_ROWS and _WORKERS > 1:
        with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
            gathered = list(pool.map(lambda name: _gather_column(name, arrays[name], order), names))
    else:
        gathered = [_gather_column(name, arrays[name], order) for name in names]
    columns: dict[str, Any] = dict(zip(names, gathered, strict=True))
    if session_id is not None:
        columns["session_id"] = repeated_string(session_id, size)
    return frame_from_columns(columns)


def _repeated(frame: pd.DataFrame) -> np.ndarray | None:
    """Rows of a time-sorted frame that repeat an earlier row's key; None when there are none."""
    stamps = frame["timestamp_ns"].to_numpy()
    tied = np.flatnonzero(stamps[1:] == stamps[:-1])
    if tied.size == 0:
        return None
    # Rows sharing a timestamp with a neighbour; only they can repeat a key.
    rows = np.union1d(tied, tied + 1)
    ranks = frame["rank"].to_numpy()[rows]
    order = np.lexsort((ranks, stamps[rows]))
    same = (np.diff(stamps[rows][order]) == 0) & (np.diff(ranks[order]) == 0)
    if not same.any():
        return None
    key = frame.iloc[rows].loc[:, list(DEDUPE_KEY)]
    key["context"] = key["context"].astype(object).fillna("")
    repeated = rows[key.duplicated(keep="first").to_numpy()]
    return repeated if repeated.size else None


def combine_events(frames: Sequence[pd.DataFrame], *, session_id: str | None = None) -> pd.DataFrame:
    """Frames as one session's events: concatenated, relabelled to ``session_id`` when
    given, in stable time order, repeats of the de-duplication key dropped (the first
    in concatenation order is kept). The result has a fresh 0..n-1 index."""
    parts = [frame for frame in frames if len(frame)]
    if not parts:
        return empty_frame()
    stamps = np.concatenate([frame["timestamp_ns"].to_numpy() for frame in parts])
    order = None if _sorted(stamps) else np.argsort(stamps, kind="stable")
    if len(parts) == 1 and order is None and session_id is None:
        combined = parts[0].reset_index(drop=True)
    else:
        combined = _gather(parts, order, session_id)
    repeated = _repeated(combined)
    if repeated is None:
        return combined
    kept = np.ones(len(combined), dtype=bool)
    kept[repeated] = False
    return combined.take(np.flatnonzero(kept)).reset_index(drop=True)


def sort_events(frame: pd.DataFrame) -> pd.DataFrame:
    """By timestamp; ties keep their order (stable). Repeats are kept."""
    stamps = frame["timestamp_ns"].to_numpy()
    if _sorted(stamps):
        return frame
    return _gather([frame], np.argsort(stamps, kind="stable"), None)
