"""A routes file's integrations: Alertmanager, a generic JSON webhook, PagerDuty and Microsoft Teams.

Each is configured by flat keys of a ``[receivers.<name>]`` table, beside Slack and email::

    alertmanager_url = "http://alertmanager:9093"   # not a secret; no user:password@ in it
    alertmanager_token_env = "AM_TOKEN"             # optional bearer token (or alertmanager_token_block)
    alertmanager_ends_after = "26h"                 # endsAt = audit time + this, while firing
    alertmanager_refresh = "1h"                     # re-post a firing alert at most this often
    webhook_url_env = "HOOK_URL"                    # or webhook_url_block
    webhook_hmac_env = "HOOK_KEY"                   # optional: X-Stormwatch-Signature: sha256=<hex>
    pagerduty_routing_key_env = "PD_KEY"            # or pagerduty_routing_key_block
    pagerduty_url = "https://events.pagerduty.com/v2/enqueue"   # the default
    teams_webhook_env = "TEAMS_URL"                 # a Workflows webhook (or teams_webhook_block)
    summary_template = "templates/summary.txt.j2"   # per alert: Alertmanager/PagerDuty/webhook summary
    text_template = "templates/text.md.j2"          # per message: Teams card text, webhook "text"
    slack_template = "templates/slack.json.j2"      # the Slack message (Block Kit JSON)
    email_text_template = "templates/email.txt.j2"  # an email's text/plain part
    email_html_template = "templates/email.html.j2" # an email's text/html part (autoescaped)

Every secret (a webhook URL, a routing key, an HMAC key, a token) is named, never held: an
environment variable or a Prefect Secret block. Template paths are local files, read when sending.
Durations are ``<number><s|m|h|d>`` or seconds as a number. All checks here are pure; a bad value
calls ``fail(message, key)``, which raises the routes file's ConfigError naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import urlsplit

from stormwatch.alerting.ledger import ChannelName
from stormwatch.alerting.secret_names import SecretName

DEFAULT_PAGERDUTY_URL = "https://events.pagerduty.com/v2/enqueue"
DEFAULT_ENDS_AFTER_S = 26 * 3600  # a nightly audit's period (24 h) plus a margin for a late run
DEFAULT_REFRESH_S = 3600  # a rerun within the hour does not post again
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_BLOCK = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
Fail = Callable[..., NoReturn]

#: The keys this module reads from a receiver's table.
INTEGRATION_KEYS = frozenset({
    "alertmanager_url", "alertmanager_token_env", "alertmanager_token_block", "alertmanager_ends_after",
    "alertmanager_refresh", "webhook_url_env", "webhook_url_block", "webhook_hmac_env", "webhook_hmac_block",
    "pagerduty_routing_key_env", "pagerduty_routing_key_block", "pagerduty_url", "teams_webhook_env",
    "teams_webhook_block", "summary_template", "text_template", "slack_template", "email_text_template",
    "email_html_template",
})
#: Keys that would hold a secret in the file: refused, with a pointer to ``<key>_env``/``<key>_block``.
SECRET_INTEGRATION_KEYS = frozenset({"webhook_hmac", "pagerduty_routing_key", "routing_key", "teams_webhook",
                                     "alertmanager_token", "hmac_key", "secret"})


@dataclass(frozen=True)
class AlertmanagerConfig:
    """``url``: Alertmanager's base URL (alerts go to ``<url>/api/v2/alerts``). A firing alert is posted with
    ``endsAt`` = audit time + ``ends_after_s`` (so it stays active until the next audit re-posts it) and
    re-posted when it was last posted at least ``refresh_s`` ago; a resolved one with ``endsAt`` = its
    resolution time. ``token``: an optional bearer token, named."""

    url: str
    token: SecretName | None = None
    ends_after_s: float = DEFAULT_ENDS_AFTER_S
    refresh_s: float = DEFAULT_REFRESH_S


@dataclass(frozen=True)
class Integrations:
    """A receiver's integrations (None: not configured) and its template overrides (local paths)."""

    alertmanager: AlertmanagerConfig | None = None
    webhook_url: SecretName | None = None
    webhook_hmac: SecretName | None = None
    pagerduty_key: SecretName | None = None
    pagerduty_url: str = DEFAULT_PAGERDUTY_URL
    teams_webhook: SecretName | None = None
    summary_template: str | None = None
    text_template: str | None = None
    slack_template: str | None = None
    email_text_template: str | None = None
    email_html_template: str | None = None

    @property
    def channels(self) -> tuple[ChannelName, ...]:
        usable = {ChannelName.ALERTMANAGER: self.alertmanager is not None,
                  ChannelName.WEBHOOK: self.webhook_url is not None,
                  ChannelName.PAGERDUTY: self.pagerduty_key is not None,
                  ChannelName.TEAMS: self.teams_webhook is not None}
        return tuple(channel for channel, ok in usable.items() if ok)


def stateful(channel: ChannelName) -> bool:
    """Channels that keep an alert's state themselves (Alertmanager, PagerDuty): always told when it
    resolves, whatever ``send_resolved``, or they would keep it open."""
    return channel in (ChannelName.ALERTMANAGER, ChannelName.PAGERDUTY)


def duration_s(raw: object, *, what: str, fail: Fail) -> float:
    """``26h``, ``90m``, ``1d``, ``3600s`` or a number of seconds, as positive seconds."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    else:
        found = _DURATION.match(str(raw).strip().lower())
        if found is None:
            fail(f"{what} must be a duration such as 26h, 90m or 3600s", what)
        value = float(found.group(1)) * _UNIT_S[found.group(2)]
    if value <= 0:
        fail(f"{what} must be positive", what)
    return value


def _named(table: Mapping[str, Any], stem: str, fail: Fail) -> SecretName | None:
    env, block = table.get(f"{stem}_env"), table.get(f"{stem}_block")
    if env is not None and (not isinstance(env, str) or not _ENV.match(env)):
        fail(f"{stem}_env must name an environment variable (letters, digits, _)", f"{stem}_env")
    if block is not None and (not isinstance(block, str) or not _BLOCK.match(block)):
        fail(f"{stem}_block must name a Prefect Secret block (lowercase letters, digits, -)", f"{stem}_block")
    return SecretName(env=env, block=block) if env or block else None


def _plain_url(raw: object, *, key: str, fail: Fail) -> str:
    """An http(s) URL with a host and no credentials (it is stored in the file, so it holds no secret)."""
    text = raw.strip() if isinstance(raw, str) else ""
    try:
        parts = urlsplit(text)
    except ValueError:
        fail(f"{key} is not a URL", key)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(ord(ch) < 33 for ch in text):
        fail(f"{key} must be an http(s) URL with a host", key)
    if parts.username is not None or parts.password is not None or parts.query:
        fail(f"{key} must not carry credentials or a query: name a token (alertmanager_token_env) instead", key)
    return text.rstrip("/")


def _template(table: Mapping[str, Any], key: str, fail: Fail) -> str | None:
    raw = table.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip() or any(ord(ch) < 32 for ch in raw):
        fail(f"{key} must be a path to a template file", key)
    return raw.strip()


def parse_integrations(table: Mapping[str, Any], fail: Fail) -> Integrations:
    """The integrations a receiver's ``table`` configures (unknown keys are the caller's to refuse)."""
    alertmanager = None
    if "alertmanager_url" in table:
        alertmanager = AlertmanagerConfig(
            url=_plain_url(table["alertmanager_url"], key="alertmanager_url", fail=fail),
            token=_named(table, "alertmanager_token", fail),
            ends_after_s=duration_s(table.get("alertmanager_ends_after", DEFAULT_ENDS_AFTER_S),
                                    what="alertmanager_ends_after", fail=fail),
            refresh_s=duration_s(table.get("alertmanager_refresh", DEFAULT_REFRESH_S), what="alertmanager_refresh",
                                 fail=fail),
        )
    elif any(key.startswith("alertmanager_") for key in table):
        fail("alertmanager_* settings need alertmanager_url", next(k for k in table if k.startswith("alertmanager_")))
    webhook_url, webhook_hmac = _named(table, "webhook_url", fail), _named(table, "webhook_hmac", fail)
    if webhook_hmac is not None and webhook_url is None:
        fail("webhook_hmac_* needs webhook_url_env or webhook_url_block", "webhook_hmac_env"
             if "webhook_hmac_env" in table else "webhook_hmac_block")
    pagerduty_key = _named(table, "pagerduty_routing_key", fail)
    pagerduty_url = DEFAULT_PAGERDUTY_URL
    if "pagerduty_url" in table:
        if pagerduty_key is None:
            fail("pagerduty_url needs pagerduty_routing_key_env or pagerduty_routing_key_block", "pagerduty_url")
        pagerduty_url = _plain_url(table["pagerduty_url"], key="pagerduty_url", fail=fail)
    return Integrations(alertmanager=alertmanager, webhook_url=webhook_url, webhook_hmac=webhook_hmac,
                        pagerduty_key=pagerduty_key, pagerduty_url=pagerduty_url,
                        teams_webhook=_named(table, "teams_webhook", fail),
                        summary_template=_template(table, "summary_template", fail),
                        text_template=_template(table, "text_template", fail),
                        slack_template=_template(table, "slack_template", fail),
                        email_text_template=_template(table, "email_text_template", fail),
                        email_html_template=_template(table, "email_html_template", fail))
