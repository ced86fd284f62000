"""A job's attempts: each session it is diagnosed as, with what it came to, in time order.

An :class:`Attempt` is one session group of the job (a distributed rank group, a legacy merge, a
session of its own; see :func:`~stormwatch.events.sessions.session_groups`) numbered by start
time (``number`` of ``of``). It carries the session's lifecycle, its verdict and both first
causes, the ranks with an OOM, and where its own model.json and report are. model.json's
``attempts`` member is one :meth:`Attempt.as_json` per attempt; :meth:`Attempt.from_json` reads
it back. Times are ns since the epoch; ``report`` and ``model`` are relative to the job's report
folder (``sessions/<encoded id>/...``, see :mod:`.session_paths`).

Status (:class:`AttemptStatus`) is stormlog's session status put in a restart's terms: a rank
group is completed only when every member is; a session that did not complete and was followed
by an attempt that started after its end (else its last event) was interrupted, whatever its
manifest says; one without a stop and without a later attempt is ``running`` when a manifest
says so, else ``incomplete``. ``ended_at_ns`` is the session's end, else its members' latest end
(a rank group has one only when every member completed), else its last event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from stormwatch.analysis.markers import MarkerKind
from stormwatch.analysis.model import AnomalyIndicator, DiagnosticsModel, IndicatorKind
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.events.sessions import SessionStatus
from stormwatch.outputs.json_members import Members
from stormwatch.outputs.verdict import VerdictStatus

OOM_SIGNAL = "alert:error"  # an OOM is an ``error`` event; its marker says it was an OOM


class AttemptStatus(StrEnum):
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"  # stopped before completing: a manifest says so, or a later attempt followed
    RUNNING = "running"  # the latest attempt, still open in its manifest
    INCOMPLETE = "incomplete"  # the latest attempt, ended without a stop event


def attempt_status(statuses: Sequence[SessionStatus], *, restarted: bool) -> AttemptStatus:
    """The status of an attempt whose sessions (a group's members, else the session alone) have
    ``statuses``; ``restarted``: a later attempt of the job started after this one ended."""
    if statuses and all(status is SessionStatus.COMPLETED for status in statuses):
        return AttemptStatus.COMPLETED
    if restarted or SessionStatus.INTERRUPTED in statuses:
        return AttemptStatus.INTERRUPTED
    return AttemptStatus.RUNNING if SessionStatus.RUNNING in statuses else AttemptStatus.INCOMPLETE


@dataclass(frozen=True)
class FirstCause:
    """One first-cause indicator of an attempt; ``oom``: it is an OOM (an ``error`` event its
    rank's OOM marker stands for); ``timestamp_ns`` in ns since the epoch."""

    kind: IndicatorKind
    rank: int
    signal: str
    severity: str
    timestamp_ns: int
    phase_path: str | None = None
    confidence: float | None = None
    oom: bool = False

    @property
    def label(self) -> str:
        """``OOM`` for an OOM, else the signal (``alert:critical``, ``gap:persistent_drift``...)."""
        return "OOM" if self.oom else self.signal

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "rank": self.rank, "signal": self.signal, "severity": self.severity,
                "timestamp_ns": self.timestamp_ns, "phase_path": self.phase_path, "confidence": self.confidence,
                "oom": self.oom}

    @classmethod
    def from_json(cls, members: Members) -> FirstCause:
        """Raises :class:`~stormwatch.outputs.json_members.MemberError` naming a malformed member."""
        return cls(kind=members.enum("kind", IndicatorKind, "an indicator kind"), rank=members.integer("rank"),
                   signal=members.text("signal"), severity=members.text("severity"),
                   timestamp_ns=members.integer("timestamp_ns"), phase_path=members.optional_text("phase_path"),
                   confidence=members.optional_number("confidence"), oom=members.flag("oom", False))


def oom_ranks(model: DiagnosticsModel) -> tuple[int, ...]:
    """Ranks whose timeline holds an OOM marker, in rank order."""
    return tuple(sorted(rank for rank, markers in model.markers_by_rank.items()
                        if any(marker.kind == MarkerKind.OOM for marker in markers)))


def _is_oom(indicator: AnomalyIndicator, model: DiagnosticsModel) -> bool:
    if indicator.signal != OOM_SIGNAL:
        return False
    return any(marker.kind == MarkerKind.OOM and marker.start_ns == indicator.timestamp_ns
               for marker in model.markers_by_rank.get(indicator.rank, ()))


def first_causes(model: DiagnosticsModel) -> tuple[FirstCause | None, FirstCause | None]:
    """(earliest, most severe) first causes of ``model``; (None, None) when it found no anomaly."""
    found: dict[IndicatorKind, FirstCause] = {}
    for item in model.indicators:
        found[item.kind] = FirstCause(kind=item.kind, rank=item.rank, signal=item.signal, severity=item.severity,
                                      timestamp_ns=item.timestamp_ns, phase_path=item.phase_path,
                                      confidence=item.confidence, oom=_is_oom(item, model))
    return found.get(IndicatorKind.EARLIEST), found.get(IndicatorKind.MOST_SEVERE)


@dataclass(frozen=True)
class Attempt:
    """One session group of a job as it was diagnosed (``verdict`` None: it was not, see ``error``).

    Invariants: ``1 <= number <= of``; ``default`` marks the session the job's model is;
    ``report``/``model`` are None when the session's own outputs were not written (``error`` says why).
    """

    number: int
    of: int
    session_id: str
    status: AttemptStatus
    session_status: SessionStatus  # stormlog's status of the session (a rank group: completed or incomplete)
    started_at_ns: int
    ended_at_ns: int | None
    ranks_present: int | None = None
    ranks_expected: int | None = None
    verdict: VerdictStatus | None = None
    summary: str | None = None
    earliest: FirstCause | None = None
    most_severe: FirstCause | None = None
    oom_ranks: tuple[int, ...] = ()
    default: bool = False
    report: str | None = None
    model: str | None = None
    error: str | None = None

    @property
    def diagnosed(self) -> bool:
        return self.verdict is not None

    def cause_text(self) -> str:
        """What the attempt came to, in a few words: ``OOM on rank 3``, ``alert:critical on rank 1``,
        ``2 of 4 ranks missing``, ``no anomaly``, ``nothing loaded``, ``not diagnosed``."""
        if self.verdict is None:
            return "not diagnosed"
        if self.oom_ranks:
            plural = "s" if len(self.oom_ranks) > 1 else ""
            return f"OOM on rank{plural} {format_ranks(self.oom_ranks)}"
        if self.most_severe is not None:
            return f"{self.most_severe.label} on rank {self.most_severe.rank}"
        if self.verdict is VerdictStatus.EMPTY:
            return "nothing loaded"
        if self.ranks_present is not None and self.ranks_expected and self.ranks_present < self.ranks_expected:
            return f"{self.ranks_expected - self.ranks_present} of {self.ranks_expected} ranks missing"
        return "no anomaly"

    def describe(self) -> str:
        """``attempt 1 of 2, interrupted, OOM on rank 3``: which attempt, how it ended, what it found."""
        return f"attempt {self.number} of {self.of}, {self.status.value}, {self.cause_text()}"

    def as_json(self) -> dict[str, Any]:
        return {
            "attempt": self.number, "of": self.of, "session_id": self.session_id, "status": self.status.value,
            "session_status": self.session_status.value, "started_at_ns": self.started_at_ns,
            "ended_at_ns": self.ended_at_ns, "ranks_present": self.ranks_present,
            "ranks_expected": self.ranks_expected, "verdict": None if self.verdict is None else self.verdict.value,
            "summary": self.summary,
            IndicatorKind.EARLIEST.value: None if self.earliest is None else self.earliest.as_json(),
            IndicatorKind.MOST_SEVERE.value: None if self.most_severe is None else self.most_severe.as_json(),
            "oom_ranks": list(self.oom_ranks), "default": self.default, "report": self.report,
            "model": self.model, "error": self.error, "description": self.describe(),
        }

    @classmethod
    def from_json(cls, members: Members) -> Attempt:
        """An entry of model.json's ``attempts`` (its ``description`` is :meth:`describe`'s, not read);
        raises :class:`~stormwatch.outputs.json_members.MemberError` naming a malformed member."""
        def cause(kind: IndicatorKind) -> FirstCause | None:
            found = members.optional_member(kind.value)
            return None if found is None else FirstCause.from_json(found)

        status = members.enum("status", AttemptStatus, "an attempt status")
        return cls(
            number=members.integer("attempt"), of=members.integer("of"), session_id=members.text("session_id"),
            status=status,
            session_status=(members.optional_enum("session_status", SessionStatus, "a session status")
                            or SessionStatus(status.value)),  # written before it was kept: the attempt's
            started_at_ns=members.integer("started_at_ns"), ended_at_ns=members.optional_integer("ended_at_ns"),
            ranks_present=members.optional_integer("ranks_present"),
            ranks_expected=members.optional_integer("ranks_expected"),
            verdict=members.optional_enum("verdict", VerdictStatus, "a verdict status"),
            summary=members.optional_text("summary"),
            earliest=cause(IndicatorKind.EARLIEST), most_severe=cause(IndicatorKind.MOST_SEVERE),
            oom_ranks=members.integers("oom_ranks", ()), default=members.flag("default", False),
            report=members.optional_text("report"), model=members.optional_text("model"),
            error=members.optional_text("error"),
        )


def worst_attempt(attempts: Sequence[Attempt]) -> Attempt | None:
    """The attempt the job's verdict comes from: the worst verdict; on a tie the default session,
    else the earliest attempt. None when no attempt was diagnosed."""
    diagnosed = [attempt for attempt in attempts if attempt.verdict is not None]
    return min(diagnosed, key=lambda item: (-item.verdict.rank, not item.default, item.number),  # type: ignore[union-attr]
               default=None)
