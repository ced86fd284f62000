"""How complete a job's telemetry is: ranks, sessions, schema versions, collectors, load warnings.

Definitions (the fleet compares jobs on these, so they are exact):

* ``expected_ranks`` / ``present_ranks`` / ``missing_ranks``: the model's (a rank
  filter applies); ``ranks_present_percent`` is ``100 * present / expected``,
  ``None`` for a job that expects no rank (nothing loaded).
* ``sessions``: the capture sessions the loader found (``LoadResult.sessions``),
  *without* the sessions the loader synthesises by merging one job's single-rank
  sessions (source :data:`RANK_GROUP_SOURCE`): those would count every rank's
  session twice. A legacy merge (session-less files) replaces its parts, so it
  counts once.
* a session **without a stop event** is one whose status is not ``completed``:
  the loader calls an inferred session completed exactly when it holds a
  ``stop`` event, and a manifest's or bundle's own status (``running``,
  ``interrupted``, ``incomplete``) means the capture did not stop cleanly either.
  Their ids are listed, sorted.
* ``schema_versions`` and ``collectors``: distinct values of the events frame's
  ``schema_version`` / ``collector`` columns with their event counts, over the
  events of the model's present ranks (the events the diagnosis looked at);
  a missing collector is not counted.
* ``load_warnings``: ``len(LoadResult.warnings)`` (files and lines at fault).
* a rank **ended abruptly** when, among the model's present ranks, its own session has no stop
  event (as above) and its last file was cut short (:mod:`stormwatch.load.cut_short`): a file of
  the diagnosed session whose last complete record is that rank's last event, so no later file of
  the rank goes on after the cut. ``ended_abruptly`` counts them, ``ended_abruptly_ranks`` lists
  them, sorted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.events.sessions import SessionStatus, SessionSummary
from stormwatch.load.loader import LoadResult

#: ``SessionSummary.source`` of a session merged from single-rank sessions (they stay listed too).
RANK_GROUP_SOURCE = "stormlog.diagnostics.distributed"
#: The one status that means the capture stopped: it holds a ``stop`` event, or its manifest says so.
STOPPED = SessionStatus.COMPLETED


@dataclass(frozen=True)
class Coverage:
    """One job's telemetry coverage; counts of ranks, sessions and events (see the module docstring).

    ``schema_versions`` and ``collectors`` are (value, events) pairs in value order.
    """

    expected_ranks: int
    present_ranks: int
    missing_ranks: tuple[int, ...]
    ranks_present_percent: float | None
    sessions: int
    sessions_without_stop: int
    session_ids_without_stop: tuple[str, ...]
    schema_versions: tuple[tuple[int, int], ...]
    collectors: tuple[tuple[str, int], ...]
    load_warnings: int
    ended_abruptly: int = 0
    ended_abruptly_ranks: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """model.json's ``fleet.coverage``: value -> events maps keyed by strings, as JSON requires."""
        return {
            "expected_ranks": self.expected_ranks,
            "present_ranks": self.present_ranks,
            "missing_ranks": list(self.missing_ranks),
            "ranks_present_percent": self.ranks_present_percent,
            "sessions": self.sessions,
            "sessions_without_stop": self.sessions_without_stop,
            "session_ids_without_stop": list(self.session_ids_without_stop),
            "schema_versions": {str(version): events for version, events in self.schema_versions},
            "collectors": dict(self.collectors),
            "load_warnings": self.load_warnings,
            "ended_abruptly": self.ended_abruptly,
            "ended_abruptly_ranks": list(self.ended_abruptly_ranks),
        }


def counted_sessions(sessions: tuple[SessionSummary, ...]) -> tuple[SessionSummary, ...]:
    """The capture sessions: every session but those merged from single-rank sessions."""
    return tuple(summary for summary in sessions if summary.source != RANK_GROUP_SOURCE)


def _counts(column: pd.Series) -> Mapping[Any, int]:
    counts = column.value_counts(dropna=True, sort=False)
    return {value: int(count) for value, count in counts.items() if count > 0}


def ended_abruptly(loaded: LoadResult, present_ranks: Sequence[int]) -> tuple[int, ...]:
    """The present ranks that ended abruptly (see the module docstring), sorted. Per cut-short file,
    not per event: a job without one costs nothing here."""
    if not loaded.cut_short:
        return ()
    statuses = {summary.session_id: summary.status for summary in loaded.sessions}
    present = set(present_ranks)
    stamps, ranks = loaded.events["timestamp_ns"].to_numpy(), loaded.events["rank"].to_numpy()
    last_ns: dict[int, int] = {}  # the rank's last event in the diagnosed session
    found = set()
    for file in loaded.cut_short:
        rank = file.rank
        if file.session_group_id != loaded.selected_session_id or rank is None or rank not in present \
                or file.last_event_ns is None:
            continue
        # a legacy file's own session was merged away: the merge's status stands for it
        own_id = file.session_id if file.session_id in statuses else file.session_group_id
        if own_id is not None and statuses.get(own_id) is STOPPED:
            continue
        if rank not in last_ns:
            own = stamps[ranks == rank]
            last_ns[rank] = int(own.max()) if own.size else file.last_event_ns
        if file.last_event_ns >= last_ns[rank]:
            found.add(rank)
    return tuple(sorted(found))


def job_coverage(loaded: LoadResult, model: DiagnosticsModel) -> Coverage:
    """``loaded``'s coverage as ``model`` (built from ``loaded.events``) sees it."""
    expected, present = len(model.expected_ranks), len(model.present_ranks)
    percent = round(100.0 * present / expected, 2) if expected else None
    sessions = counted_sessions(loaded.sessions)
    unstopped = sorted(summary.session_id for summary in sessions if summary.status != STOPPED)
    events = loaded.events[["rank", "schema_version", "collector"]]
    ranks = events["rank"].to_numpy(dtype=np.int64)
    kept = np.isin(ranks, np.asarray(model.present_ranks, dtype=np.int64))
    if not kept.all():  # a rank filter (or nothing present): count only the diagnosed ranks' events
        events = events.loc[kept]
    versions = _counts(events["schema_version"])
    collectors = _counts(events["collector"])
    abrupt = ended_abruptly(loaded, model.present_ranks)
    return Coverage(
        expected_ranks=expected,
        present_ranks=present,
        missing_ranks=tuple(int(rank) for rank in model.missing_ranks),
        ranks_present_percent=percent,
        sessions=len(sessions),
        sessions_without_stop=len(unstopped),
        session_ids_without_stop=tuple(unstopped),
        schema_versions=tuple(sorted((int(version), count) for version, count in versions.items())),
        collectors=tuple(sorted((str(name), count) for name, count in collectors.items())),
        load_warnings=len(loaded.warnings),
        ended_abruptly=len(abrupt),
        ended_abruptly_ranks=abrupt,
    )
