"""Integrations in routes.toml (Alertmanager, webhook, PagerDuty, Teams) and their pure payloads and decisions."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.alerting.alert_records import AlertStatus, Transition
from stormwatch.alerting.config_file import ConfigError
from stormwatch.alerting.decisions import Action, Circumstances, plan_alert
from stormwatch.alerting.ledger import ChannelName
from stormwatch.alerting.notices import notice_of
from stormwatch.alerting.payloads.alertmanager import alertmanager_payload
from stormwatch.alerting.payloads.pagerduty import pagerduty_event
from stormwatch.alerting.payloads.webhook import signature
from stormwatch.alerting.policy import AlertPolicy
from stormwatch.alerting.receivers import AlertmanagerConfig
from stormwatch.alerting.routes import Receiver, parse_routes
from stormwatch.alerting.secret_names import SecretName
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import T0, book_of, make_finding, told

FILE = "reports/routes.toml"
DEFAULT = Receiver(name="default")
WITH_SMTP = Receiver(name="default", smtp_url=SecretName(env="SMTP"), email_to=("ops@example.com",))
AM = '[receivers.a]\nalertmanager_url = "http://am:9093/"\n'


def receiver(text: str) -> Receiver:
    return parse_routes(text, file=FILE, default=DEFAULT).receivers["a"]


CHANNELS = [
    ("alertmanager", AM, [ChannelName.ALERTMANAGER]),
    ("webhook", '[receivers.a]\nwebhook_url_env = "HOOK"\nwebhook_hmac_block = "hook-key"\n', [ChannelName.WEBHOOK]),
    ("pagerduty", '[receivers.a]\npagerduty_routing_key_env = "PD"\n', [ChannelName.PAGERDUTY]),
    ("teams", '[receivers.a]\nteams_webhook_block = "teams-hook"\n', [ChannelName.TEAMS]),
    ("slack and teams", '[receivers.a]\nslack_webhook_env = "S"\nteams_webhook_env = "T"\n',
     [ChannelName.SLACK, ChannelName.TEAMS]),
]


@pytest.mark.parametrize(("case", "text", "channels"), CHANNELS, ids=[case[0] for case in CHANNELS])
def test_each_integration_is_a_channel_of_its_receiver(case: str, text: str, channels: list[ChannelName]) -> None:
    parsed = receiver(text)
    assert list(parsed.channels) == channels
    assert [target for target, _ in parsed.targets] == [f"a/{channel.value}" for channel in channels]


def test_integration_settings_are_read_with_secrets_named() -> None:
    parsed = receiver(AM + 'alertmanager_token_env = "AM_TOKEN"\nalertmanager_ends_after = "30h"\n'
                           'alertmanager_refresh = "90m"\nwebhook_url_env = "HOOK"\nwebhook_hmac_env = "KEY"\n'
                           'summary_template = "t/summary.txt.j2"\n')
    assert parsed.integrations.alertmanager == AlertmanagerConfig(
        url="http://am:9093", token=SecretName(env="AM_TOKEN"), ends_after_s=30 * 3600, refresh_s=90 * 60)
    assert parsed.integrations.webhook_hmac == SecretName(env="KEY")
    assert parsed.integrations.summary_template == "t/summary.txt.j2"
    assert parsed.wants_resolved(ChannelName.ALERTMANAGER) is True
    assert parsed.wants_resolved(ChannelName.WEBHOOK) is None
    assert parsed.refresh_s(ChannelName.ALERTMANAGER) == 90 * 60 and parsed.refresh_s(ChannelName.WEBHOOK) is None


ERRORS = [
    ("a routing key in the file", '[receivers.a]\npagerduty_routing_key = "R0UTE"\n', 2, "would put a secret"),
    ("an HMAC key in the file", '[receivers.a]\nwebhook_url_env = "H"\nwebhook_hmac = "k3y!"\n', 3,
     "would put a secret"),
    ("credentials in the Alertmanager URL", '[receivers.a]\nalertmanager_url = "http://u:pw@am:9093"\n', 2,
     "must not carry credentials"),
    ("not a URL", '[receivers.a]\nalertmanager_url = "am:9093"\n', 2, "must be an http(s) URL"),
    ("a bad duration", AM + 'alertmanager_ends_after = "soon"\n', 3, "must be a duration"),
    ("settings without a URL", '[receivers.a]\nslack_webhook_env = "S"\nalertmanager_refresh = "1h"\n', 3,
     "need alertmanager_url"),
    ("an HMAC key without a webhook", '[receivers.a]\nslack_webhook_env = "S"\nwebhook_hmac_env = "K"\n', 3,
     "needs webhook_url_env"),
    ("a PagerDuty URL without a key", '[receivers.a]\nslack_webhook_env = "S"\npagerduty_url = "http://pd"\n', 3,
     "needs pagerduty_routing_key"),
    ("a bad block name", '[receivers.a]\nteams_webhook_block = "Teams Hook"\n', 2, "must name a Prefect Secret block"),
]


@pytest.mark.parametrize(("case", "text", "line", "message"), ERRORS, ids=[case[0] for case in ERRORS])
def test_bad_integration_settings_name_the_line(case: str, text: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_routes(text, file=FILE, default=DEFAULT)
    assert str(caught.value).startswith(f"{FILE} line {line}: ") and message in str(caught.value), str(caught.value)
    for secret in ("R0UTE", "k3y!", ":pw@"):
        assert secret not in str(caught.value)


def test_every_routes_example_in_the_docs_parses() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "alerting.md").read_text()
    examples = re.findall(r"```toml\n(.*?)```", docs, re.DOTALL)
    assert len(examples) >= 5
    channels = set()
    for example in examples:
        table = parse_routes(example, file="docs/alerting.md", default=WITH_SMTP)
        channels |= {channel for item in table.receivers.values() for channel in item.channels}
    assert {ChannelName.ALERTMANAGER, ChannelName.WEBHOOK, ChannelName.PAGERDUTY, ChannelName.TEAMS} <= channels


REFRESH = [  # (last posted before now, observed again now) -> action on Alertmanager; on a webhook
    ("posted 10 min ago", timedelta(minutes=10), Transition.STILL_FIRING, Action.HOLD, Action.HOLD),
    ("posted 2 h ago, seen again", timedelta(hours=2), Transition.STILL_FIRING, Action.SEND_REPEAT, Action.HOLD),
    ("posted 2 h ago, not evaluated", timedelta(hours=2), Transition.NONE, Action.SEND_REPEAT, Action.HOLD),
    ("posted 8 d ago, seen again", timedelta(days=8), Transition.STILL_FIRING, Action.SEND_REPEAT, Action.SEND_REPEAT),
]


@pytest.mark.parametrize(("case", "ago", "transition", "alertmanager", "webhook"), REFRESH,
                         ids=[case[0] for case in REFRESH])
def test_alertmanager_is_refreshed_every_audit_others_once_per_repeat_interval(
        case: str, ago: timedelta, transition: Transition, alertmanager: Action, webhook: Action) -> None:
    parsed = receiver(AM + 'webhook_url_env = "HOOK"\n')
    [record] = book_of(make_finding("llama-8r-0001")).records.values()
    now = T0 + timedelta(days=30)
    record = told(told(record, "a/alertmanager", at=now - ago), "a/webhook", at=now - ago)
    plans = plan_alert(record, (parsed,), Circumstances(transition, None, None), policy=AlertPolicy(),
                       notify_on=Severity.CRITICAL, now=now)
    assert [(plan.target, plan.action) for plan in plans] == [("a/alertmanager", alertmanager), ("a/webhook", webhook)]


def test_stateful_channels_are_told_of_a_resolution_whatever_send_resolved() -> None:
    parsed = receiver(AM + 'pagerduty_routing_key_env = "PD"\nwebhook_url_env = "HOOK"\nsend_resolved = false\n')
    [record] = book_of(make_finding("llama-8r-0001")).records.values()
    for target in ("a/alertmanager", "a/pagerduty", "a/webhook"):
        record = told(record, target)
    record = replace(record, status=AlertStatus.RESOLVED, resolved_at=(T0 + timedelta(days=1)).isoformat())
    plans = plan_alert(record, (parsed,), Circumstances(Transition.RESOLVED, None, None), policy=AlertPolicy(),
                       notify_on=Severity.CRITICAL, now=T0 + timedelta(days=1))
    assert {plan.target: plan.action for plan in plans} == {
        "a/alertmanager": Action.SEND_RESOLVED, "a/pagerduty": Action.SEND_RESOLVED, "a/webhook": Action.HOLD}


def test_alertmanager_ends_at_is_ahead_while_firing_and_the_resolution_time_after() -> None:
    [record] = book_of(make_finding("llama-8r-0001")).records.values()
    now = datetime(2026, 10, 2, 2, tzinfo=UTC)
    [firing] = alertmanager_payload([notice_of(record, repeat=False)], now=now, ends_after_s=26 * 3600)
    assert (firing["startsAt"], firing["endsAt"]) == ("2026-10-01T02:00:00Z", "2026-10-03T04:00:00Z")
    resolved = replace(record, status=AlertStatus.RESOLVED, resolved_at=now.isoformat())
    [closing] = alertmanager_payload([notice_of(resolved, repeat=True)], now=now + timedelta(hours=5),
                                     ends_after_s=26 * 3600)
    assert closing["endsAt"] == "2026-10-02T02:00:00Z" and closing["labels"] == firing["labels"]


def test_pagerduty_summary_and_dedup_key_stay_within_limits() -> None:
    [record] = book_of(make_finding("llama-8r-0001")).records.values()
    notice = replace(notice_of(record, repeat=False), summary="x" * 5000, identity="j" * 300)
    event = pagerduty_event(notice)
    assert len(event["payload"]["summary"]) == 1024
    assert event["dedup_key"] == "sha256:" + hashlib.sha256(b"j" * 300).hexdigest()
    assert "routing_key" not in event  # added by the sender only


def test_signature_is_hmac_sha256_of_the_exact_body() -> None:
    body = b'{"version":1}'
    assert signature(body, b"key") == "sha256=" + hmac.new(b"key", body, hashlib.sha256).hexdigest()
    assert signature(body + b" ", b"key") != signature(body, b"key")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("llama-8r: Most severe alert:critical on rank 0", "llama-8r: Most severe alert:critical on rank 0"),
        ("job **x** [a](http://e) a_b", "job \\*\\*x\\*\\* \\[a\\]\\(http://e\\) a\\_b"),
        ("`code` ~strike~ back\\slash", "\\`code\\` \\~strike\\~ back\\\\slash"),
        ("- a list", "\\- a list"),
        ("# heading", "\\# heading"),
        ("1. numbered", "1\\. numbered"),
        ("12) numbered", "12\\) numbered"),
        ("2026 is a year", "2026 is a year"),
    ],
)
def test_teams_text_shows_markdown_as_written(text: str, shown: str) -> None:
    from stormwatch.alerting.payloads.teams import plain

    assert plain(text) == shown
