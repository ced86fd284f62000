"""Notifications for an audit: Slack and email when a job's first cause reaches the threshold, once per finding.

The flow calls :func:`notify_jobs` with the jobs it diagnosed (``JobFinding.from_document``
of each model.json), the current ``reports/notifications.jsonl`` and the settings,
then writes ``NotifyResult.ledger`` back. Rules:

- a finding (job id, indicator kind, rank, signal, timestamp) already ``sent`` on a
  channel is never sent on it again; a finding below ``notify_on`` is recorded as
  ``skipped_below_threshold``; with a channel unconfigured it is recorded as
  ``not_configured`` and sent when the channel is configured later (nothing is lost);
- one message per job and channel, holding all the job's facts (or one digest per
  channel listing every job with something due); a message covers the job's due findings;
- a failed send is retried within the call (exponential back-off, ``max_attempts``),
  then recorded as ``failed`` and retried by the next call. After a channel fails
  with a transient error, its remaining messages in this call are recorded failed
  without being tried, so a dead server costs one back-off sequence, not one per job;
- nothing raises out of :func:`notify_jobs`; secrets are redacted from every stored error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

import httpx

from stormwatch.tasks.notify.delivery import Delivery, deliver
from stormwatch.tasks.notify.email import build_message, send_email
from stormwatch.tasks.notify.findings import FLEET_KINDS, IndicatorFact, JobFinding
from stormwatch.tasks.notify.ledger import (
    ChannelName,
    ChannelOutcome,
    ChannelStatus,
    Decision,
    FindingKey,
    LedgerState,
    append_lines,
    pending_job_ids,
    read_ledger,
)
from stormwatch.tasks.notify.secrets import Redactor, SecretRef, redacting_logs
from stormwatch.tasks.notify.settings import NotifySettings, SmtpTarget
from stormwatch.tasks.notify.slack import post_webhook, slack_payload
from stormwatch.tasks.retry import RetryPolicy

__all__ = [
    "ChannelName",
    "ChannelStatus",
    "Decision",
    "IndicatorFact",
    "JobFinding",
    "NotifyResult",
    "NotifySettings",
    "SecretRef",
    "notify_jobs",
    "pending_job_ids",
]

log = logging.getLogger("stormwatch.tasks.notify.dispatch")
Sender = Callable[[Sequence[JobFinding]], None]


@dataclass(frozen=True)
class NotifyResult:
    """What one call decided. ``ledger``: the full new notifications.jsonl (old bytes + ``decisions``).

    ``sent``/``failed``: messages (one per job, or one digest, per channel) delivered / not delivered
    in this call; ``skipped``: findings newly recorded without any send (below threshold, or no
    channel configured). ``problems``: unreadable ledger lines. No field holds a secret.
    """

    ledger: bytes
    decisions: tuple[Decision, ...]
    sent: int
    failed: int
    skipped: int
    problems: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.decisions)

    def summary(self) -> str:
        return f"notifications: {self.sent} sent, {self.failed} failed, {self.skipped} findings recorded without a send"


@dataclass(frozen=True)
class _Finding:
    key: FindingKey
    job: JobFinding
    fact: IndicatorFact


def _findings(jobs: Sequence[JobFinding]) -> list[_Finding]:
    """Every indicator of every job, first occurrence of each job id and key only."""
    seen_jobs: set[str] = set()
    seen_keys: set[FindingKey] = set()
    out = []
    for job in jobs:
        if job.job_id in seen_jobs:
            continue
        seen_jobs.add(job.job_id)
        for fact in job.indicators:
            key = FindingKey(job.job_id, fact.kind, fact.rank, fact.signal, fact.timestamp_ns)
            if key not in seen_keys:
                seen_keys.add(key)
                out.append(_Finding(key, job, fact))
    return out


def _plan(
    findings: list[_Finding], state: LedgerState, settings: NotifySettings
) -> tuple[dict[tuple[FindingKey, ChannelName], ChannelOutcome | None], dict[ChannelName, list[JobFinding]]]:
    """Per (finding, channel): a settled outcome, or None when due; and the due jobs per channel."""
    configured = settings.channels
    outcomes: dict[tuple[FindingKey, ChannelName], ChannelOutcome | None] = {}
    due: dict[ChannelName, dict[str, JobFinding]] = {channel: {} for channel in ChannelName}
    for finding in findings:
        reaches = finding.fact.severity.level >= settings.notify_on.level or finding.fact.kind in FLEET_KINDS
        for channel in ChannelName:
            previous = state.status(finding.key, channel)
            if previous == ChannelStatus.SENT:
                outcomes[finding.key, channel] = ChannelOutcome(ChannelStatus.SENT)
            elif not reaches:
                outcomes[finding.key, channel] = ChannelOutcome(ChannelStatus.SKIPPED_BELOW_THRESHOLD)
            elif channel not in configured:
                outcomes[finding.key, channel] = ChannelOutcome(ChannelStatus.NOT_CONFIGURED)
            else:
                outcomes[finding.key, channel] = None
                due[channel].setdefault(finding.job.job_id, finding.job)
    return outcomes, {channel: list(jobs.values()) for channel, jobs in due.items()}


def _resolve(ref: SecretRef | None, redact: Redactor) -> str:
    """The secret's value (added to ``redact``); raises ValueError naming the ref, never the value."""
    try:
        value = None if ref is None else ref.resolve()
    except Exception as exc:  # Prefect block errors of any kind
        raise ValueError(f"could not load secret {ref!r}: {type(exc).__name__}: {redact(str(exc))}") from None
    if not value:
        raise ValueError(f"secret {ref!r} is empty or not found")
    redact.add(value)
    return value


def _sender(channel: ChannelName, settings: NotifySettings, redact: Redactor, stack: ExitStack) -> Sender:
    """A function sending one message on ``channel``; raises ValueError if its secret is unusable.
    Connections it opens are closed with ``stack``."""
    if channel == ChannelName.SLACK:
        url = _resolve(settings.slack_webhook, redact)
        client = stack.enter_context(httpx.Client(timeout=settings.timeout_s))
        return lambda jobs: post_webhook(client, url, slack_payload(jobs, notify_on=settings.notify_on))
    raw = _resolve(settings.smtp_url, redact)
    try:
        target = SmtpTarget.parse(raw)
    except ValueError as exc:
        raise ValueError(redact(str(exc))) from None
    redact.add(target.username)

    def send(jobs: Sequence[JobFinding]) -> None:
        message = build_message(
            jobs, notify_on=settings.notify_on, sender=settings.sender, recipients=settings.email_to, now=_now()
        )
        send_email(target, message, sender=settings.sender, recipients=settings.email_to, timeout_s=settings.timeout_s)

    return send


def _now() -> datetime:
    return datetime.now(UTC)


def _send_channel(
    channel: ChannelName, jobs: list[JobFinding], settings: NotifySettings, redact: Redactor, stack: ExitStack
) -> dict[str, Delivery]:
    """Delivery per due job id on one channel (the jobs of one message share one delivery)."""
    batches = [jobs] if settings.digest else [[job] for job in jobs]
    out: dict[str, Delivery] = {}
    try:
        send = _sender(channel, settings, redact, stack)
    except Exception as exc:  # an unusable secret fails every message of the channel, untried
        error = redact(str(exc))
        log.warning("notify: %s channel unusable: %s", channel.value, error)
        for batch in batches:
            unusable = Delivery(False, 0, error)
            out.update((job.job_id, unusable) for job in batch)
        return out
    down: Delivery | None = None
    for batch in batches:
        what = (
            f"{channel.value} digest of {len(batch)} job(s)"
            if settings.digest
            else f"{channel.value} job {batch[0].job_id!r}"
        )
        if down is not None:
            delivery = Delivery(False, 0, f"not attempted: channel down earlier in this call ({down.error})", True)
        else:
            delivery = deliver(
                partial(send, batch),
                what=what,
                policy=RetryPolicy.exponential(settings.max_attempts, first_delay_s=settings.backoff_s),
                redact=redact,
            )
            if not delivery.ok and delivery.transient:
                down = delivery
        out.update((job.job_id, delivery) for job in batch)
    return out


def notify_jobs(
    jobs: Sequence[JobFinding], *, ledger: bytes | None, settings: NotifySettings, now: datetime
) -> NotifyResult:
    """Decide, send and record notifications for ``jobs``; never raises for a channel's failure.

    ``ledger``: the current notifications.jsonl (None when absent); ``now``: the decision time
    (naive means UTC). Only jobs passed here are considered: to retry findings of jobs that
    were not re-diagnosed, pass them too: ``pending_job_ids(ledger, channels=settings.channels,
    notify_on=settings.notify_on)`` lists them.
    """
    state = read_ledger(ledger)
    for problem in state.problems:
        log.warning("notify: %s", problem)
    decided_at = (now if now.tzinfo else now.replace(tzinfo=UTC)).isoformat()
    findings = _findings(jobs)
    planned, due = _plan(findings, state, settings)
    deliveries: dict[ChannelName, dict[str, Delivery]] = {}
    redact = Redactor()
    with redacting_logs(redact), ExitStack() as stack:
        for channel, due_jobs in due.items():
            if due_jobs:
                deliveries[channel] = _send_channel(channel, due_jobs, settings, redact, stack)
    messages = [item for per_job in deliveries.values() for item in {id(d): d for d in per_job.values()}.values()]
    decisions: list[Decision] = []
    skipped = 0
    for finding in findings:
        channels: dict[ChannelName, ChannelOutcome] = {}
        for channel in ChannelName:
            settled = planned[finding.key, channel]
            if settled is None:
                delivery = deliveries[channel][finding.job.job_id]
                status = ChannelStatus.SENT if delivery.ok else ChannelStatus.FAILED
                settled = ChannelOutcome(status, delivery.attempts, delivery.error)
            channels[channel] = settled
        was_due = any(planned[finding.key, channel] is None for channel in ChannelName)
        previous = state.latest.get(finding.key)
        changed = previous is None or any(previous.status(ch) != outcome.status for ch, outcome in channels.items())
        if was_due or changed:
            decisions.append(Decision(finding.key, finding.fact.severity, decided_at, channels))
            skipped += 0 if was_due else 1
    result = NotifyResult(
        ledger=append_lines(ledger, decisions),
        decisions=tuple(decisions),
        sent=sum(1 for item in messages if item.ok),
        failed=sum(1 for item in messages if not item.ok),
        skipped=skipped,
        problems=state.problems,
    )
    log.info("notify: %s", result.summary())
    return result
