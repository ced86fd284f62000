"""The generic JSON webhook's body, version 1 (documented in docs/alerting.md, "JSON webhook").

::

    {"version": 1, "source": "stormwatch", "receiver": "platform", "sent_at": "2026-10-03T02:00:00+00:00",
     "title": "Stormwatch: critical GPU-memory finding", "text": "<the text template's output>",
     "alerts": [{"id": "llama-8r|most_severe|alert:critical", "state": "firing", "repeat": false,
                 "severity": "critical", "labels": {"alertname": "StormwatchMostSevere", "job_name": "llama-8r", ...},
                 "summary": "...", "details": "...", "job_id": "llama-8r-0412", "report_url": "https://...",
                 "starts_at": "...", "last_seen_at": "...", "ends_at": null, "facts": {"verdict": "critical", ...}}]}

``id`` is the alert's identity (the same for every run of the job name); ``state`` is ``firing`` or
``resolved``; ``repeat`` says the receiver was told of this alert before. A later version adds
members and bumps ``version`` only when a member changes meaning or goes away. With a key
configured the body's exact bytes are signed (:func:`signature`): ``X-Stormwatch-Signature:
sha256=<hex>``, HMAC-SHA256 with the key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from stormwatch.alerting.messages import Message, title
from stormwatch.alerting.notices import AlertNotice

WEBHOOK_VERSION = 1
SIGNATURE_HEADER = "X-Stormwatch-Signature"


def webhook_alert(notice: AlertNotice) -> dict[str, Any]:
    return {"id": notice.dedup_key, "state": notice.state.value, "repeat": notice.repeat,
            "severity": notice.severity.value, "labels": dict(notice.labels), "summary": notice.summary,
            "details": notice.details, "job_id": notice.job_id, "report_url": notice.report_url,
            "starts_at": notice.starts_at, "last_seen_at": notice.last_seen_at, "ends_at": notice.ends_at,
            "facts": dict(notice.facts)}


def webhook_payload(message: Message, notices: Sequence[AlertNotice], *, text: str, now: datetime) -> dict[str, Any]:
    """The body of one post: a message's alerts; ``text``: the rendered text template; ``now``: send time."""
    if not notices:
        raise ValueError("a webhook post needs at least one alert")
    return {"version": WEBHOOK_VERSION, "source": "stormwatch", "receiver": message.receiver,
            "sent_at": now.isoformat(), "title": title(message), "text": text,
            "alerts": [webhook_alert(notice) for notice in notices]}


def signature(body: bytes, key: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of the exact ``body`` bytes with ``key``."""
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
