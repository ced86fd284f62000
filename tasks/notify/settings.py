"""Notification settings: channels, threshold, retry bounds; resolved once at the edge and passed down.

Two layers. :class:`NotifySources` is a ``pydantic_settings.BaseSettings``: command-line
flags (init values) over ``STORMWATCH_*`` environment variables, secrets typed
``SecretStr`` so every ``repr``/``str``/log of it shows ``**********``. It reads the
environment only when constructed (never at import) and never a ``.env`` file.
:class:`NotifySettings` is what the notify step receives: validated, frozen, each secret a
:class:`~stormwatch.tasks.notify.secrets.SecretRef` (a held ``SecretStr``, or the name of a
Prefect Secret block loaded only when sending). Precedence: flag > environment > block.
No error raised here quotes a secret. :func:`parse_duration` reads the alert policy's durations as
people and deployments write them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Annotated, Any

from pydantic import (
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from stormwatch.alerting.ledger import ChannelName
from stormwatch.alerting.policy import AlertPolicy
from stormwatch.alerting.targets import check_address, check_secret_url, parse_bool, parse_notify_on
from stormwatch.severity import Severity
from stormwatch.tasks.notify.secrets import SecretRef

ENV_PREFIX = "STORMWATCH_"
DEFAULT_SENDER = "stormwatch@localhost"
SECRET_FLAGS = {"slack_webhook": "--slack-webhook", "smtp_url": "--smtp-url"}
_FLAG_NAMES = {"digest": "notify_digest"}  # the flag --digest, the variable STORMWATCH_NOTIFY_DIGEST
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("stormwatch_notify_environ", default=None)
_DURATION_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
_ISO_DURATION = TypeAdapter(timedelta)  # pydantic's reading of ISO 8601 durations, as it writes them


def parse_duration(raw: object) -> timedelta:
    """``7d``, ``36h``, ``90m``, ``3600s``, an ISO 8601 duration (``P7D``, how a deployment's JSON holds
    it), a timedelta or seconds as a number, as a positive timedelta; ValueError otherwise."""
    if isinstance(raw, timedelta):
        value = raw
    elif isinstance(raw, int | float) and not isinstance(raw, bool):
        value = timedelta(seconds=raw)
    else:
        text = str(raw).strip()
        unit = _DURATION_UNITS.get(text[-1:].lower()) if text[:-1].replace(".", "", 1).isdigit() else None
        number = text.replace(".", "", 1).isdigit()
        try:
            if unit or number:
                value = timedelta(**{unit: float(text[:-1])}) if unit else timedelta(seconds=float(text))
            else:
                value = _ISO_DURATION.validate_python(text)
        except (ValueError, OverflowError):
            raise ValueError(f"{text[:20]!r} is not a duration (7d, 36h, 90m, 3600s, P7D)") from None
    if value <= timedelta(0):
        raise ValueError(f"a duration must be positive, got {raw!s:.20}")
    return value


def plain_error(exc: ValidationError) -> ValueError:
    """A ValueError holding pydantic's messages only, never an input value: our own checks' messages
    as they are (they name their field), pydantic's own ones prefixed by the field (``field: message``)."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(item) for item in error["loc"])
        if error["type"] == "value_error":
            parts.append(str(error["msg"]).removeprefix("Value error, "))
        else:
            parts.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return ValueError("; ".join(parts))


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        pairs = ((name, value) for name, value in self._environ.items() if value or not self.env_ignore_empty)
        return {name if self.case_sensitive else name.lower(): value for name, value in pairs}


@contextmanager
def _reading(environ: Mapping[str, str] | None) -> Iterator[None]:
    token = _ENVIRON.set(environ)
    try:
        yield
    finally:
        _ENVIRON.reset(token)


class NotifySources(BaseSettings):
    """Raw notification inputs: flags over ``STORMWATCH_<FIELD>`` variables (``STORMWATCH_NOTIFY_DIGEST``
    for ``notify_digest``); empty values count as unset. Secret URLs are checked for shape here."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", frozen=True, hide_input_in_errors=True
    )

    slack_webhook: SecretStr | None = None
    smtp_url: SecretStr | None = None
    email_to: str | None = None
    email_from: str | None = None
    notify_on: str | None = None
    notify_digest: bool | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags, then the environment (the one given to :meth:`read`); never a .env file or secrets dir."""
        environ = _ENVIRON.get()
        return init_settings, env_settings if environ is None else _MappingEnvSource(settings_cls, environ)

    @field_validator("notify_digest", mode="before")
    @classmethod
    def _digest(cls, raw: object) -> bool | None:
        return None if raw is None else parse_bool(raw, what="digest")

    @field_validator("slack_webhook", "smtp_url")
    @classmethod
    def _secret_shape(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is not None:
            check_secret_url(str(info.field_name), value.get_secret_value())
        return value

    @classmethod
    def read(cls, flags: Mapping[str, object], *, environ: Mapping[str, str] | None = None) -> NotifySources:
        """From ``flags`` (argparse ``dest`` names or ``--flag`` spellings; unrelated keys ignored;
        ``None``, ``""`` and ``False`` count as unset) over ``environ`` (``os.environ`` when ``None``).
        Raises ValueError, never quoting a secret."""
        try:
            with _reading(environ):
                return cls(**given_flags(flags))
        except ValidationError as exc:
            raise plain_error(exc) from None


def given_flags(flags: Mapping[str, object]) -> dict[str, Any]:
    """The flags that are set, by field name (``--smtp-url`` -> ``smtp_url``, ``digest`` -> ``notify_digest``)."""
    named = ((str(key).lstrip("-").replace("-", "_"), value) for key, value in flags.items())
    return {_FLAG_NAMES.get(name, name): value for name, value in named if value not in (None, "", False)}


@dataclass(frozen=True, config=ConfigDict(hide_input_in_errors=True))
class NotifySettings:
    """Where and when to notify. ``backoff_s``: first retry delay in seconds, doubled per attempt;
    ``max_attempts``: sends per message and call (first try included, 1..10); ``timeout_s``: per
    request, in seconds. ``email_to`` accepts a comma-separated string. ``alerting``: repeat interval,
    resolved messages, grouping, the routes file (:class:`~stormwatch.alerting.policy.AlertPolicy`).

    Email is configured when both ``smtp_url`` and ``email_to`` are; one without the other is an error.
    """

    notify_on: Severity = Severity.CRITICAL
    slack_webhook: SecretRef | None = None
    smtp_url: SecretRef | None = None
    email_to: tuple[str, ...] = ()
    email_from: str | None = None
    digest: bool = False
    max_attempts: Annotated[int, Field(ge=1, le=10)] = 3
    backoff_s: Annotated[float, Field(ge=0)] = 1.0
    timeout_s: Annotated[float, Field(gt=0)] = 10.0
    alerting: AlertPolicy = AlertPolicy()

    @field_validator("notify_on", mode="before")
    @classmethod
    def _notify_on(cls, raw: Severity | str) -> Severity:
        return parse_notify_on(raw)

    @field_validator("email_to", mode="before")
    @classmethod
    def _recipients(cls, raw: str | Iterable[str]) -> tuple[str, ...]:
        items = raw.split(",") if isinstance(raw, str) else raw
        return tuple(check_address(str(item).strip(), what="email-to") for item in items if str(item).strip())

    @field_validator("email_from")
    @classmethod
    def _sender(cls, value: str | None) -> str | None:
        return None if value is None else check_address(value, what="email-from")

    @model_validator(mode="after")
    def _email_pair(self) -> NotifySettings:
        if (self.smtp_url is None) != (not self.email_to):
            raise ValueError("email needs both an SMTP URL (--smtp-url) and recipients (--email-to)")
        return self

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
        return tuple(channel for channel, ok in configured.items() if ok)

    @classmethod
    def from_sources(
        cls,
        *,
        flags: Mapping[str, object],
        environ: Mapping[str, str],
        blocks: Mapping[str, str] | None = None,
        **tuning: Any,
    ) -> NotifySettings:
        """Settings from flags (see :meth:`NotifySources.read`), else ``environ``, else ``blocks``
        (``{"slack_webhook": name, "smtp_url": name}``: Prefect Secret block names, loaded only when
        sending). ``tuning``: ``max_attempts``/``backoff_s``/``timeout_s``/``alerting``. Raises ValueError (never
        quoting a secret) on a malformed value."""
        unknown = set(blocks or {}) - set(SECRET_FLAGS)
        if unknown:
            raise ValueError(f"blocks can name only {', '.join(SECRET_FLAGS)}; got {', '.join(sorted(unknown))}")
        sources = NotifySources.read(flags, environ=environ)
        given = given_flags(flags)
        secrets: dict[str, SecretRef | None] = {}
        for name, flag_name in SECRET_FLAGS.items():
            value: SecretStr | None = getattr(sources, name)
            block = (blocks or {}).get(name)
            if value is not None:
                origin = {"flag": flag_name} if name in given else {"env": f"{ENV_PREFIX}{name.upper()}"}
                secrets[name] = SecretRef(value=value, **origin)
            else:
                secrets[name] = SecretRef(block=block) if block else None
        try:
            return cls(
                notify_on=parse_notify_on(sources.notify_on or Severity.CRITICAL),
                slack_webhook=secrets["slack_webhook"],
                smtp_url=secrets["smtp_url"],
                email_to=tuple((sources.email_to or "").split(",")),  # blanks dropped, each address checked
                email_from=sources.email_from,
                digest=bool(sources.notify_digest),
                **tuning,
            )
        except ValidationError as exc:
            raise plain_error(exc) from None
