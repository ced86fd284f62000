"""Routing: which receivers an alert goes to, from a TOML routes file.

::

    [receivers.llama-team]
    slack_webhook_env = "LLAMA_SLACK_WEBHOOK"   # or slack_webhook_block = "llama-webhook" (Prefect Secret)
    email_to = ["llama-oncall@example.com"]     # SMTP: smtp_url_env / smtp_url_block, else the default one
    send_resolved = true                        # else --notify-resolved

    [[routes]]
    job = "llama-*"            # job-id globs (one or a list); also job_name, severity, kind
    receiver = "llama-team"
    continue = true            # go on matching the routes below

Routes are tried in order; the first that matches wins unless it says ``continue``. An alert no
route matches goes to the default receiver (``default``: the flags' webhook and addresses), which
a route may also name. A route without matchers matches everything. Matchers within a route must
all match; the values of one matcher are alternatives. The file names environment variables and
Prefect Secret blocks, never a secret: a key that would hold one (``slack_webhook``, ``smtp_url``,
``password``, ...) is refused. Every error is a :class:`~.config_file.ConfigError` naming the line.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, NoReturn

from stormwatch.alerting.config_file import ConfigError, TomlLines, toml_syntax_line
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import DEFAULT_CHANNELS, DEFAULT_RECEIVER, ChannelName, target_name
from stormwatch.alerting.observations import Labels
from stormwatch.alerting.receivers import (
    INTEGRATION_KEYS,
    SECRET_INTEGRATION_KEYS,
    Integrations,
    parse_integrations,
    stateful,
)
from stormwatch.alerting.secret_names import SecretName, SecretSource
from stormwatch.alerting.targets import check_address
from stormwatch.severity import Severity

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_BLOCK = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
_SECRET_KEYS = frozenset({"slack_webhook", "slack_webhook_url", "webhook", "webhook_url", "url", "smtp_url",
                          "password", "smtp_password", "token"}) | SECRET_INTEGRATION_KEYS
_RECEIVER_KEYS = frozenset({"slack_webhook_env", "slack_webhook_block", "smtp_url_env", "smtp_url_block",
                            "email_to", "email_from", "send_resolved"}) | INTEGRATION_KEYS
_ROUTE_KEYS = frozenset({"job", "job_name", "severity", "kind", "receiver", "continue"})


@dataclass(frozen=True)
class Receiver:
    """Where an alert goes: a Slack webhook and/or an email list. ``send_resolved`` None: the policy's.
    The secrets are named (:class:`~.secret_names.SecretName` from a routes file; the default receiver's
    come from the settings and may be held), resolved only when sending."""

    name: str
    slack_webhook: SecretSource | None = None
    smtp_url: SecretSource | None = None
    email_to: tuple[str, ...] = ()
    email_from: str | None = None
    send_resolved: bool | None = None
    integrations: Integrations = Integrations()

    @property
    def channels(self) -> tuple[ChannelName, ...]:
        """The channels this receiver can send on."""
        usable = {ChannelName.SLACK: self.slack_webhook is not None,
                  ChannelName.EMAIL: self.smtp_url is not None and bool(self.email_to)}
        return (*(channel for channel, ok in usable.items() if ok), *self.integrations.channels)

    @property
    def targets(self) -> tuple[tuple[str, ChannelName], ...]:
        """(target name, channel): the default receiver lists Slack and email, configured or not (its ledger
        lines always did); another receiver only its own."""
        channels = DEFAULT_CHANNELS if self.name == DEFAULT_RECEIVER else self.channels
        return tuple((target_name(self.name, channel), channel) for channel in channels)

    def wants_resolved(self, channel: ChannelName) -> bool | None:
        """Whether ``channel`` is told of a resolution: always for a stateful one (Alertmanager, PagerDuty),
        else ``send_resolved`` (None: the policy's)."""
        return True if stateful(channel) else self.send_resolved

    def refresh_s(self, channel: ChannelName) -> float | None:
        """How often a firing alert is posted again whatever ``repeat_interval`` (Alertmanager: so it
        stays active between audits), in seconds; None for the other channels."""
        alertmanager = self.integrations.alertmanager
        return alertmanager.refresh_s if channel is ChannelName.ALERTMANAGER and alertmanager else None


@dataclass(frozen=True)
class Route:
    """Matchers (empty: any value) and the receiver; ``line``: where the route starts in its file."""

    receiver: str
    jobs: tuple[str, ...] = ()
    job_names: tuple[str, ...] = ()
    severities: tuple[Severity, ...] = ()
    kinds: tuple[AlertKind, ...] = ()
    proceed: bool = False  # the file's ``continue``
    line: int | None = None

    def matches(self, labels: Labels) -> bool:
        return (
            (not self.jobs or any(fnmatchcase(labels.job_id, glob) for glob in self.jobs))
            and (not self.job_names or any(fnmatchcase(labels.job_name, glob) for glob in self.job_names))
            and (not self.severities or labels.severity in self.severities)
            and (not self.kinds or labels.kind in self.kinds)
        )


@dataclass(frozen=True)
class RouteTable:
    """The receivers (the default one included, under ``default``) and the routes, in file order."""

    receivers: Mapping[str, Receiver]
    routes: tuple[Route, ...] = ()

    @classmethod
    def only(cls, default: Receiver) -> RouteTable:
        """Everything to the default receiver (no routes file, or one that cannot be used)."""
        return cls({DEFAULT_RECEIVER: default})

    @property
    def default(self) -> Receiver:
        return self.receivers[DEFAULT_RECEIVER]

    def receivers_for(self, labels: Labels) -> tuple[Receiver, ...]:
        """The receivers of the matching routes (first match, then on while ``continue``), else the default."""
        chosen: list[str] = []
        for route in self.routes:
            if route.matches(labels):
                if route.receiver not in chosen:
                    chosen.append(route.receiver)
                if not route.proceed:
                    break
        return tuple(self.receivers[name] for name in chosen or [DEFAULT_RECEIVER])


def _strings(value: Any, *, what: str, fail: Any) -> tuple[str, ...]:
    """One string or a list of them (a comma-separated string for ``email_to``), none blank."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(item, str) and item.strip() for item in items):
        fail(f"{what} must be a non-empty string or a list of them")
    return tuple(item.strip() for item in items)


def _reference(table: Mapping[str, Any], stem: str, fail: Any) -> SecretName | None:
    env, block = table.get(f"{stem}_env"), table.get(f"{stem}_block")
    if env is not None and (not isinstance(env, str) or not _ENV.match(env)):
        fail(f"{stem}_env must name an environment variable (letters, digits, _)", key=f"{stem}_env")
    if block is not None and (not isinstance(block, str) or not _BLOCK.match(block)):
        fail(f"{stem}_block must name a Prefect Secret block (lowercase letters, digits, -)", key=f"{stem}_block")
    return SecretName(env=env, block=block) if env or block else None


def _receiver(name: str, table: Any, lines: TomlLines, *, file: str, default: Receiver) -> Receiver:
    at = lines.table(f"receivers.{name}") or lines.table("receivers")

    def fail(message: str, key: str | None = None) -> NoReturn:
        raise ConfigError(file, lines.key(at, key) if key else at, f"receiver {name!r}: {message}")

    if not _NAME.match(name) or name == DEFAULT_RECEIVER:
        fail("a receiver name is 1-64 letters, digits, '.', '_' or '-', and not 'default'")
    if not isinstance(table, dict):
        fail("must be a table")
    for key in table:
        if key in _SECRET_KEYS:
            fail(f"{key!r} would put a secret in the file: name an environment variable ({key}_env) or a "
                 f"Prefect Secret block ({key}_block) instead", key)
        if key not in _RECEIVER_KEYS:
            fail(f"unknown key {key!r} (known: {', '.join(sorted(_RECEIVER_KEYS))})", key)
    slack = _reference(table, "slack_webhook", fail)
    smtp: SecretSource | None = _reference(table, "smtp_url", fail)
    recipients: tuple[str, ...] = ()
    if "email_to" in table:
        raw = table["email_to"]
        raw = raw.split(",") if isinstance(raw, str) else raw
        if isinstance(raw, list) and not all(isinstance(item, str) for item in raw):
            fail("email_to must be a string or a list of strings", "email_to")
        try:
            recipients = tuple(check_address(item.strip(), what="email_to") for item in raw if item.strip())
        except (ValueError, AttributeError) as exc:
            fail(str(exc) if isinstance(exc, ValueError) else "email_to must be a list of addresses", "email_to")
        if not recipients:
            fail("email_to lists no address", "email_to")
    sender = table.get("email_from")
    if sender is not None:
        try:
            sender = check_address(str(sender), what="email_from")
        except ValueError as exc:
            fail(str(exc), "email_from")
    resolved = table.get("send_resolved")
    if resolved is not None and not isinstance(resolved, bool):
        fail("send_resolved must be true or false", "send_resolved")
    if recipients and smtp is None:
        smtp = default.smtp_url
        if smtp is None:
            fail("lists email_to but no SMTP server is known: set smtp_url_env or smtp_url_block, or give the "
                 "audit --smtp-url", "email_to")
    if smtp is not None and not recipients:
        fail("names an SMTP server but no email_to", "email_to")
    integrations = parse_integrations(table, fail)
    if slack is None and not recipients and not integrations.channels:
        fail("needs a Slack webhook (slack_webhook_env / slack_webhook_block), an email_to list, "
             "alertmanager_url, webhook_url_env, pagerduty_routing_key_env or teams_webhook_env")
    return Receiver(name=name, slack_webhook=slack, smtp_url=smtp, email_to=recipients, email_from=sender,
                    send_resolved=resolved, integrations=integrations)


def _choices(value: Any, *, allowed: Sequence[str], what: str, fail: Any) -> tuple[str, ...]:
    items = tuple(item.lower() for item in _strings(value, what=what, fail=fail))
    unknown = [item for item in items if item not in allowed]
    if unknown:
        fail(f"{what} {unknown[0][:40]!r} is not one of {', '.join(allowed)}")
    return items


def _route(number: int, table: Any, lines: TomlLines, *, file: str, receivers: Mapping[str, Receiver]) -> Route:
    at = lines.table("routes", number)

    def fail(message: str, key: str | None = None) -> NoReturn:
        raise ConfigError(file, lines.key(at, key) if key else at, f"route {number + 1}: {message}")

    if not isinstance(table, dict):
        fail("must be a table")
    for key in table:
        if key not in _ROUTE_KEYS:
            fail(f"unknown key {key!r} (known: {', '.join(sorted(_ROUTE_KEYS))})", key)
    receiver = table.get("receiver")
    if not isinstance(receiver, str):
        fail("needs a receiver")
    if receiver not in receivers:
        fail(f"names the unknown receiver {str(receiver)[:64]!r}", "receiver")
    proceed = table.get("continue", False)
    if not isinstance(proceed, bool):
        fail("continue must be true or false", "continue")

    def matcher(key: str, **choose: Any) -> tuple[str, ...]:
        if key not in table:
            return ()

        def fail_here(message: str) -> NoReturn:
            fail(message, key)

        if choose:
            return _choices(table[key], what=key, fail=fail_here, **choose)
        return _strings(table[key], what=key, fail=fail_here)

    severities = matcher("severity", allowed=[item.value for item in Severity])
    kinds = matcher("kind", allowed=[item.value for item in AlertKind])
    return Route(receiver=receiver, jobs=matcher("job"), job_names=matcher("job_name"),
                 severities=tuple(Severity(item) for item in severities),
                 kinds=tuple(AlertKind(item) for item in kinds), proceed=proceed, line=at)


def parse_routes(text: str, *, file: str, default: Receiver) -> RouteTable:
    """The route table of a routes file's ``text`` (``file``: its name in errors). ``default``: the
    default receiver (its SMTP server serves receivers naming none). Raises :class:`ConfigError`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, message = toml_syntax_line(str(exc))
        raise ConfigError(file, line, f"not valid TOML: {message}") from None
    lines = TomlLines(text)
    for key in data:
        if key not in ("receivers", "routes"):
            raise ConfigError(file, lines.key(None, key) or lines.table(key),
                              f"unknown top-level key {key!r} (known: receivers, routes)")
    tables = data.get("receivers", {})
    if not isinstance(tables, dict):
        raise ConfigError(file, lines.key(None, "receivers"), "receivers must be a table of receivers")
    receivers = {DEFAULT_RECEIVER: default}
    for name, table in tables.items():
        receivers[name] = _receiver(name, table, lines, file=file, default=default)
    routes = data.get("routes", [])
    if not isinstance(routes, list):
        raise ConfigError(file, lines.key(None, "routes"), "routes must be an array of tables ([[routes]])")
    return RouteTable(receivers, tuple(_route(number, table, lines, file=file, receivers=receivers)
                                       for number, table in enumerate(routes)))
