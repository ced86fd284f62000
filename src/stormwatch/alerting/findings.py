"""What a notification says about a job: its first-cause indicators, read from model.json.

:class:`JobFinding` holds raw telemetry strings; every renderer escapes them for its channel
(after :func:`~.plain_text.one_line`). Times are integer ns since the Unix epoch;
``since_start_ns`` is measured from the earliest session start in the document (else its
earliest sample or marker). Besides the indicators it keeps the job's first OOM marker (``oom``,
kind ``oom``) and where each rank ran (``placements``: rank, host, device id), which alert
inhibition needs, and one ``leak`` fact per rank whose growth figure (model.json ``fleet.growth``)
says it leaks (``leaks``, :mod:`.leak_findings`). A job diagnosed as several sessions (model.json
``attempts``) is told by its worst attempt: the verdict is already the job's worst, the indicators
are that attempt's first causes, and ``attempt`` names it (an OOM in an earlier attempt is the
job's even when its latest attempt is clean). :func:`finding_to_json` and :func:`finding_from_json`
carry a finding through the alert state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.alerting.kinds import FLEET_KINDS, KIND_LABELS, AlertKind
from stormwatch.alerting.leak_findings import growth_of_document, leak_signal, leak_text
from stormwatch.alerting.plain_text import format_offset_ns, format_time_ns
from stormwatch.analysis.model import IndicatorKind
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.severity import Severity


@dataclass(frozen=True)
class IndicatorFact:
    """One fact of a job: a first-cause indicator (``kind``: an :class:`~stormwatch.analysis.model.IndicatorKind`
    value), or another :class:`~.kinds.AlertKind` value (``oom``, ``missing_ranks``, ``leak``, ``regression``,
    ``suspect_host``, ``capacity``; a regression's or capacity warning's rank is the one that set the
    value, -1 when unknown). ``timestamp_ns``: ns since the Unix epoch; ``since_start_ns``: from the job's start."""

    kind: str
    rank: int
    severity: Severity
    signal: str
    timestamp_ns: int
    phase_path: str | None
    details: str
    since_start_ns: int | None

    @property
    def label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind)

    @property
    def where(self) -> str:
        """``rank 3``; a suspect host's ``device 3``; a regression or capacity warning of unknown rank is
        the job's, ``all ranks``."""
        if self.kind == AlertKind.SUSPECT_HOST:
            return f"device {self.rank}"
        fleet = self.kind in (AlertKind.REGRESSION, AlertKind.CAPACITY)
        return "all ranks" if fleet and self.rank < 0 else f"rank {self.rank}"

    @property
    def when(self) -> str:
        if self.kind in FLEET_KINDS:  # no moment of its own: the history says it
            return "over the last nights" if self.kind == AlertKind.SUSPECT_HOST else "against earlier runs"
        if self.kind == AlertKind.LEAK:
            return "over the run"  # a slope over the run's steady state, not a moment
        offset = "" if self.since_start_ns is None else f" ({format_offset_ns(self.since_start_ns)} after start)"
        return format_time_ns(self.timestamp_ns) + offset


@dataclass(frozen=True)
class AttemptRef:
    """The attempt of a job of several sessions that its first causes come from (model.json's
    ``worst_session``): ``number`` of ``of`` in time order, its ``status`` (completed, interrupted,
    running, incomplete) and ``description`` (``attempt 1 of 2, interrupted, OOM on rank 3``)."""

    number: int
    of: int
    status: str
    description: str

    @property
    def short(self) -> str:
        """``attempt 1 of 2, interrupted``."""
        return f"attempt {self.number} of {self.of}, {self.status}"

    def as_json(self) -> dict[str, Any]:
        return {"number": self.number, "of": self.of, "status": self.status, "description": self.description}

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> AttemptRef:
        return cls(number=int(item["number"]), of=int(item["of"]), status=str(item["status"]),
                   description=str(item["description"]))


@dataclass(frozen=True)
class JobFinding:
    """A diagnosed job as notifications see it; ``report_url`` is the report link, if any."""

    job_id: str
    verdict: str
    summary: str
    indicators: tuple[IndicatorFact, ...]
    missing_ranks: tuple[int, ...]
    expected_ranks: int
    started_at_ns: int | None
    report_url: str | None = None
    oom: IndicatorFact | None = None
    placements: tuple[tuple[int, str, int | None], ...] = ()  # (rank, host, device id), known hosts only
    host: str | None = None  # a suspect-host finding's host (its device is the indicator's rank)
    attempt: AttemptRef | None = None  # a job of several sessions: the attempt the indicators come from
    leaks: tuple[IndicatorFact, ...] = ()  # one ``leak`` fact per leaking rank, rank order

    def rank_at(self, rank: int) -> tuple[str, int | None] | None:
        """(host, device id) where ``rank`` ran, if known."""
        return next(((host, device) for where, host, device in self.placements if where == rank), None)

    @property
    def missing_text(self) -> str | None:
        return format_ranks(self.missing_ranks) if self.missing_ranks else None

    def worst(self) -> Severity | None:
        return max((item.severity for item in self.indicators), key=lambda s: s.level, default=None)

    @classmethod
    def from_document(cls, document: Mapping[str, Any], *, report_url: str | None) -> JobFinding:
        """Read a parsed model.json (``orjson.loads`` of ``Diagnosis.model_json()``).

        Raises ValueError naming the missing or malformed member.
        """
        try:
            model = document["model"]
            started = _job_start_ns(document)
            indicators = tuple(_indicator(item, started) for item in model["indicators"])
            attempt, worst = _worst_attempt(document)
            if worst is not None and worst.get("default") is not True:  # an earlier (or other) attempt is worse
                indicators = _attempt_indicators(worst, attempt, started)
            verdict = document["verdict"]
            placements = _placements(document)
            return cls(
                job_id=str(document["job_id"]),
                verdict=str(verdict["status"]),
                summary=str(verdict.get("summary", "")),
                indicators=indicators,
                missing_ranks=tuple(int(rank) for rank in model.get("missing_ranks", ())),
                expected_ranks=len(model.get("expected_ranks", ())),
                started_at_ns=started,
                report_url=report_url,
                oom=_first_oom(model, started) or _attempt_oom(document, started),
                placements=placements,
                attempt=attempt,
                leaks=_leaks(document, placements, started),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a stormwatch model.json document: {type(exc).__name__}: {exc}") from None


def _indicator(item: Mapping[str, Any], started_ns: int | None) -> IndicatorFact:
    timestamp_ns = int(item["timestamp_ns"])
    phase = item.get("phase_path")
    return IndicatorFact(
        kind=str(item["kind"]),
        rank=int(item["rank"]),
        severity=Severity(item["severity"]),
        signal=str(item["signal"]),
        timestamp_ns=timestamp_ns,
        phase_path=None if phase is None else str(phase),
        details=str(item.get("details") or ""),
        since_start_ns=None if started_ns is None else timestamp_ns - started_ns,
    )


def _job_start_ns(document: Mapping[str, Any]) -> int | None:
    """Earliest session start, else the earliest timeline sample or marker in the document."""
    starts = [int(item["started_at_ns"]) for item in document.get("sessions", ()) if item.get("started_at_ns")]
    if starts:
        return min(starts)
    model = document.get("model", {})
    stamps: list[int] = []
    for timeline in model.get("per_rank_timelines", {}).values():
        stamps.extend(int(value) for value in timeline.get("timestamps_ns", ()))
    for markers in model.get("markers_by_rank", {}).values():
        stamps.extend(int(marker["start_ns"]) for marker in markers if marker.get("start_ns") is not None)
    return min(stamps) if stamps else None


def _worst_attempt(document: Mapping[str, Any]) -> tuple[AttemptRef | None, Mapping[str, Any] | None]:
    """The attempt the job's verdict comes from (``worst_session``) and its model.json entry, for a
    job diagnosed as several sessions; (None, None) for a job of one."""
    attempts = document.get("attempts") or ()
    worst_id = document.get("worst_session")
    if len(attempts) < 2 or worst_id is None:
        return None, None
    entry = next((item for item in attempts if item["session_id"] == worst_id), None)
    if entry is None:
        return None, None
    attempt = AttemptRef(number=int(entry["attempt"]), of=int(entry["of"]), status=str(entry["status"]),
                         description=str(entry["description"]))
    return attempt, entry


def _attempt_indicators(entry: Mapping[str, Any], attempt: AttemptRef | None,
                        started_ns: int | None) -> tuple[IndicatorFact, ...]:
    """The first causes of an attempt's model.json entry as indicators (earliest, then most severe),
    each saying which attempt it was found in."""
    where = "" if attempt is None else f"in {attempt.description} (session {entry['session_id']})"
    facts = []
    for kind in IndicatorKind:
        cause = entry.get(kind)
        if cause is None:
            continue
        timestamp_ns = int(cause["timestamp_ns"])
        phase = cause.get("phase_path")
        facts.append(IndicatorFact(
            kind=kind.value, rank=int(cause["rank"]), severity=Severity(cause["severity"]), signal=str(cause["signal"]),
            timestamp_ns=timestamp_ns, phase_path=None if phase is None else str(phase), details=where,
            since_start_ns=None if started_ns is None else timestamp_ns - started_ns,
        ))
    return tuple(facts)


def _attempt_oom(document: Mapping[str, Any], started_ns: int | None) -> IndicatorFact | None:
    """The OOM of the first attempt (model.json ``attempts``, time order) that ran out of memory, when the
    document's own session shows none: a job restarted after an OOM still had one."""
    for attempt in document.get("attempts") or ():
        ranks = attempt.get("oom_ranks") if isinstance(attempt, Mapping) else None
        if ranks:
            stamp = int(attempt.get("ended_at_ns") or attempt["started_at_ns"])
            details = f"OOM in {attempt.get('description') or 'an earlier attempt'}"
            return IndicatorFact(kind=AlertKind.OOM.value, rank=int(ranks[0]), severity=Severity.CRITICAL,
                                 signal=AlertKind.OOM.value, timestamp_ns=stamp, phase_path=None, details=details,
                                 since_start_ns=None if started_ns is None else stamp - started_ns)
    return None


def _first_oom(model: Mapping[str, Any], started_ns: int | None) -> IndicatorFact | None:
    """The earliest OOM marker of any rank (ties: lowest rank), as a critical fact of kind ``oom``."""
    found: tuple[int, int, str] | None = None
    for markers in model.get("markers_by_rank", {}).values():
        for marker in markers:
            if marker.get("kind") != "oom" or marker.get("start_ns") is None:
                continue
            candidate = (int(marker["start_ns"]), int(marker["rank"]), str(marker.get("label") or "OOM detected"))
            found = candidate if found is None or candidate[:2] < found[:2] else found
    if found is None:
        return None
    stamp, rank, label = found
    return IndicatorFact(kind=AlertKind.OOM.value, rank=rank, severity=Severity.CRITICAL, signal=AlertKind.OOM.value,
                         timestamp_ns=stamp, phase_path=None, details=label,
                         since_start_ns=None if started_ns is None else stamp - started_ns)


def _placements(document: Mapping[str, Any]) -> tuple[tuple[int, str, int | None], ...]:
    """(rank, host, device id) of each rank model.json's ``fleet.ranks`` places on a known host."""
    fleet = document.get("fleet")
    ranks = fleet.get("ranks", ()) if isinstance(fleet, Mapping) else ()
    out = []
    for item in ranks:
        if isinstance(item, Mapping) and isinstance(item.get("host"), str) and item.get("rank") is not None:
            device = item.get("device_id")
            out.append((int(item["rank"]), str(item["host"]), None if device is None else int(device)))
    return tuple(out)


def _leaks(document: Mapping[str, Any], placements: tuple[tuple[int, str, int | None], ...],
           started_ns: int | None) -> tuple[IndicatorFact, ...]:
    """A warning of kind ``leak`` per rank whose growth figure says it leaks (rank order), at the job's start."""
    where = {rank: (host, device) for rank, host, device in placements}
    facts = []
    for growth in sorted(growth_of_document(document), key=lambda item: item.rank):
        if not growth.leak:
            continue
        host, device = where.get(growth.rank, (None, None))
        facts.append(IndicatorFact(kind=AlertKind.LEAK.value, rank=growth.rank, severity=Severity.WARNING,
                                   signal=leak_signal(growth.rank), timestamp_ns=started_ns or 0, phase_path=None,
                                   details=leak_text(growth, host=host, device_id=device),
                                   since_start_ns=None if started_ns is None else 0))
    return tuple(facts)


def fact_to_json(fact: IndicatorFact) -> dict[str, Any]:
    return {"kind": fact.kind, "rank": fact.rank, "severity": fact.severity.value, "signal": fact.signal,
            "timestamp_ns": fact.timestamp_ns, "phase_path": fact.phase_path, "details": fact.details,
            "since_start_ns": fact.since_start_ns}


def fact_from_json(item: Mapping[str, Any]) -> IndicatorFact:
    since, phase = item.get("since_start_ns"), item.get("phase_path")
    return IndicatorFact(kind=str(item["kind"]), rank=int(item["rank"]), severity=Severity(item["severity"]),
                         signal=str(item["signal"]), timestamp_ns=int(item["timestamp_ns"]),
                         phase_path=None if phase is None else str(phase), details=str(item.get("details") or ""),
                         since_start_ns=None if since is None else int(since))


def finding_to_json(job: JobFinding) -> dict[str, Any]:
    """``job`` as plain JSON data (:func:`finding_from_json` reads it back equal)."""
    return {"job_id": job.job_id, "verdict": job.verdict, "summary": job.summary,
            "indicators": [fact_to_json(item) for item in job.indicators], "missing_ranks": list(job.missing_ranks),
            "expected_ranks": job.expected_ranks, "started_at_ns": job.started_at_ns, "report_url": job.report_url,
            "oom": None if job.oom is None else fact_to_json(job.oom),
            "placements": [list(item) for item in job.placements], "host": job.host,
            "attempt": None if job.attempt is None else job.attempt.as_json(),
            **({"leaks": [fact_to_json(item) for item in job.leaks]} if job.leaks else {})}


def finding_from_json(item: Mapping[str, Any]) -> JobFinding:
    """Raises KeyError/TypeError/ValueError on a malformed member."""
    started, url, oom, host = item.get("started_at_ns"), item.get("report_url"), item.get("oom"), item.get("host")
    attempt = item.get("attempt")
    return JobFinding(
        job_id=str(item["job_id"]), verdict=str(item["verdict"]), summary=str(item.get("summary", "")),
        indicators=tuple(fact_from_json(fact) for fact in item.get("indicators", ())),
        missing_ranks=tuple(int(rank) for rank in item.get("missing_ranks", ())),
        expected_ranks=int(item.get("expected_ranks", 0)), started_at_ns=None if started is None else int(started),
        report_url=None if url is None else str(url), oom=None if oom is None else fact_from_json(oom),
        placements=tuple((int(rank), str(where), None if device is None else int(device))
                         for rank, where, device in item.get("placements", ())),
        host=None if host is None else str(host),
        attempt=None if attempt is None else AttemptRef.from_json(attempt),
        leaks=tuple(fact_from_json(fact) for fact in item.get("leaks", ())),
    )
