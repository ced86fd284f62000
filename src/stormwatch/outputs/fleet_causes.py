"""A fleet.json row's first causes (``earliest``, ``most_severe``), each told where and when.

Each cause dict holds the indicator (:data:`INDICATOR_FIELDS`) and, so a page can say
"Out of memory on rank 3 (gpu-node-01, GPU 3), 20.0 s into the job" from fleet.json alone:

- ``oom``: the cause is an out-of-memory error (an ``alert:error`` event its rank's OOM marker
  stands for; :class:`~stormwatch.outputs.attempts.FirstCause`);
- ``host`` and ``device_id``: where its rank ran (the session's fleet facts; None: not known;
  a negative device id is the CPU);
- ``since_start_ns``: ns from the start of the run it was found in (the worst attempt's start for a
  job of several sessions, else its session's, else the first sample diagnosed) to the cause;
  None when no start is known;
- ``oom_dump``: for an OOM, what the rank's OOM flight-recorder dump says
  (:meth:`~stormwatch.formats.oom_dump.OomDump.sentence`: ``out of memory on rank 3: tried to
  allocate 2.0 GiB with 1.1 GiB free of 80 GiB``), None without a dump.

Rows written before these members existed lack them: readers take a missing member as None
(``oom``: False).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.formats.oom_dump import OomDump
from stormwatch.outputs.attempts import Attempt, FirstCause, first_causes
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.document_attempts import AttemptEntry

#: The indicator's own members, as fleet.json has always stored them.
INDICATOR_FIELDS = ("rank", "signal", "severity", "timestamp_ns", "phase_path", "confidence")
#: What this module adds to each cause dict.
PLACE_FIELDS = ("oom", "host", "device_id", "since_start_ns", "oom_dump")


@dataclass(frozen=True)
class CauseContext:
    """What places a cause: ``placements`` rank -> (host, device id), ``start_ns`` the run's start
    (ns since the epoch, None: unknown), ``dumps`` the job's OOM dumps, ``session_id`` the run's."""

    placements: Mapping[int, tuple[str | None, int | None]]
    start_ns: int | None
    dumps: Sequence[OomDump] = ()
    session_id: str | None = None

    def dump_sentence(self, rank: int) -> str | None:
        """The sentence of the dump of ``rank`` (of this run's session first); None without one."""
        mine = [dump for dump in self.dumps if dump.rank == rank]
        if not mine and len(self.dumps) == 1 and self.dumps[0].rank is None:
            mine = list(self.dumps)  # a dump that did not record its rank, and no other
        mine.sort(key=lambda dump: dump.session_id != self.session_id)
        return mine[0].sentence() if mine else None

    def cause(self, cause: FirstCause | None) -> dict[str, Any] | None:
        """``cause`` as a fleet.json row stores it (module docstring); None for None."""
        if cause is None:
            return None
        data: dict[str, Any] = {name: getattr(cause, name) for name in INDICATOR_FIELDS}
        host, device = self.placements.get(cause.rank, (None, None))
        since = None if self.start_ns is None else cause.timestamp_ns - self.start_ns
        data.update(oom=cause.oom, host=host, device_id=device, since_start_ns=since,
                    oom_dump=self.dump_sentence(cause.rank) if cause.oom else None)
        return data


def _first_sample_ns(model: DiagnosticsModel) -> int | None:
    """The earliest timestamp of any rank's timeline (ns since the epoch); None without samples."""
    firsts = [int(timeline["timestamps_ns"][0]) for timeline in model.per_rank_timelines.values()
              if "timestamps_ns" in timeline and len(timeline["timestamps_ns"])]
    return min(firsts, default=None)


def _session_start_ns(document: JobDocument) -> int | None:
    """The selected session's start, else the first sample the model diagnosed."""
    starts = [item.started_at_ns for item in document.sessions if item.session_id == document.selected_session_id]
    return min(starts) if starts else _first_sample_ns(document.model)


def _attempt_context(document: JobDocument, entry: AttemptEntry) -> CauseContext:
    attempt: Attempt = entry.attempt
    placements = {rank.row.rank: (rank.host, rank.device_id) for rank in entry.ranks}
    return CauseContext(placements=placements, start_ns=attempt.started_at_ns, dumps=document.oom_dumps,
                        session_id=attempt.session_id)


def _document_context(document: JobDocument) -> CauseContext:
    facts = () if document.fleet is None else document.fleet.facts.ranks
    return CauseContext(placements={fact.rank: (fact.host, fact.device_id) for fact in facts},
                        start_ns=_session_start_ns(document), dumps=document.oom_dumps,
                        session_id=document.selected_session_id)


def row_causes(document: JobDocument) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(earliest, most severe) of the run the job's verdict comes from, as fleet.json rows store them:
    its worst attempt's for a job of several sessions, else the document's own model's."""
    worst = next((entry for entry in document.attempts or () if entry.attempt.session_id == document.worst_session),
                 None)
    if worst is not None:
        context = _attempt_context(document, worst)
        return context.cause(worst.attempt.earliest), context.cause(worst.attempt.most_severe)
    context = _document_context(document)
    earliest, most_severe = first_causes(document.model)
    return context.cause(earliest), context.cause(most_severe)
