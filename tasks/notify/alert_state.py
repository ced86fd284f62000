"""Alert state per fingerprint: firing or resolved, when, and what each target was last told.

``reports/alerts.json`` holds an :class:`AlertBook`: one :class:`AlertRecord` per fingerprint
(the latest episode: a resolved alert that fires again starts a new one, its targets reset), and
per job name the run last evaluated. A target's :class:`TargetState` says when it was last told
the alert fires (``notified_at``, in this episode), whether the resolution was sent
(``resolved_at``), the last decision (``status``) and, while a send is under way, the claim
(``claim`` token and ``claimed_at``) that keeps a second audit from sending it too.

:func:`advance` applies an audit's observations: new alerts fire, observed ones are still firing,
firing ones in the audit's scope that were not observed resolve. Resolved records older than
:data:`KEEP_RESOLVED` with nothing left to send are dropped. Times are ISO 8601 UTC strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import orjson

from stormwatch.history.job_names import JobNamePattern
from stormwatch.severity import Severity
from stormwatch.tasks.notify.findings import (
    IndicatorFact,
    JobFinding,
    fact_from_json,
    fact_to_json,
    finding_from_json,
    finding_to_json,
)
from stormwatch.tasks.notify.ledger import ChannelStatus, Decision, FindingKey
from stormwatch.tasks.notify.observations import (
    AlertKind,
    Fingerprint,
    Labels,
    Observed,
    RunMark,
    fingerprint_of_key,
)

VERSION = 1
KEEP_RESOLVED = timedelta(days=30)


class AlertStatus(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


class Transition(StrEnum):
    """What this audit did to an alert."""

    NEW = "firing"
    STILL_FIRING = "still_firing"
    RESOLVED = "resolved"
    NONE = "none"  # not evaluated now


@dataclass(frozen=True)
class TargetState:
    status: ChannelStatus
    notified_at: str | None = None
    resolved_at: str | None = None
    attempts: int = 0
    error: str | None = None
    claim: str | None = None
    claimed_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status.value}
        for name in ("notified_at", "resolved_at", "error", "claim", "claimed_at"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.attempts:
            out["attempts"] = self.attempts
        return out

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> TargetState:
        def text(name: str) -> str | None:
            return None if item.get(name) is None else str(item[name])

        return cls(ChannelStatus(item["status"]), text("notified_at"), text("resolved_at"),
                   int(item.get("attempts", 0)), text("error"), text("claim"), text("claimed_at"))


@dataclass(frozen=True)
class AlertRecord:
    """One alert's latest episode. ``key``, ``fact``, ``job``: its latest observation (what a message
    says); ``severity``: after inhibition raised it (a source takes the worst of what it inhibits)."""

    fingerprint: Fingerprint
    status: AlertStatus
    severity: Severity
    started_at: str
    last_seen_at: str
    key: FindingKey
    fact: IndicatorFact
    job: JobFinding
    resolved_at: str | None = None
    silenced_by: str | None = None
    inhibited_by: str | None = None
    targets: Mapping[str, TargetState] = field(default_factory=dict)

    @property
    def labels(self) -> Labels:
        """What routes and silences match: the run that last showed it, its name, kind, severity..."""
        fingerprint = self.fingerprint
        job_id = "" if fingerprint.kind is AlertKind.SUSPECT_HOST else self.key.job_id
        return Labels(job_id, fingerprint.job_name, fingerprint.kind, self.severity, fingerprint.signal,
                      fingerprint.host)

    def to_json(self) -> dict[str, Any]:
        fingerprint, key = self.fingerprint, self.key
        return {
            "alert": fingerprint.text, "job_name": fingerprint.job_name, "kind": fingerprint.kind.value,
            "signal": fingerprint.signal, "host": fingerprint.host, "device": fingerprint.device,
            "status": self.status.value, "severity": self.severity.value, "started_at": self.started_at,
            "last_seen_at": self.last_seen_at, "resolved_at": self.resolved_at, "silenced_by": self.silenced_by,
            "inhibited_by": self.inhibited_by,
            "key": [key.job_id, key.kind, key.rank, key.signal, key.timestamp_ns],
            "fact": fact_to_json(self.fact), "job": finding_to_json(self.job),
            "targets": {name: target.to_json() for name, target in sorted(self.targets.items())},
        }

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> AlertRecord:
        device = item.get("device")
        fingerprint = Fingerprint(str(item["job_name"]), AlertKind(item["kind"]), str(item["signal"]),
                                  None if item.get("host") is None else str(item["host"]),
                                  None if device is None else int(device))
        job_id, kind, rank, signal, stamp = item["key"]
        optional = {name: None if item.get(name) is None else str(item[name])
                    for name in ("resolved_at", "silenced_by", "inhibited_by")}
        return cls(fingerprint=fingerprint, status=AlertStatus(item["status"]), severity=Severity(item["severity"]),
                   started_at=str(item["started_at"]), last_seen_at=str(item["last_seen_at"]),
                   key=FindingKey(str(job_id), str(kind), int(rank), str(signal), int(stamp)),
                   fact=fact_from_json(item["fact"]), job=finding_from_json(item["job"]),
                   targets={str(name): TargetState.from_json(raw) for name, raw in item.get("targets", {}).items()},
                   **optional)


@dataclass(frozen=True)
class AlertBook:
    """Every alert's record and the run last evaluated per job name; ``problems``: records that could
    not be read (skipped)."""

    records: Mapping[Fingerprint, AlertRecord] = field(default_factory=dict)
    runs: Mapping[str, RunMark] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def to_bytes(self) -> bytes:
        """Compact JSON, one alert per line (diffable, greppable, a few hundred bytes an alert)."""
        runs = orjson.dumps({name: {"job_id": run.job_id, "started_at_ns": run.started_at_ns}
                             for name, run in sorted(self.runs.items())})
        alerts = b",\n".join(orjson.dumps(self.records[key].to_json())
                             for key in sorted(self.records, key=Fingerprint.sort_key))
        return b'{"version": %d, "runs": %s, "alerts": [\n%s\n]}\n' % (VERSION, runs, alerts)


def read_book(data: bytes | None) -> AlertBook:
    """The alert state from ``alerts.json`` bytes (None: no state yet). A record that cannot be read is
    skipped with a problem noted; a document that cannot be read at all is an empty book with one."""
    if not data:
        return AlertBook()
    try:
        document = orjson.loads(data)
        if not isinstance(document, dict) or document.get("version") != VERSION:
            raise ValueError("not an alert state document of version 1")
        runs = {str(name): RunMark(int(run["started_at_ns"]), str(run["job_id"]))
                for name, run in document.get("runs", {}).items()}
        items = document.get("alerts", [])
    except (orjson.JSONDecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return AlertBook(problems=(f"alerts.json unreadable ({type(exc).__name__}); starting a new alert state",))
    records: dict[Fingerprint, AlertRecord] = {}
    problems = []
    for number, item in enumerate(items, start=1):
        try:
            record = AlertRecord.from_json(item)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            problems.append(f"alerts.json alert {number}: unreadable ({type(exc).__name__}); skipped")
            continue
        records[record.fingerprint] = record
    return AlertBook(records, runs, tuple(problems))


def _pending(record: AlertRecord) -> bool:
    """A resolved record with a resolution still to retry."""
    return any(target.status is ChannelStatus.FAILED and target.notified_at and not target.resolved_at
               for target in record.targets.values())


def _placed_at(job: JobFinding, rank: int) -> JobFinding:
    """``job`` keeping only where ``rank`` ran (all inhibition needs; a 64-rank job's record stays small)."""
    kept = tuple(item for item in job.placements if item[0] == rank)
    return job if kept == job.placements else replace(job, placements=kept)


def advance(book: AlertBook, observed: Observed, *, now: datetime) -> tuple[AlertBook, dict[Fingerprint, Transition]]:
    """The book after an audit's observations, and what happened to each record."""
    stamp = now.isoformat()
    records = dict(book.records)
    transitions = {fingerprint: Transition.NONE for fingerprint in records}
    seen = set()
    for item in observed.observations:
        seen.add(item.fingerprint)
        previous = records.get(item.fingerprint)
        job = _placed_at(item.job, item.fact.rank)
        if previous is None or previous.status is AlertStatus.RESOLVED:
            records[item.fingerprint] = AlertRecord(item.fingerprint, AlertStatus.FIRING, item.severity, stamp, stamp,
                                                    item.key, item.fact, job)
            transitions[item.fingerprint] = Transition.NEW
        else:
            records[item.fingerprint] = replace(previous, severity=item.severity, last_seen_at=stamp, key=item.key,
                                                fact=item.fact, job=job)
            transitions[item.fingerprint] = Transition.STILL_FIRING
    for fingerprint, record in list(records.items()):
        if fingerprint in seen or not observed.scope.covers(fingerprint) or record.status is not AlertStatus.FIRING:
            continue
        records[fingerprint] = replace(record, status=AlertStatus.RESOLVED, resolved_at=stamp)
        transitions[fingerprint] = Transition.RESOLVED
    horizon = (now - KEEP_RESOLVED).isoformat()
    for fingerprint, record in list(records.items()):
        if (record.status is AlertStatus.RESOLVED and (record.resolved_at or "") < horizon
                and not _pending(record)):
            del records[fingerprint]
            del transitions[fingerprint]
    runs = {**book.runs, **observed.runs}
    return AlertBook(records, runs, book.problems), transitions


def seeded(book: AlertBook, transitions: Mapping[Fingerprint, Transition], latest: Mapping[FindingKey, Decision],
           names: JobNamePattern) -> AlertBook:
    """The book with new alerts marked as already told wherever the ledger (written before the alert
    state existed) shows a finding of theirs sent: upgrading never sends an alert again."""
    sent_at: dict[Fingerprint, dict[str, str]] = {}
    for key, decision in latest.items():
        fingerprint = fingerprint_of_key(key, names)
        if fingerprint is None:
            continue
        for target, outcome in decision.channels.items():
            if outcome.status is ChannelStatus.SENT:
                told = sent_at.setdefault(fingerprint, {})
                told[target] = max(told.get(target, ""), decision.decided_at)
    records = dict(book.records)
    for fingerprint, record in book.records.items():
        if transitions.get(fingerprint) is Transition.NEW and fingerprint in sent_at:
            targets = {target: TargetState(ChannelStatus.SENT, at) for target, at in sent_at[fingerprint].items()}
            records[fingerprint] = replace(record, targets=targets)
    return AlertBook(records, book.runs, book.problems)


def merged(data: bytes | None, token: str, settled: Mapping[tuple[Fingerprint, str], TargetState]) -> bytes | None:
    """``data`` (an alert state another audit wrote after this one claimed its sends) with this one's
    outcomes applied to the targets still holding its claim ``token``; None when ``data`` is unreadable."""
    book = read_book(data)
    if book.problems and not book.records:
        return None
    records = dict(book.records)
    for (fingerprint, target), outcome in settled.items():
        record = records.get(fingerprint)
        current = None if record is None else record.targets.get(target)
        if record is not None and current is not None and current.claim == token:
            records[fingerprint] = replace(record, targets={**record.targets, target: outcome})
    return AlertBook(records, book.runs).to_bytes()
