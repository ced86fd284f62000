"""Notification settings: flags > environment > Prefect Secret blocks, secrets hidden from every repr,
SMTP URLs parsed, malformed values refused without quoting a secret."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import timedelta
from typing import Any

import pytest

from stormwatch.alerting.policy import AlertPolicy
from stormwatch.alerting.targets import SmtpTarget
from stormwatch.severity import Severity
from stormwatch.tasks.notify.secrets import SecretRef
from stormwatch.tasks.notify.settings import NotifySettings

FLAG_HOOK = "https://hooks.example/services/FLAG/secret-flag"
ENV_HOOK = "https://hooks.example/services/ENV/secret-env"
BLOCK_HOOK = "https://hooks.example/services/BLOCK/secret-block"
FLAG_SMTP = "smtp://bot:flag-pass-1@mail.example:2525"
ENV_SMTP = "smtps://bot:env-pass-2@mail.example"
FULL_ENV = {
    "STORMWATCH_SLACK_WEBHOOK": ENV_HOOK,
    "STORMWATCH_SMTP_URL": ENV_SMTP,
    "STORMWATCH_EMAIL_TO": "env@example.com",
    "STORMWATCH_EMAIL_FROM": "env-from@example.com",
    "STORMWATCH_NOTIFY_ON": "warning",
    "STORMWATCH_NOTIFY_DIGEST": "true",
}
BLOCKS = {"slack_webhook": "stormwatch-slack", "smtp_url": "stormwatch-smtp"}
BLOCK_VALUES = {"stormwatch-slack": BLOCK_HOOK, "stormwatch-smtp": "smtp://bot:block-pass-3@mail.example"}
FULL_FLAGS: dict[str, Any] = {
    "slack_webhook": FLAG_HOOK,
    "smtp_url": FLAG_SMTP,
    "email_to": "a@example.com, b@example.com",
    "email_from": "flag-from@example.com",
    "notify_on": "critical",
    "digest": False,
}


def fake_blocks(name: str) -> str | None:
    return BLOCK_VALUES.get(name)


def resolved(settings: NotifySettings) -> tuple[str | None, str | None]:
    refs = (settings.slack_webhook, settings.smtp_url)
    return tuple(None if ref is None else ref.resolve(load_block=fake_blocks) for ref in refs)  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("flags", "environ", "expected"),
    [
        pytest.param(FULL_FLAGS, FULL_ENV, (FLAG_HOOK, FLAG_SMTP), id="flags-win"),
        pytest.param({}, FULL_ENV, (ENV_HOOK, ENV_SMTP), id="env-over-blocks"),
        pytest.param({"slack_webhook": ""}, {}, (BLOCK_HOOK, BLOCK_VALUES["stormwatch-smtp"]), id="blocks-last"),
        pytest.param({"--slack-webhook": FLAG_HOOK}, FULL_ENV, (FLAG_HOOK, ENV_SMTP), id="mixed"),
    ],
)
def test_secret_precedence_is_flags_then_environment_then_blocks(
    flags: dict[str, Any], environ: dict[str, str], expected: tuple[str, str]
) -> None:
    recipients = {} if "STORMWATCH_EMAIL_TO" in environ or "email_to" in flags else {"email_to": "x@example.com"}
    settings = NotifySettings.from_sources(flags={**flags, **recipients}, environ=environ, blocks=BLOCKS)
    assert resolved(settings) == expected


def test_blocks_are_named_not_loaded_until_sending() -> None:
    settings = NotifySettings.from_sources(flags={"email_to": "x@example.com"}, environ={}, blocks=BLOCKS)
    assert settings.slack_webhook == SecretRef(block="stormwatch-slack")
    calls: list[str] = []

    def loader(name: str) -> str:
        calls.append(name)
        return BLOCK_HOOK

    assert settings.slack_webhook is not None and settings.slack_webhook.resolve(load_block=loader) == BLOCK_HOOK
    assert calls == ["stormwatch-slack"]


def test_plain_settings_come_from_flags_then_environment() -> None:
    from_flags = NotifySettings.from_sources(flags=FULL_FLAGS, environ=FULL_ENV)
    assert from_flags.email_to == ("a@example.com", "b@example.com")
    assert from_flags.email_from == "flag-from@example.com"
    assert (from_flags.notify_on, from_flags.digest) == (Severity.CRITICAL, True)  # digest False: store_true unset
    from_env = NotifySettings.from_sources(flags={"storage": "s3://bucket", "digest": None}, environ=FULL_ENV)
    assert from_env.email_to == ("env@example.com",) and from_env.email_from == "env-from@example.com"
    assert (from_env.notify_on, from_env.digest) == (Severity.WARNING, True)
    default = NotifySettings.from_sources(flags={}, environ={})
    assert default == NotifySettings() and not default.email_configured and default.sender == "stormwatch@localhost"


def test_tuning_passes_through() -> None:
    settings = NotifySettings.from_sources(flags={}, environ={}, max_attempts=5, backoff_s=0.0, timeout_s=2.5)
    assert (settings.max_attempts, settings.backoff_s, settings.timeout_s) == (5, 0.0, 2.5)


def test_no_repr_or_serialisation_shows_a_secret() -> None:
    settings = NotifySettings.from_sources(flags=FULL_FLAGS, environ=FULL_ENV)
    env_only = NotifySettings.from_sources(flags={}, environ=FULL_ENV)
    shown = [repr(settings), str(settings), repr(env_only), str(dataclasses.asdict(settings)), repr(env_only.smtp_url)]
    for text in shown:
        for secret in ("secret-flag", "secret-env", "flag-pass-1", "env-pass-2", "hooks.example"):
            assert secret not in text
    assert repr(settings.slack_webhook) == "SecretRef(flag='--slack-webhook', value=<hidden>)"
    assert repr(env_only.slack_webhook) == "SecretRef(env='STORMWATCH_SLACK_WEBHOOK', value=<hidden>)"
    target = SmtpTarget.parse(FLAG_SMTP)
    assert "password" not in repr(target) and "flag-pass-1" not in repr(target) and target.password == "flag-pass-1"
    copy = pickle.loads(pickle.dumps(settings))  # a worker process gets the value, as a flag would give it
    assert copy == settings and copy.slack_webhook is not None and copy.slack_webhook.resolve() == FLAG_HOOK


def test_refs_compare_by_place_and_value(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SecretRef.held("a") == SecretRef.held("a") != SecretRef.held("b")
    assert SecretRef(env="X") != SecretRef.held("a", env="X")
    monkeypatch.setenv("STORMWATCH_TEST_HOOK", "from-process-env")
    assert SecretRef(env="STORMWATCH_TEST_HOOK").resolve() == "from-process-env"
    assert SecretRef().resolve() is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("smtp://mail.example", SmtpTarget("mail.example", 25)),
        ("smtps://mail.example", SmtpTarget("mail.example", 465, implicit_tls=True)),
        ("smtp://mail.example:587?starttls=true", SmtpTarget("mail.example", 587, starttls=True)),
        (
            "SMTP://u%40corp:p%3Aw%2Fd@127.0.0.1:2525/",
            SmtpTarget("127.0.0.1", 2525, username="u@corp", password="p:w/d"),
        ),
        ("smtp://user:@mail.example", SmtpTarget("mail.example", 25, username="user", password="")),
    ],
)
def test_smtp_urls_parse(url: str, expected: SmtpTarget) -> None:
    assert SmtpTarget.parse(url) == expected


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"slack_webhook": "ftp://hooks/secret-token"}, "http(s) URL"),
        ({"slack_webhook": "https://hooks/secret token"}, "http(s) URL"),
        ({"smtp_url": "http://u:secret-token@host", "email_to": "a@example.com"}, "smtp://"),
        ({"smtp_url": "smtp://u:secret-token@host:99999", "email_to": "a@example.com"}, "malformed"),
        ({"smtp_url": "smtp://u:secret-token@host?tls=1", "email_to": "a@example.com"}, "starttls"),
        ({"smtp_url": "smtps://u:secret-token@host?starttls=true", "email_to": "a@example.com"}, "already TLS"),
        ({"smtp_url": "smtp://u:secret-token@host"}, "recipients"),
        ({"email_to": "a@example.com"}, "SMTP URL"),
        ({"email_to": "a@example.com\r\nBcc: x@y", "smtp_url": "smtp://h"}, "not an email address"),
        ({"email_from": "me", "smtp_url": "smtp://h", "email_to": "a@example.com"}, "not an email address"),
        ({"notify_on": "info"}, "notify-on"),
        ({"digest": "maybe"}, "digest"),
    ],
)
def test_malformed_values_are_refused_without_quoting_secrets(flags: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        NotifySettings.from_sources(flags=flags, environ={})
    assert "secret-token" not in str(caught.value)


def test_unknown_block_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="blocks can name only"):
        NotifySettings.from_sources(flags={}, environ={}, blocks={"email_to": "x"})


@pytest.mark.parametrize(
    ("field", "value"), [("max_attempts", 0), ("max_attempts", 11), ("backoff_s", -1.0), ("timeout_s", 0.0)]
)
def test_retry_bounds_are_checked(field: str, value: float) -> None:
    with pytest.raises(ValueError):
        NotifySettings(**{field: value})  # type: ignore[arg-type]


def test_sources_are_pydantic_settings_read_when_built_never_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_settings import BaseSettings

    from stormwatch.tasks.notify.settings import NotifySources

    assert issubclass(NotifySources, BaseSettings)
    monkeypatch.setenv("STORMWATCH_SLACK_WEBHOOK", ENV_HOOK)
    monkeypatch.setenv("STORMWATCH_NOTIFY_DIGEST", "yes")
    monkeypatch.setenv("STORMWATCH_EMAIL_TO", "")  # empty counts as unset
    from_process = NotifySources()  # os.environ, read now
    assert from_process.slack_webhook is not None and from_process.slack_webhook.get_secret_value() == ENV_HOOK
    assert from_process.notify_digest is True and from_process.email_to is None
    given = NotifySources.read({"--smtp-url": FLAG_SMTP, "storage": "s3://x", "digest": False}, environ=FULL_ENV)
    assert given.smtp_url is not None and given.smtp_url.get_secret_value() == FLAG_SMTP  # flag over environment
    assert given.slack_webhook is not None and given.slack_webhook.get_secret_value() == ENV_HOOK
    assert given.notify_digest is True  # --digest unset (False): the environment's
    for text in (repr(from_process), str(given), given.model_dump_json()):
        assert "**********" in text and "secret-env" not in text and "flag-pass-1" not in text
    assert NotifySources.read({}, environ={}) == NotifySources.read({}, environ={"OTHER": "1"})


def test_settings_dump_masks_held_secrets() -> None:
    settings = NotifySettings.from_sources(flags=FULL_FLAGS, environ={})
    assert settings.slack_webhook is not None
    dumped = settings.slack_webhook.model_dump(mode="json")
    assert dumped == {"env": None, "block": None, "flag": "--slack-webhook", "value": "**********"}


def test_the_alert_policy_is_checked_inside_the_settings_and_travels_with_them() -> None:
    """The policy is a plain dataclass: pydantic validates it as a field (from a deployment's JSON
    too), its own check's message comes through, and the settings pickle with it (Dask workers)."""
    settings = NotifySettings(alerting={"group_above": 2, "repeat_interval": "PT12H"})  # type: ignore[arg-type]
    assert settings.alerting == AlertPolicy(group_above=2, repeat_interval=timedelta(hours=12))
    assert pickle.loads(pickle.dumps(settings)) == settings
    with pytest.raises(ValueError, match="group_above must be a whole number"):
        NotifySettings(alerting={"group_above": -1})  # type: ignore[arg-type]
