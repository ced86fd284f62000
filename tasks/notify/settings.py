"""Notification settings: channels, threshold, retry bounds; resolved once at the edge.

Each value comes from a command-line flag, else an environment variable, else
(secrets only) a Prefect Secret block name. Secrets are held as
:class:`~stormwatch.tasks.notify.secrets.SecretRef`, so no ``repr`` of a settings object shows
them, and no error raised here quotes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from stormwatch.severity import Severity
from stormwatch.tasks.notify.ledger import ChannelName
from stormwatch.tasks.notify.secrets import SecretRef

NOTIFY_LEVELS = (Severity.WARNING, Severity.CRITICAL)
DEFAULT_SENDER = "stormwatch@localhost"
ENV_SLACK_WEBHOOK = "STORMWATCH_SLACK_WEBHOOK"
ENV_SMTP_URL = "STORMWATCH_SMTP_URL"
ENV_EMAIL_TO = "STORMWATCH_EMAIL_TO"
ENV_EMAIL_FROM = "STORMWATCH_EMAIL_FROM"
ENV_NOTIFY_ON = "STORMWATCH_NOTIFY_ON"
ENV_DIGEST = "STORMWATCH_NOTIFY_DIGEST"
SECRET_SETTINGS = {"slack_webhook": ("--slack-webhook", ENV_SLACK_WEBHOOK), "smtp_url": ("--smtp-url", ENV_SMTP_URL)}
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"", "0", "false", "no", "off"})


def check_address(address: str, *, what: str) -> str:
    """``address`` when it looks like one mailbox (``x@y``, no spaces, commas or control characters)."""
    if (
        address.count("@") != 1
        or address.startswith("@")
        or address.endswith("@")
        or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 or ch in ",;<>\"'" for ch in address)
    ):
        raise ValueError(f"{what}: {address[:80]!r} is not an email address")
    return address


def parse_bool(raw: object, *, what: str) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ValueError(f"{what}: expected true/false, got {text[:20]!r}")


def parse_notify_on(raw: Severity | str) -> Severity:
    try:
        level = Severity(str(raw).strip().lower())
    except ValueError:
        level = None
    if level not in NOTIFY_LEVELS:
        raise ValueError(f"notify-on must be one of {', '.join(NOTIFY_LEVELS)}, got {str(raw)[:20]!r}")
    return level


@dataclass(frozen=True)
class NotifySettings:
    """Where and when to notify. ``backoff_s``: first retry delay in seconds, doubled per attempt;
    ``max_attempts``: sends per message and call (first try included); ``timeout_s``: per request.

    Email is configured when both ``smtp_url`` and ``email_to`` are; one without the other is an error.
    """

    notify_on: Severity = Severity.CRITICAL
    slack_webhook: SecretRef | None = None
    smtp_url: SecretRef | None = None
    email_to: tuple[str, ...] = ()
    email_from: str | None = None
    digest: bool = False
    max_attempts: int = 3
    backoff_s: float = 1.0
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "notify_on", parse_notify_on(self.notify_on))
        recipients = self.email_to.split(",") if isinstance(self.email_to, str) else self.email_to
        object.__setattr__(self, "email_to", tuple(check_address(a.strip(), what="email-to") for a in recipients))
        if self.email_from is not None:
            check_address(self.email_from, what="email-from")
        if (self.smtp_url is None) != (not self.email_to):
            raise ValueError("email needs both an SMTP URL (--smtp-url) and recipients (--email-to)")
        if not 1 <= self.max_attempts <= 10:
            raise ValueError(f"max_attempts must be within 1..10, got {self.max_attempts}")
        if self.backoff_s < 0 or self.timeout_s <= 0:
            raise ValueError("backoff_s must be >= 0 and timeout_s > 0")

    @property
    def sender(self) -> str:
        return self.email_from or DEFAULT_SENDER

    @property
    def email_configured(self) -> bool:
        return self.smtp_url is not None and bool(self.email_to)

    @property
    def channels(self) -> tuple[ChannelName, ...]:
        """The configured channels (a configured secret may still fail to resolve when sending)."""
        configured = {ChannelName.SLACK: self.slack_webhook is not None, ChannelName.EMAIL: self.email_configured}
        return tuple(channel for channel in ChannelName if configured[channel])

    @classmethod
    def from_sources(
        cls,
        *,
        flags: Mapping[str, object],
        environ: Mapping[str, str],
        blocks: Mapping[str, str] | None = None,
        **tuning: Any,
    ) -> NotifySettings:
        """Settings from flags (argparse ``dest`` names or ``--flag`` spellings; ``vars(args)`` is fine,
        unrelated keys are ignored), else ``environ``, else ``blocks`` (``{"slack_webhook": name,
        "smtp_url": name}``: Prefect Secret block names, loaded only when sending). ``None``, ``""``
        and ``False`` count as unset, so argparse flags need ``default=None`` (or ``store_true``) for
        the environment to apply. ``tuning``: ``max_attempts``/``backoff_s``/``timeout_s``.
        Raises ValueError (never quoting a secret) on a malformed value.
        """
        given = {str(key).lstrip("-").replace("-", "_"): value for key, value in flags.items()}

        def flag(name: str) -> object | None:  # argparse's unset defaults: None, "" and store_true's False
            value = given.get(name)
            return None if value is None or value == "" or value is False else value

        def env(name: str) -> str | None:
            return environ.get(name) or None

        unknown = set(blocks or {}) - set(SECRET_SETTINGS)
        if unknown:
            raise ValueError(f"blocks can name only {', '.join(SECRET_SETTINGS)}; got {', '.join(sorted(unknown))}")
        secrets: dict[str, SecretRef | None] = {}
        for name, (flag_name, env_name) in SECRET_SETTINGS.items():
            flag_value, env_value, block = flag(name), env(env_name), (blocks or {}).get(name)
            if flag_value is not None:
                secrets[name] = SecretRef.held(str(flag_value), flag=flag_name)
            elif env_value is not None:
                secrets[name] = SecretRef.held(env_value, env=env_name)
            else:
                secrets[name] = SecretRef(block=block) if block else None
        for name, ref in secrets.items():
            value = ref.resolve() if ref is not None and ref.is_held else None
            if value is not None:
                check_secret_url(name, value)
        recipients = flag("email_to") or env(ENV_EMAIL_TO) or ""
        notify_on = flag("notify_on") or env(ENV_NOTIFY_ON) or Severity.CRITICAL
        digest = flag("digest")
        return cls(
            notify_on=parse_notify_on(str(notify_on)),
            slack_webhook=secrets["slack_webhook"],
            smtp_url=secrets["smtp_url"],
            email_to=tuple(item.strip() for item in str(recipients).split(",") if item.strip()),
            email_from=str(flag("email_from") or env(ENV_EMAIL_FROM) or "") or None,
            digest=parse_bool(digest if digest is not None else env(ENV_DIGEST) or False, what="digest"),
            **tuning,
        )


def check_secret_url(name: str, value: str) -> None:
    """A webhook must be http(s); an SMTP URL smtp(s) with a host. The message never quotes ``value``."""
    if name == "slack_webhook":
        if not value.lower().startswith(("https://", "http://")) or any(ord(ch) < 33 for ch in value):
            raise ValueError("the Slack webhook must be an http(s) URL without spaces")
    else:
        SmtpTarget.parse(value)


@dataclass(frozen=True)
class SmtpTarget:
    """A parsed ``smtp://[user:password@]host[:port][?starttls=true]`` or ``smtps://...`` URL.

    ``implicit_tls``: smtps (TLS from the first byte, default port 465); otherwise plain SMTP
    (port 25), upgraded with STARTTLS when asked. User and password are URL-decoded.
    """

    host: str
    port: int
    implicit_tls: bool = False
    starttls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, url: str) -> SmtpTarget:
        """Raises ValueError without quoting ``url`` (it may hold a password)."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise ValueError("the SMTP URL is malformed (bad port or brackets)") from None
        scheme = parts.scheme.lower()
        if scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError("the SMTP URL must be smtp://[user:password@]host[:port] or smtps://...")
        query = parse_qs(parts.query, keep_blank_values=True)
        unknown = set(query) - {"starttls"}
        if unknown or parts.fragment or parts.path not in ("", "/"):
            raise ValueError("the SMTP URL may carry only a ?starttls=true|false query")
        starttls = parse_bool(query.get("starttls", ["false"])[-1], what="SMTP URL starttls")
        if starttls and scheme == "smtps":
            raise ValueError("the SMTP URL asks for STARTTLS over smtps:// (already TLS)")
        return cls(
            host=parts.hostname,
            port=port or (465 if scheme == "smtps" else 25),
            implicit_tls=scheme == "smtps",
            starttls=starttls,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password is not None else None,
        )
