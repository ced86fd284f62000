"""``reports/notifications.jsonl``: every notification decision, one JSON object per line, append-only.

A line records one finding (key: job id, indicator kind, rank, signal, timestamp)
and the state of each target after the decision::

    {"key": "job-7|most_severe|0|alert:critical|1700000003500000000", "job_id": "job-7",
     "kind": "most_severe", "rank": 0, "signal": "alert:critical", "timestamp_ns": 1700000003500000000,
     "severity": "critical", "decided_at": "2026-01-02T02:00:00+00:00",
     "channels": {"slack": {"status": "sent", "attempts": 1},
                  "email": {"status": "failed", "attempts": 3, "error": "SMTPServerDisconnected: ..."},
                  "llama-team/slack": {"status": "silenced", "attempts": 0}},
     "alert": "job|most_severe|alert:critical", "state": "firing", "silenced_by": "s-1a2b3c4d"}

A target is ``slack``/``email`` for the default receiver (the flags' webhook and addresses) and
``<receiver>/<channel>`` for a receiver of the routes file. ``alert`` (the fingerprint), ``state``
(``firing``, ``still_firing``, ``resolved``), ``silenced_by`` and ``inhibited_by`` are written by
the alerting layer and optional when read. A resolved alert's line carries the finding it last
showed and the resolution time as its ``timestamp_ns``.

Lines with ``"type": "config"`` record a routes or silences file that could not be used (or is
usable again: ``error`` null), naming the file and line; they are folded per file. Lines with
``"type": "push"`` record a failed metrics push (:mod:`stormwatch.alerting.push_notes`).

The latest line of a key is its current state. Identity is the five fields, not the
``key`` text (which is for people and grep). A line whose sends were attempted carries the
deciding audit's ``claim`` token: the ledger is written before the alert state settles, so a
later audit that finds that claim still in alerts.json reads here what the sends came to.
Unreadable lines (a torn last write) are skipped with a problem noted, never fatal; existing
bytes are never rewritten, except by an audit's fold, which keeps the newest line of each alert
behind a ``"type": "carried"`` line, every line read moved to an archive first
(:mod:`stormwatch.alerting.ledger_carry`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from stormwatch.alerting.push_notes import PUSH, PushNote
from stormwatch.analysis.model import IndicatorKind
from stormwatch.severity import Severity


class ChannelName(StrEnum):
    """How a receiver is told: the two built-in chat/mail channels, then the integrations of a routes
    file's receivers (:mod:`stormwatch.alerting.receivers`)."""

    SLACK = "slack"
    EMAIL = "email"
    ALERTMANAGER = "alertmanager"
    WEBHOOK = "webhook"
    PAGERDUTY = "pagerduty"
    TEAMS = "teams"


#: The default receiver's channels: every ledger line of it names both (it always did).
DEFAULT_CHANNELS = (ChannelName.SLACK, ChannelName.EMAIL)


class ChannelStatus(StrEnum):
    SENT = "sent"
    FAILED = "failed"
    NOT_CONFIGURED = "not_configured"
    SKIPPED_BELOW_THRESHOLD = "skipped_below_threshold"
    STILL_FIRING = "still_firing"  # sent before, within the repeat interval: not sent again
    SILENCED = "silenced"
    INHIBITED = "inhibited"
    IN_FLIGHT = "in_flight"  # another audit claimed this send moments ago
    RESOLVED = "resolved"  # resolved; no resolved message asked for, or nobody was told it fired


_CHANNELS = {channel.value: channel for channel in ChannelName}
DEFAULT_RECEIVER = "default"


def target_name(receiver: str, channel: ChannelName) -> str:
    """``slack``/``email`` for the default receiver, ``<receiver>/<channel>`` for another."""
    return channel.value if receiver == DEFAULT_RECEIVER else f"{receiver}/{channel.value}"


def parse_target(text: str) -> tuple[str, ChannelName] | None:
    """(receiver, channel) of a target name, or None for a name this version does not know."""
    receiver, _, channel = text.rpartition("/")
    if channel not in _CHANNELS:
        return None
    return receiver or DEFAULT_RECEIVER, _CHANNELS[channel]


@dataclass(frozen=True, slots=True)
class ChannelOutcome:
    """A channel's state for one finding; ``attempts``: sends tried in the deciding call
    (0 when none was made); ``error``: why the last one failed, secrets redacted."""

    status: ChannelStatus
    attempts: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status.value, "attempts": self.attempts}
        if self.error is not None:
            out["error"] = self.error
        return out


@functools.lru_cache(maxsize=1024)
def _outcome(status: str, attempts: int, error: str | None) -> ChannelOutcome:
    """One shared object per distinct outcome: a ledger repeats a few thousand times over (frozen, so
    sharing is safe; bench/README.md, "post-job memory")."""
    return ChannelOutcome(ChannelStatus(status), attempts, error)


@functools.lru_cache(maxsize=256)
def _known_target(name: str) -> bool:
    return parse_target(name) is not None


@dataclass(frozen=True, slots=True)
class FindingKey:
    job_id: str
    kind: str
    rank: int
    signal: str
    timestamp_ns: int

    @property
    def text(self) -> str:
        return f"{self.job_id}|{self.kind}|{self.rank}|{self.signal}|{self.timestamp_ns}"


@dataclass(frozen=True, slots=True)
class Decision:
    """One ledger line: a finding, its severity, when it was decided (ISO 8601) and each target's state
    (keys: target names; a :class:`ChannelName` is the default receiver's target of that name)."""

    key: FindingKey
    severity: Severity
    decided_at: str
    channels: Mapping[str, ChannelOutcome]
    alert: str | None = None
    state: str | None = None
    silenced_by: str | None = None
    inhibited_by: str | None = None
    claim: str | None = None  # the deciding call's claim token, on lines whose sends it attempted

    def status(self, channel: str) -> ChannelStatus | None:
        outcome = self.channels.get(channel)
        return None if outcome is None else outcome.status

    def to_line(self) -> bytes:
        document: dict[str, Any] = {
            "key": self.key.text,
            "job_id": self.key.job_id,
            "kind": self.key.kind,
            "rank": self.key.rank,
            "signal": self.key.signal,
            "timestamp_ns": self.key.timestamp_ns,
            "severity": self.severity.value,
            "decided_at": self.decided_at,
            "channels": {str(name): outcome.to_json() for name, outcome in self.channels.items()},
        }
        extra = {"alert": self.alert, "state": self.state, "silenced_by": self.silenced_by,
                 "inhibited_by": self.inhibited_by, "claim": self.claim}
        document.update((name, value) for name, value in extra.items() if value is not None)
        return orjson.dumps(document) + b"\n"

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Decision:
        # texts that repeat from line to line (kinds, signals, audit times, alert fingerprints) are interned
        key = FindingKey(
            job_id=str(document["job_id"]),
            kind=sys.intern(str(document["kind"])),
            rank=int(document["rank"]),
            signal=sys.intern(str(document["signal"])),
            timestamp_ns=int(document["timestamp_ns"]),
        )
        channels: dict[str, ChannelOutcome] = {}
        for name, raw in document["channels"].items():
            if _known_target(name):  # a target this version does not know is ignored
                error = raw.get("error")
                channels[name] = _outcome(raw["status"], int(raw.get("attempts", 0)),
                                          None if error is None else str(error))
        optional = {name: None if document.get(name) is None else sys.intern(str(document[name]))
                    for name in ("alert", "state", "silenced_by", "inhibited_by", "claim")}
        return cls(key=key, severity=Severity(document["severity"]),
                   decided_at=sys.intern(str(document["decided_at"])), channels=channels, **optional)


@dataclass(frozen=True)
class ConfigNote:
    """A ``"type": "config"`` line: ``file`` could not be used (``error``, naming the line) or, with
    ``error`` None, is usable again."""

    file: str
    error: str | None
    decided_at: str

    def to_line(self) -> bytes:
        return orjson.dumps({"type": "config", "file": self.file, "error": self.error,
                             "decided_at": self.decided_at}) + b"\n"

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> ConfigNote:
        error = document.get("error")
        return cls(str(document["file"]), None if error is None else str(error), str(document["decided_at"]))


@dataclass(frozen=True)
class LedgerState:
    """The ledger folded: latest decision per finding, plus notes on lines that could not be read."""

    latest: Mapping[FindingKey, Decision]
    problems: tuple[str, ...] = ()
    config: Mapping[str, ConfigNote] = field(default_factory=dict)  # latest note per file
    #: What each claim's sends came to: claim token -> (alert fingerprint text, target) -> the line.
    claims: Mapping[str, Mapping[tuple[str, str], Decision]] = field(default_factory=dict)
    pushes: Mapping[str, PushNote] = field(default_factory=dict)  # latest metrics push line per gateway

    def status(self, key: FindingKey, channel: str) -> ChannelStatus | None:
        decision = self.latest.get(key)
        return None if decision is None else decision.status(channel)


def read_ledger(data: bytes | None) -> LedgerState:
    latest: dict[FindingKey, Decision] = {}
    config: dict[str, ConfigNote] = {}
    claims: dict[str, dict[tuple[str, str], Decision]] = {}
    pushes: dict[str, PushNote] = {}
    problems: list[str] = []
    for number, line in enumerate((data or b"").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            document = orjson.loads(line)
            if isinstance(document, dict) and document.get("type") == "config":
                note = ConfigNote.from_json(document)
                config[note.file] = note
                continue
            if isinstance(document, dict) and document.get("type") == PUSH:  # stormwatch.alerting.push_notes
                push = PushNote.from_json(document)
                pushes[push.gateway] = push
                continue
            if isinstance(document, dict) and document.get("type") == "carried":
                continue  # a carried ledger's first line (stormwatch.alerting.ledger_carry)
            decision = Decision.from_json(document)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            problems.append(f"notifications.jsonl line {number}: unreadable ({type(exc).__name__}); skipped")
            continue
        latest[decision.key] = decision
        if decision.claim is not None and decision.alert is not None:
            recorded = claims.setdefault(decision.claim, {})
            for target in decision.channels:
                recorded[decision.alert, target] = decision
    return LedgerState(latest, tuple(problems), config, claims, pushes)


@dataclass(frozen=True)
class LedgerRepair:
    """A ledger without its unreadable lines (``kept``) and those lines' 1-based numbers."""

    kept: bytes
    dropped: tuple[int, ...]


def without_unreadable_lines(data: bytes | None) -> LedgerRepair:
    """``data`` with every line :func:`read_ledger` cannot read taken out (blank lines too), the rest
    byte for byte; a torn last line (no newline) is dropped like any other unreadable line."""
    kept: list[bytes] = []
    dropped: list[int] = []
    for number, line in enumerate((data or b"").splitlines(), start=1):
        if not line.strip():
            continue
        if read_ledger(line).problems:
            dropped.append(number)
        else:
            kept.append(line + b"\n")
    return LedgerRepair(b"".join(kept), tuple(dropped))


def append_lines(data: bytes | None, decisions: Iterable[Decision | ConfigNote]) -> bytes:
    """``data`` unchanged, then one line per decision (a newline first if ``data`` lacks its last one)."""
    head = data or b""
    lines = b"".join(decision.to_line() for decision in decisions)
    if not lines:
        return head
    if head and not head.endswith(b"\n"):
        head += b"\n"
    return head + lines


def pending_job_ids(
    data: bytes | None, *, channels: Iterable[ChannelName], notify_on: Severity = Severity.CRITICAL
) -> set[str]:
    """Job ids with a finding at or above ``notify_on`` not yet sent on one of ``channels``
    (the configured ones): the jobs a caller should pass again even if they were not re-diagnosed."""
    wanted = tuple(channels)
    return {
        key.job_id
        for key, decision in read_ledger(data).latest.items()
        if decision.severity.level >= notify_on.level
        and any(decision.status(channel) != ChannelStatus.SENT for channel in wanted)
    }


_RESOLVED = "resolved"  # a line's ``state`` once its alert resolved (alert_records.Transition imports us)


def newest_per_alert(state: LedgerState) -> dict[str, Decision]:
    """Each alert's newest decision (by ``decided_at``), keyed by its ``alert`` fingerprint, or by the
    finding's key for a line written before there was one."""
    newest: dict[str, Decision] = {}
    for decision in state.latest.values():  # in order of first appearance; decided_at orders them
        alert = decision.alert or decision.key.text
        known = newest.get(alert)
        if known is None or known.decided_at <= decision.decided_at:
            newest[alert] = decision
    return newest


def firing_job_ids(state: LedgerState) -> frozenset[str]:
    """The job ids whose alerts the ledger shows firing: per alert, the job of its newest line
    (:func:`newest_per_alert`), unless that line resolved it. What an alert state rebuilt from the
    ledger must observe again: without it an unchanged job's firing alert would be forgotten and its
    resolution never sent."""
    return frozenset(decision.key.job_id for decision in newest_per_alert(state).values()
                     if decision.state != _RESOLVED)


_UNSETTLED = frozenset({ChannelStatus.FAILED, ChannelStatus.IN_FLIGHT,
                        ChannelStatus.SKIPPED_BELOW_THRESHOLD})


def undecided(
    state: LedgerState, job_id: str, indicators: Mapping[IndicatorKind, Mapping[str, Any] | None], *,
    channels: Iterable[ChannelName], notify_on: Severity,
) -> bool:
    """Whether a job's first-cause indicators (by kind: rank, signal, timestamp_ns, severity) still
    need a decision: one has none in the ledger, or reaches ``notify_on`` and a target of its line
    failed, is in flight or was below the threshold then, or one of ``channels`` (the default
    receiver's configured ones) was not configured when it was decided. Sent, still firing, silenced,
    inhibited and resolved are settled. A job for which this is False needs no finding."""
    wanted = tuple(channels)
    for kind, item in indicators.items():
        if not item:
            continue
        try:
            key = FindingKey(job_id=job_id, kind=kind.value, rank=int(item["rank"]), signal=str(item["signal"]),
                             timestamp_ns=int(item["timestamp_ns"]))
            severity = Severity(item["severity"])
        except (KeyError, TypeError, ValueError):
            return True  # unreadable here: let the model.json decide
        decision = state.latest.get(key)
        if decision is None:
            return True
        if severity.level < notify_on.level:
            continue
        if any(outcome.status in _UNSETTLED for outcome in decision.channels.values()):
            return True
        if any(decision.status(channel) in (None, ChannelStatus.NOT_CONFIGURED) for channel in wanted
               if decision.alert is None or decision.status(channel) is not None):
            return True
    return False
