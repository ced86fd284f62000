"""Sending an audit's messages: one sender per target (a receiver's Slack webhook, email list, or one of
its integrations: :mod:`.integrations`).

Secrets are resolved when a target's first message is sent (environment, held value, Prefect
Secret block) and added to the redactor, so no error text, log record or ledger line can carry
them; a receiver's template overrides are loaded then too (:mod:`.templating`). A target whose
secret or template cannot be used fails all its messages untried, the error naming it. After a target
fails with a transient error, its remaining messages are recorded failed without being tried:
a dead server costs one back-off sequence, not one per message. Nothing here raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from functools import partial

import httpx

from stormwatch.alerting.grouping import Outgoing
from stormwatch.alerting.ledger import ChannelName
from stormwatch.alerting.routes import Receiver
from stormwatch.alerting.secret_names import SecretSource
from stormwatch.alerting.targets import SmtpTarget
from stormwatch.tasks.notify.delivery import Delivery, deliver
from stormwatch.tasks.notify.email import EmailTemplates, build_alert_message, send_email
from stormwatch.tasks.notify.integrations import integration_sender
from stormwatch.tasks.notify.secrets import Redactor, SecretRef, redacting_logs
from stormwatch.tasks.notify.settings import NotifySettings
from stormwatch.tasks.notify.slack import message_payload, post_webhook
from stormwatch.tasks.notify.templating import load_template
from stormwatch.tasks.retry import RetryPolicy

log = logging.getLogger("stormwatch.tasks.notify.dispatch")
Sender = Callable[[Outgoing], None]


def _resolve(source: SecretSource | None, redact: Redactor) -> str:
    """The secret's value (added to ``redact``); raises ValueError naming the ref, never the value."""
    ref = None if source is None else SecretRef.of(source)
    try:
        value = None if ref is None else ref.resolve()
    except Exception as exc:  # Prefect block errors of any kind
        raise ValueError(f"could not load secret {ref!r}: {type(exc).__name__}: {redact(str(exc))}") from None
    if not value:
        raise ValueError(f"secret {ref!r} is empty or not found")
    redact.add(value)
    return value


def _sender(receiver: Receiver, channel: ChannelName, settings: NotifySettings, redact: Redactor,
            stack: ExitStack) -> Sender:
    """A function sending one message on a receiver's channel; raises ValueError if its secret is
    unusable. Connections it opens are closed with ``stack``."""
    if channel == ChannelName.SLACK:
        url = _resolve(receiver.slack_webhook, redact)
        slack_template = receiver.integrations.slack_template
        template = None if slack_template is None else load_template(slack_template)
        client = stack.enter_context(httpx.Client(timeout=settings.timeout_s))
        return lambda item: post_webhook(client, url, message_payload(item.message, template))
    if channel != ChannelName.EMAIL:
        return integration_sender(receiver, channel, resolve=partial(_resolve, redact=redact),
                                  timeout_s=settings.timeout_s, stack=stack)
    templates = EmailTemplates.load(text=receiver.integrations.email_text_template,
                                    html=receiver.integrations.email_html_template)
    raw = _resolve(receiver.smtp_url, redact)
    try:
        target = SmtpTarget.parse(raw)
    except ValueError as exc:
        raise ValueError(redact(str(exc))) from None
    redact.add(target.username)
    sender = receiver.email_from or settings.sender

    def send(item: Outgoing) -> None:
        message = item.message
        email = build_alert_message(message, sender=sender, recipients=receiver.email_to, now=datetime.now(UTC),
                                    templates=templates)
        send_email(target, email, sender=sender, recipients=receiver.email_to, timeout_s=settings.timeout_s)

    return send


def _what(item: Outgoing) -> str:
    """How logs name a message: never a secret, never a telemetry string."""
    count = len(item.message.entries)
    return f"{item.channel.value} message to {item.receiver.name} ({count} entr{'y' if count == 1 else 'ies'})"


def send_all(messages: Sequence[Outgoing], settings: NotifySettings) -> list[Delivery]:
    """One delivery per message, in order; secrets redacted from every error."""
    redact = Redactor()
    senders: dict[str, Sender | str] = {}  # target -> sender, or why it is unusable
    down: dict[str, Delivery] = {}
    out = []
    with redacting_logs(redact), ExitStack() as stack:
        for item in messages:
            if item.target not in senders:
                try:
                    senders[item.target] = _sender(item.receiver, item.channel, settings, redact, stack)
                except Exception as exc:  # an unusable secret fails every message of the target, untried
                    senders[item.target] = redact(str(exc))
                    log.warning("notify: %s target unusable: %s", item.target, senders[item.target])
            send = senders[item.target]
            if isinstance(send, str):
                out.append(Delivery(ok=False, attempts=0, error=send))
            elif item.target in down:
                error = f"not attempted: channel down earlier in this call ({down[item.target].error})"
                out.append(Delivery(ok=False, attempts=0, error=error, transient=True))
            else:
                policy = RetryPolicy.exponential(settings.max_attempts, first_delay_s=settings.backoff_s)
                delivery = deliver(partial(send, item), what=_what(item), policy=policy, redact=redact)
                if not delivery.ok and delivery.transient:
                    down[item.target] = delivery
                out.append(delivery)
    return out
