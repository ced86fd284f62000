"""model.json timelines as numpy arrays on one job-wide time axis.

``model.per_rank_timelines`` maps a rank to arrays: ``timestamps_ns`` plus
``allocated``/``reserved``/``gap`` (bytes, ``None`` where a v4 counter is missing),
or ``timestamps_ns`` plus ``device_used`` for a v4 rank without allocator counters. The job
starts at its first event (first sample or marker) and every chart shares the span from there to
its last one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stormwatch.analysis.markers import TimelineMarker
from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.outputs.document import JobDocument
from stormwatch.reports.downsample import as_float, as_ns
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


def _raw_timelines(model: DiagnosticsModel) -> dict[int, tuple[np.ndarray, dict[str, np.ndarray]]]:
    out: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]] = {}
    for rank, timeline in model.per_rank_timelines.items():
        stamps = as_ns(timeline.get("timestamps_ns", ()))
        series = {name: as_float(timeline[name])[: len(stamps)] for name in SERIES_NAMES if name in timeline}
        out[rank] = (stamps, series)
    return out


def _marker_bounds_ns(markers_by_rank: Mapping[int, Sequence[TimelineMarker]]) -> Iterable[int]:
    for markers in markers_by_rank.values():
        for marker in markers:
            yield marker.start_ns
            if marker.end_ns is not None:
                yield marker.end_ns


def load_timelines(document: JobDocument) -> tuple[TimeFrame, dict[int, RankTimeline]]:
    """The job's time frame and every rank's timeline, times in seconds since the job start."""
    model = document.model
    raw = _raw_timelines(model)
    bounds = [int(value) for stamps, _ in raw.values() if len(stamps) for value in (stamps.min(), stamps.max())]
    bounds.extend(_marker_bounds_ns(model.markers_by_rank))
    if not bounds:
        for session in document.sessions:
            if session.session_id == document.selected_session_id:
                bounds.extend(value for value in (session.started_at_ns, session.ended_at_ns) if value is not None)
    frame = TimeFrame(min(bounds), max(bounds)) if bounds else TimeFrame(None, None)
    origin = frame.origin_ns or 0
    timelines = {}
    for rank, (stamps, series) in sorted(raw.items()):
        order = np.argsort(stamps, kind="stable")
        seconds = (stamps[order] - origin) / NS_PER_S
        sized = {name: values[order] for name, values in series.items() if len(values) == len(stamps)}
        timelines[rank] = RankTimeline(rank, seconds, sized)
    return frame, timelines
