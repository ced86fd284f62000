"""model.json timelines as numpy arrays on one job-wide time axis.

``model.per_rank_timelines`` maps a rank (a string key after JSON) to lists:
``timestamps_ns`` plus ``allocated``/``reserved``/``gap`` (bytes, null where a
v4 counter is missing), or ``timestamps_ns`` plus ``device_used`` for a v4
rank without allocator counters. The job starts at its first event (first
sample or marker) and every chart shares the span from there to its last one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from stormwatch.reports.downsample import as_float, as_ns
from stormwatch.reports.fields import as_int, as_mapping, is_sequence, rank_key
from stormwatch.reports.formatting import NS_PER_S

SERIES_NAMES = ("allocated", "reserved", "gap", "device_used")


@dataclass(frozen=True, eq=False)
class RankTimeline:
    """One rank's samples: ``times_s`` (seconds since job start, sorted) and the series it has."""

    rank: int
    times_s: np.ndarray
    series: dict[str, np.ndarray]  # name in SERIES_NAMES -> float64 bytes, NaN where null

    @property
    def device_only(self) -> bool:
        return "device_used" in self.series and "allocated" not in self.series

    @property
    def samples(self) -> int:
        return len(self.times_s)


@dataclass(frozen=True)
class TimeFrame:
    """The job's time axis: ``origin_ns`` (first event, ns since the epoch) to ``end_ns``."""

    origin_ns: int | None
    end_ns: int | None

    @property
    def duration_s(self) -> float:
        if self.origin_ns is None or self.end_ns is None or self.end_ns <= self.origin_ns:
            return 1.0
        return (self.end_ns - self.origin_ns) / NS_PER_S

    def seconds(self, timestamp_ns: int) -> float:
        return (timestamp_ns - (self.origin_ns or 0)) / NS_PER_S


def _raw_timelines(model: Mapping[str, Any]) -> dict[int, tuple[np.ndarray, dict[str, np.ndarray]]]:
    raw = model.get("per_rank_timelines")
    out: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]] = {}
    if not isinstance(raw, Mapping):
        return out
    for key, timeline in raw.items():
        rank = rank_key(key)
        if rank is None or not isinstance(timeline, Mapping):
            continue
        try:
            stamps = as_ns(timeline.get("timestamps_ns") if is_sequence(timeline.get("timestamps_ns")) else [])
        except (TypeError, ValueError, OverflowError):
            continue
        series = {}
        for name in SERIES_NAMES:
            values = timeline.get(name)
            if is_sequence(values):
                try:
                    series[name] = as_float(values)[: len(stamps)]
                except (TypeError, ValueError):
                    continue
        out[rank] = (stamps, series)
    return out


def _marker_bounds_ns(markers_by_rank: Any) -> Iterable[int]:
    if not isinstance(markers_by_rank, Mapping):
        return
    for markers in markers_by_rank.values():
        for marker in markers if is_sequence(markers) else ():
            if isinstance(marker, Mapping):
                for name in ("start_ns", "end_ns"):
                    value = as_int(marker.get(name))
                    if value is not None:
                        yield value


def load_timelines(document: Mapping[str, Any]) -> tuple[TimeFrame, dict[int, RankTimeline]]:
    """The job's time frame and every rank's timeline, times in seconds since the job start."""
    model = as_mapping(document.get("model"))
    raw = _raw_timelines(model)
    bounds = [int(value) for stamps, _ in raw.values() if len(stamps) for value in (stamps.min(), stamps.max())]
    bounds.extend(_marker_bounds_ns(model.get("markers_by_rank")))
    if not bounds:
        for session in document.get("sessions") or ():
            if isinstance(session, Mapping) and session.get("session_id") == document.get("selected_session_id"):
                start = as_int(session.get("started_at_ns"))
                bounds.extend(value for value in (start, as_int(session.get("ended_at_ns"))) if value is not None)
    frame = TimeFrame(min(bounds), max(bounds)) if bounds else TimeFrame(None, None)
    origin = frame.origin_ns or 0
    timelines = {}
    for rank, (stamps, series) in sorted(raw.items()):
        order = np.argsort(stamps, kind="stable")
        seconds = (stamps[order] - origin) / NS_PER_S
        sized = {name: values[order] for name, values in series.items() if len(values) == len(stamps)}
        timelines[rank] = RankTimeline(rank, seconds, sized)
    return frame, timelines
