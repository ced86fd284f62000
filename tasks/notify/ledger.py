"""``reports/notifications.jsonl``: every notification decision, one JSON object per line, append-only.

A line records one finding (key: job id, indicator kind, rank, signal, timestamp)
and the state of each channel after the decision::

    {"key": "job-7|most_severe|0|alert:critical|1700000003500000000", "job_id": "job-7",
     "kind": "most_severe", "rank": 0, "signal": "alert:critical", "timestamp_ns": 1700000003500000000,
     "severity": "critical", "decided_at": "2026-01-02T02:00:00+00:00",
     "channels": {"slack": {"status": "sent", "attempts": 1},
                  "email": {"status": "failed", "attempts": 3, "error": "SMTPServerDisconnected: ..."}}}

The latest line of a key is its current state. Identity is the five fields, not the
``key`` text (which is for people and grep). Unreadable lines (a torn last write)
are skipped with a problem noted, never fatal; existing bytes are never rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from stormwatch.severity import Severity


class ChannelName(StrEnum):
    SLACK = "slack"
    EMAIL = "email"


class ChannelStatus(StrEnum):
    SENT = "sent"
    FAILED = "failed"
    NOT_CONFIGURED = "not_configured"
    SKIPPED_BELOW_THRESHOLD = "skipped_below_threshold"


_CHANNELS = {channel.value: channel for channel in ChannelName}


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class FindingKey:
    job_id: str
    kind: str
    rank: int
    signal: str
    timestamp_ns: int

    @property
    def text(self) -> str:
        return f"{self.job_id}|{self.kind}|{self.rank}|{self.signal}|{self.timestamp_ns}"


@dataclass(frozen=True)
class Decision:
    """One ledger line: a finding, its severity, when it was decided (ISO 8601) and each channel's state."""

    key: FindingKey
    severity: Severity
    decided_at: str
    channels: Mapping[ChannelName, ChannelOutcome]

    def status(self, channel: ChannelName) -> ChannelStatus | None:
        outcome = self.channels.get(channel)
        return None if outcome is None else outcome.status

    def to_line(self) -> bytes:
        document = {
            "key": self.key.text,
            "job_id": self.key.job_id,
            "kind": self.key.kind,
            "rank": self.key.rank,
            "signal": self.key.signal,
            "timestamp_ns": self.key.timestamp_ns,
            "severity": self.severity.value,
            "decided_at": self.decided_at,
            "channels": {name.value: outcome.to_json() for name, outcome in self.channels.items()},
        }
        return orjson.dumps(document) + b"\n"

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Decision:
        key = FindingKey(
            job_id=str(document["job_id"]),
            kind=str(document["kind"]),
            rank=int(document["rank"]),
            signal=str(document["signal"]),
            timestamp_ns=int(document["timestamp_ns"]),
        )
        channels = {}
        for name, raw in document["channels"].items():
            if name in _CHANNELS:  # a channel this version does not know is ignored
                error = raw.get("error")
                channels[_CHANNELS[name]] = ChannelOutcome(
                    ChannelStatus(raw["status"]), int(raw.get("attempts", 0)), None if error is None else str(error)
                )
        return cls(key, Severity(document["severity"]), str(document["decided_at"]), channels)


@dataclass(frozen=True)
class LedgerState:
    """The ledger folded: latest decision per finding, plus notes on lines that could not be read."""

    latest: Mapping[FindingKey, Decision]
    problems: tuple[str, ...] = ()

    def status(self, key: FindingKey, channel: ChannelName) -> ChannelStatus | None:
        decision = self.latest.get(key)
        return None if decision is None else decision.status(channel)


def read_ledger(data: bytes | None) -> LedgerState:
    latest: dict[FindingKey, Decision] = {}
    problems: list[str] = []
    for number, line in enumerate((data or b"").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            decision = Decision.from_json(orjson.loads(line))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            problems.append(f"notifications.jsonl line {number}: unreadable ({type(exc).__name__}); skipped")
            continue
        latest[decision.key] = decision
    return LedgerState(latest, tuple(problems))


def append_lines(data: bytes | None, decisions: Iterable[Decision]) -> bytes:
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


def undecided(
    state: LedgerState, job_id: str, indicators: Mapping[str, Mapping[str, Any] | None], *,
    channels: Iterable[ChannelName], notify_on: Severity,
) -> bool:
    """Whether a job's first-cause indicators (by kind: rank, signal, timestamp_ns, severity) still
    need a decision: one has none in the ledger, or reaches ``notify_on`` and is not yet sent on
    one of ``channels`` (the configured ones). A job for which this is False needs no finding."""
    wanted = tuple(channels)
    for kind, item in indicators.items():
        if not item:
            continue
        try:
            key = FindingKey(job_id, kind, int(item["rank"]), str(item["signal"]), int(item["timestamp_ns"]))
            severity = Severity(item["severity"])
        except (KeyError, TypeError, ValueError):
            return True  # unreadable here: let the model.json decide
        decision = state.latest.get(key)
        if decision is None:
            return True
        if severity.level >= notify_on.level and any(decision.status(channel) != ChannelStatus.SENT
                                                     for channel in wanted):
            return True
    return False
