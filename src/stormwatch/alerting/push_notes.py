"""Ledger lines for the metrics push: ``{"type": "push", ...}`` in ``notifications.jsonl``.

An audit's push of its metrics to a Pushgateway (``--pushgateway``) is recorded as a target's send
is, but only when it says something: every push that fails (the gateway's ``host:port``, the
attempts, the error), and the first push that goes through after one failed. A healthy gateway
adds no line night after night; metrics are a snapshot, so a failed push is "retried" by the next
audit pushing its own metrics::

    {"type": "push", "gateway": "pushgateway.example:9091", "status": "failed", "attempts": 3,
     "error": "ConnectError: [Errno 111] Connection refused", "decided_at": "2026-12-01T02:00:00+00:00"}
    {"type": "push", "gateway": "pushgateway.example:9091", "status": "pushed", "attempts": 1,
     "decided_at": "2026-12-02T02:00:00+00:00"}

The gateway is named by its host and port only: never a user, password, path or query. A fold
keeps the newest line of each gateway (:mod:`stormwatch.alerting.ledger_carry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import orjson

#: The ``type`` of a push line.
PUSH = "push"
MAX_ERROR_CHARS = 500


class PushStatus(StrEnum):
    PUSHED = "pushed"
    FAILED = "failed"


def gateway_name(url: str) -> str:
    """``host:port`` of a Pushgateway URL (``host`` when it names no port), lowercase; never its
    user, password, path or query. ``?`` when the URL has no host."""
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return "?"
    if not host:
        return "?"
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    return shown if port is None else f"{shown}:{port}"


@dataclass(frozen=True, kw_only=True)
class PushNote:
    """One push line: ``gateway`` (``host:port``), ``status``, ``attempts`` made, ``error`` (None when
    pushed; secrets never in it: the URL carries none), ``decided_at`` (ISO 8601)."""

    gateway: str
    status: PushStatus
    attempts: int
    decided_at: str
    error: str | None = None

    def to_line(self) -> bytes:
        document: dict[str, Any] = {"type": PUSH, "gateway": self.gateway, "status": self.status.value,
                                    "attempts": self.attempts}
        if self.error is not None:
            document["error"] = self.error[:MAX_ERROR_CHARS]
        document["decided_at"] = self.decided_at
        return orjson.dumps(document) + b"\n"

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> PushNote:
        error = document.get("error")
        return cls(gateway=str(document["gateway"]), status=PushStatus(document["status"]),
                   attempts=int(document.get("attempts", 0)), decided_at=str(document["decided_at"]),
                   error=None if error is None else str(error))


def push_line(previous: PushNote | None, *, gateway: str, attempts: int, error: str | None,
              decided_at: str) -> PushNote | None:
    """The line to record for a push that ended so (``error`` None: pushed), given the gateway's
    ``previous`` line: every failure, and a success after a failure; else None (nothing new to say)."""
    if error is None and (previous is None or previous.status is PushStatus.PUSHED):
        return None
    status = PushStatus.PUSHED if error is None else PushStatus.FAILED
    return PushNote(gateway=gateway, status=status, attempts=attempts, decided_at=decided_at, error=error)
