"""One alert as the machine-readable receivers see it (Alertmanager, PagerDuty, the JSON webhook).

A chat message (:mod:`.messages`) tells people about jobs; an :class:`AlertNotice` tells another
alerting system about one alert: its identity (the fingerprint, which stays the same from one run of a
job name to the next), its state, its labels, a one-line summary and the report link. Labels are
``alertname``, ``job_name``, ``kind``, ``signal``, ``severity``, ``host``, ``device`` (``host`` and
``device``: where the alert's rank ran, when known; labels with no value are left out). Every value
is one line (:func:`~.plain_text.one_line`); escaping for a format is the payload builder's job.
Times are ISO 8601 UTC strings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from stormwatch.alerting.alert_records import AlertRecord, AlertStatus
from stormwatch.alerting.plain_text import one_line
from stormwatch.severity import Severity

MAX_LABEL_CHARS = 200
MAX_DEDUP_KEY_CHARS = 255  # PagerDuty's limit on dedup_key


class NoticeState(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True)
class AlertNotice:
    """One alert in one send. ``identity``: the fingerprint text; ``dedup_key``: the identity, or
    ``sha256:<hex>`` of it when longer than 255 characters; ``repeat``: told before (a refresh or a
    repeat); ``ends_at``: the resolution time (None while firing)."""

    identity: str
    state: NoticeState
    repeat: bool
    severity: Severity
    labels: Mapping[str, str]
    job_id: str
    summary: str
    details: str
    report_url: str | None
    starts_at: str
    last_seen_at: str
    ends_at: str | None = None
    facts: Mapping[str, str] = field(default_factory=dict)

    @property
    def dedup_key(self) -> str:
        if len(self.identity) <= MAX_DEDUP_KEY_CHARS:
            return self.identity
        return "sha256:" + hashlib.sha256(self.identity.encode()).hexdigest()

    @property
    def http_report_url(self) -> str | None:
        """The report link when it is an http(s) URL (a link a receiver can open), else None."""
        url = self.report_url
        return url if url and url.lower().startswith(("https://", "http://")) else None


def alert_name(kind: str) -> str:
    """``StormwatchMostSevere`` for ``most_severe``: Alertmanager's ``alertname`` per kind."""
    return "Stormwatch" + "".join(part.capitalize() for part in kind.split("_"))


def notice_labels(record: AlertRecord) -> dict[str, str]:
    """The alert's labels (see the module docstring), each one line of at most 200 characters."""
    fingerprint, fact = record.fingerprint, record.fact
    host, device = fingerprint.host, fingerprint.device
    if host is None:
        placed = record.job.rank_at(fact.rank)
        if placed is not None:
            host, device = placed
    raw = {"alertname": alert_name(fingerprint.kind.value), "job_name": fingerprint.job_name,
           "kind": fingerprint.kind.value, "signal": fingerprint.signal, "severity": record.severity.value,
           "host": host, "device": None if device is None else str(device)}
    return {name: one_line(value, MAX_LABEL_CHARS) for name, value in raw.items() if value not in (None, "")}


def default_summary(record: AlertRecord) -> str:
    """``llama-8r: Most severe alert:critical on rank 0 (critical), job llama-8r-0412`` (one line);
    a resolution starts ``resolved:``."""
    fact, fingerprint = record.fact, record.fingerprint
    subject = fingerprint.job_name or f"{fingerprint.host} device {fingerprint.device}"
    text = f"{subject}: {fact.label} {fact.signal} on {fact.where} ({record.severity.value})"
    if record.job.job_id and fingerprint.job_name:
        text += f", job {record.job.job_id}"
    return one_line(("resolved: " if record.status is AlertStatus.RESOLVED else "") + text, 1000)


def notice_of(record: AlertRecord, *, repeat: bool) -> AlertNotice:
    """The notice of ``record`` as decided now (firing, or resolved at ``record.resolved_at``)."""
    fact = record.fact
    facts = {"verdict": record.job.verdict, "where": fact.where, "when": fact.when}
    if record.job.missing_text:
        facts["missing_ranks"] = f"{record.job.missing_text} of {record.job.expected_ranks}"
    if fact.phase_path:
        facts["phase"] = fact.phase_path
    if record.job.attempt is not None:
        facts["attempt"] = record.job.attempt.description
    resolved = record.status is AlertStatus.RESOLVED
    return AlertNotice(
        identity=record.fingerprint.text, state=NoticeState.RESOLVED if resolved else NoticeState.FIRING,
        repeat=repeat, severity=record.severity, labels=notice_labels(record), job_id=record.job.job_id,
        summary=default_summary(record), details=one_line(fact.details, 1000), report_url=record.job.report_url,
        starts_at=record.started_at, last_seen_at=record.last_seen_at,
        ends_at=record.resolved_at if resolved else None,
        facts={name: one_line(value, 300) for name, value in facts.items()},
    )
