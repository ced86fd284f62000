"""PagerDuty Events API v2 events: ``trigger`` while an alert fires, ``resolve`` when it resolves.

``dedup_key`` is the alert's identity (its fingerprint), so every audit's trigger of a firing alert
lands on the same PagerDuty incident and the resolve closes it. The ``routing_key`` is a secret: the
sender adds it to the event, never this module. ``payload.summary`` is at most 1024 characters,
``payload.severity`` one of critical/error/warning/info.
"""

from __future__ import annotations

from typing import Any

from stormwatch.alerting.notices import AlertNotice, NoticeState
from stormwatch.severity import Severity

MAX_SUMMARY_CHARS = 1024
PAGERDUTY_SEVERITY = {Severity.CRITICAL: "critical", Severity.WARNING: "warning", Severity.INFO: "info"}


def pagerduty_event(notice: AlertNotice) -> dict[str, Any]:
    """One event without its ``routing_key``."""
    if notice.state is NoticeState.RESOLVED:
        return {"event_action": "resolve", "dedup_key": notice.dedup_key}
    summary = notice.summary if len(notice.summary) <= MAX_SUMMARY_CHARS else notice.summary[:1023] + "…"
    labels = notice.labels
    details = {"job_id": notice.job_id, "details": notice.details, "labels": dict(labels), **notice.facts,
               "starts_at": notice.starts_at}
    event: dict[str, Any] = {
        "event_action": "trigger",
        "dedup_key": notice.dedup_key,
        "payload": {
            "summary": summary,
            "severity": PAGERDUTY_SEVERITY[notice.severity],
            "source": labels.get("host") or labels.get("job_name") or "stormwatch",
            "component": labels.get("job_name") or "gpu-memory",
            "group": labels.get("kind", ""),
            "class": labels.get("signal", ""),
            "timestamp": notice.last_seen_at,
            "custom_details": details,
        },
        "client": "stormwatch",
    }
    if notice.http_report_url:
        event["links"] = [{"href": notice.http_report_url, "text": "Stormwatch report"}]
        event["client_url"] = notice.http_report_url
    return event
