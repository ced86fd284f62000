"""Where notifications go: mailbox addresses, the Slack webhook URL and the SMTP URL, checked.

Every check here raises ValueError with a message that never quotes a secret: a
webhook URL or an SMTP URL (which may hold a password) is described, not shown.
Mailbox addresses are not secret and are quoted (truncated) so a typo is easy to find.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from stormwatch.severity import Severity

#: The severities a notification threshold may name (``info`` would notify on everything).
NOTIFY_LEVELS = (Severity.WARNING, Severity.CRITICAL)
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"", "0", "false", "no", "off"})
_ADDRESS_FORBIDDEN = frozenset(",;<>\"'")


def check_address(address: str, *, what: str) -> str:
    """``address`` when it looks like one mailbox (``x@y``, no spaces, commas or control characters)."""
    if (
        address.count("@") != 1
        or address.startswith("@")
        or address.endswith("@")
        or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 or ch in _ADDRESS_FORBIDDEN for ch in address)
    ):
        raise ValueError(f"{what}: {address[:80]!r} is not an email address")
    return address


def parse_bool(raw: object, *, what: str) -> bool:
    """``True`` for 1/true/yes/on, ``False`` for ""/0/false/no/off (any case); else ValueError."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ValueError(f"{what}: expected true/false, got {text[:20]!r}")


def parse_notify_on(raw: Severity | str) -> Severity:
    """The threshold as a :class:`Severity`: one of :data:`NOTIFY_LEVELS`, else ValueError."""
    try:
        level = Severity(str(raw).strip().lower())
    except ValueError:
        level = None
    if level not in NOTIFY_LEVELS:
        raise ValueError(f"notify-on must be one of {', '.join(NOTIFY_LEVELS)}, got {str(raw)[:20]!r}")
    return level


def check_secret_url(name: str, value: str) -> None:
    """A webhook (``name == "slack_webhook"``) must be http(s); an SMTP URL smtp(s) with a host.
    The message never quotes ``value``."""
    if name == "slack_webhook":
        if not value.lower().startswith(("https://", "http://")) or any(ord(ch) < 33 for ch in value):
            raise ValueError("the Slack webhook must be an http(s) URL without spaces")
    else:
        SmtpTarget.parse(value)


@dataclass(frozen=True)
class SmtpTarget:
    """A parsed ``smtp://[user:password@]host[:port][?starttls=true]`` or ``smtps://...`` URL.

    ``implicit_tls``: smtps (TLS from the first byte, default port 465); otherwise plain SMTP
    (port 25), upgraded with STARTTLS when asked. User and password are URL-decoded; the
    password is left out of ``repr``.
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
