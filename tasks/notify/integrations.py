"""Senders for a receiver's integrations: Alertmanager, the JSON webhook, PagerDuty, Microsoft Teams.

:func:`integration_sender` resolves the channel's secrets (through ``resolve``, which adds each value
to the redactor), loads the receiver's templates and returns a function sending one
:class:`~stormwatch.alerting.grouping.Outgoing`. Payloads are built by the pure
``stormwatch.alerting.payloads`` modules; secrets go only where the receiving API wants them (a
webhook's URL, an ``Authorization`` header, PagerDuty's ``routing_key``), never into a payload
stormwatch keeps, a log or the ledger. Each request runs under ``timeout_s``.

Alertmanager gets one ``POST /api/v2/alerts`` per message (its alerts' ``endsAt`` computed from the
wall clock at send time); the webhook and Teams one post per message; PagerDuty one event per alert
(a message's events in order; a retry re-sends them all, which PagerDuty's ``dedup_key`` absorbs).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime

import httpx
import orjson

from stormwatch.alerting.grouping import Outgoing
from stormwatch.alerting.ledger import ChannelName
from stormwatch.alerting.payloads.alertmanager import alertmanager_payload
from stormwatch.alerting.payloads.pagerduty import pagerduty_event
from stormwatch.alerting.payloads.teams import teams_payload
from stormwatch.alerting.payloads.webhook import SIGNATURE_HEADER, signature, webhook_payload
from stormwatch.alerting.receivers import AlertmanagerConfig, Integrations
from stormwatch.alerting.routes import Receiver
from stormwatch.alerting.secret_names import SecretSource
from stormwatch.tasks.notify.http_post import post_body
from stormwatch.tasks.notify.templating import MessageTexts

Send = Callable[[Outgoing], None]
Resolve = Callable[[SecretSource | None], str]


def _alertmanager(config: AlertmanagerConfig, client: httpx.Client, resolve: Resolve, texts: MessageTexts) -> Send:
    headers = {} if config.token is None else {"Authorization": f"Bearer {resolve(config.token)}"}
    url = f"{config.url}/api/v2/alerts"

    def send(item: Outgoing) -> None:
        body = alertmanager_payload(texts.summarized(item.notices), now=datetime.now(UTC),
                                    ends_after_s=config.ends_after_s)
        post_body(client, url, orjson.dumps(body), headers=headers)

    return send


def _webhook(integrations: Integrations, client: httpx.Client, resolve: Resolve, texts: MessageTexts) -> Send:
    url = resolve(integrations.webhook_url)
    key = None if integrations.webhook_hmac is None else resolve(integrations.webhook_hmac).encode()

    def send(item: Outgoing) -> None:
        notices = texts.summarized(item.notices)
        payload = webhook_payload(item.message, notices, text=texts.message_text(item.message, notices),
                                  now=datetime.now(UTC))
        body = orjson.dumps(payload)
        post_body(client, url, body, headers={} if key is None else {SIGNATURE_HEADER: signature(body, key)})

    return send


def _pagerduty(integrations: Integrations, client: httpx.Client, resolve: Resolve, texts: MessageTexts) -> Send:
    routing_key = resolve(integrations.pagerduty_key)

    def send(item: Outgoing) -> None:
        for notice in texts.summarized(item.notices):
            event = {"routing_key": routing_key, **pagerduty_event(notice)}
            post_body(client, integrations.pagerduty_url, orjson.dumps(event))

    return send


def _teams(integrations: Integrations, client: httpx.Client, resolve: Resolve, texts: MessageTexts) -> Send:
    url = resolve(integrations.teams_webhook)

    def send(item: Outgoing) -> None:
        notices = texts.summarized(item.notices)
        payload = teams_payload(item.message, notices, text=texts.message_text(item.message, notices))
        post_body(client, url, orjson.dumps(payload))

    return send


def integration_sender(receiver: Receiver, channel: ChannelName, *, resolve: Resolve, timeout_s: float,
                       stack: ExitStack) -> Send:
    """A function sending one message on ``channel``; raises ValueError when a secret or template is unusable.
    ``timeout_s``: per request (connect, read, write), in seconds. The HTTP client closes with ``stack``."""
    integrations = receiver.integrations
    texts = MessageTexts.of(integrations)
    client = stack.enter_context(httpx.Client(timeout=timeout_s))
    if channel is ChannelName.ALERTMANAGER and integrations.alertmanager is not None:
        return _alertmanager(integrations.alertmanager, client, resolve, texts)
    if channel is ChannelName.WEBHOOK:
        return _webhook(integrations, client, resolve, texts)
    if channel is ChannelName.PAGERDUTY:
        return _pagerduty(integrations, client, resolve, texts)
    if channel is ChannelName.TEAMS:
        return _teams(integrations, client, resolve, texts)
    raise ValueError(f"receiver {receiver.name!r} has no {channel.value} configured")
