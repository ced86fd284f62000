"""The JSON webhook, PagerDuty and Teams end to end, on real local HTTP receivers checking what they get.

Each receiver checks the documented shape (PagerDuty Events API v2, an Adaptive Card 1.4 message,
stormwatch's webhook version 1 with its HMAC-SHA256 signature over the exact body) and answers 400
to anything else, so a wrong payload fails the send and the test. Secrets come from environment
variables named in routes.toml and are then searched for in everything stormwatch keeps or logs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.routes import RouteTable, parse_routes
from stormwatch.tasks.notify.dispatch import default_receiver
from stormwatch.tasks.notify.settings import NotifySettings
from tests.stormwatch.alerting.alert_builders import START_NS, make_fact, make_finding
from tests.tasks.notify.integration_servers import JsonReceiver, json_receiver, signed_by, silent_server
from tests.tasks.notify.test_notify import Notifier, lines

NOW = datetime(2026, 10, 3, 2, tzinfo=UTC)
HOUR_NS = 3600 * 10**9
HMAC_KEY = "hmac-key-7f3a9c1e55d2"
PD_KEY = "R0UT1NGKEY0123456789abcdefabcdef"
PD_TOP = {"routing_key", "event_action", "dedup_key", "payload", "images", "links", "client", "client_url"}
PD_SEVERITIES = {"critical", "error", "warning", "info"}
TARGETS = ("ops/webhook", "ops/pagerduty", "ops/teams")


def pagerduty_shape(headers: dict[str, str], raw: bytes) -> list[str]:
    """Problems with an Events API v2 event, per PagerDuty's documentation."""
    event = orjson.loads(raw)
    problems = [f"unknown member {key}" for key in event if key not in PD_TOP]
    if event.get("routing_key") != PD_KEY:
        problems.append("routing_key missing or wrong")
    if event.get("event_action") not in ("trigger", "acknowledge", "resolve"):
        problems.append(f"event_action {event.get('event_action')!r}")
    if not isinstance(event.get("dedup_key"), str) or not 0 < len(event["dedup_key"]) <= 255:
        problems.append("dedup_key")
    if event.get("event_action") == "trigger":
        payload = event.get("payload", {})
        if not isinstance(payload.get("summary"), str) or not 0 < len(payload["summary"]) <= 1024:
            problems.append("payload.summary")
        if payload.get("severity") not in PD_SEVERITIES:
            problems.append(f"payload.severity {payload.get('severity')!r}")
        if not payload.get("source"):
            problems.append("payload.source")
        if not isinstance(payload.get("custom_details", {}), dict):
            problems.append("payload.custom_details")
        for link in event.get("links", []):
            if set(link) != {"href", "text"}:
                problems.append("links")
    return problems


def teams_shape(headers: dict[str, str], raw: bytes) -> list[str]:
    """Problems with a Workflows webhook message carrying one Adaptive Card 1.4."""
    message = orjson.loads(raw)
    problems = []
    if message.get("type") != "message" or len(message.get("attachments", [])) != 1:
        return ["not a message with one attachment"]
    attachment = message["attachments"][0]
    card = attachment.get("content", {})
    if attachment.get("contentType") != "application/vnd.microsoft.card.adaptive":
        problems.append("contentType")
    if card.get("type") != "AdaptiveCard" or card.get("version") != "1.4" or "$schema" not in card:
        problems.append("not an AdaptiveCard 1.4")
    for element in card.get("body", []):
        if element.get("type") == "TextBlock" and not isinstance(element.get("text"), str):
            problems.append("TextBlock without text")
        elif element.get("type") == "FactSet" and not all(
                isinstance(fact.get("title"), str) and isinstance(fact.get("value"), str) for fact in element["facts"]):
            problems.append("FactSet fact")
        elif element.get("type") not in ("TextBlock", "FactSet"):
            problems.append(f"element {element.get('type')!r}")
    for action in card.get("actions", []):
        if action.get("type") != "Action.OpenUrl" or not str(action.get("url", "")).startswith("http"):
            problems.append("action")
    return problems


def webhook_shape(key: bytes) -> Any:
    signed = signed_by(key)

    def check(headers: dict[str, str], raw: bytes) -> list[str]:
        document = orjson.loads(raw)
        problems = signed(headers, raw)
        if document.get("version") != 1 or not document.get("alerts"):
            problems.append("not version 1 with alerts")
        for alert in document.get("alerts", []):
            wanted = {"id", "state", "severity", "labels", "summary", "report_url", "starts_at", "ends_at"}
            missing = wanted - set(alert)
            problems += [f"alert lacks {name}" for name in sorted(missing)]
        return problems

    return check


def run(number: int, *, clean: bool = False, signal: str = "alert:critical") -> JobFinding:
    finding = make_finding(f"llama-8r-{number:04d}", make_fact(signal=signal), started_ns=START_NS + number * HOUR_NS,
                           hosts=("node-3",))
    return replace(finding, indicators=(), verdict="clean") if clean else finding


@dataclass
class Receivers:
    webhook: JsonReceiver
    pagerduty: JsonReceiver
    teams: JsonReceiver

    def routes(self, settings: NotifySettings, *, extra: str = "") -> RouteTable:
        text = f"""
[receivers.ops]
webhook_url_env = "SW_TEST_HOOK_URL"
webhook_hmac_env = "SW_TEST_HOOK_KEY"
pagerduty_routing_key_env = "SW_TEST_PD_KEY"
pagerduty_url = "http://127.0.0.1:{self.pagerduty.port}/v2/enqueue"
teams_webhook_env = "SW_TEST_TEAMS_URL"
send_resolved = true
{extra}

[[routes]]
receiver = "ops"
"""
        return parse_routes(text, file="routes.toml", default=default_receiver(settings))


@pytest.fixture
def receivers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receivers]:
    with ExitStack() as stack:
        found = Receivers(webhook=stack.enter_context(json_receiver(webhook_shape(HMAC_KEY.encode()))),
                          pagerduty=stack.enter_context(json_receiver(pagerduty_shape)),
                          teams=stack.enter_context(json_receiver(teams_shape)))
        monkeypatch.setenv("SW_TEST_HOOK_URL", found.webhook.url)
        monkeypatch.setenv("SW_TEST_HOOK_KEY", HMAC_KEY)
        monkeypatch.setenv("SW_TEST_PD_KEY", PD_KEY)
        monkeypatch.setenv("SW_TEST_TEAMS_URL", found.teams.url.replace("secret-path-Zq7", "teams-sig-Yx4"))
        yield found


def statuses(ledger: bytes | None) -> list[tuple[str, ...]]:
    return [(line["state"], *(line["channels"][target]["status"] for target in TARGETS))
            for line in lines(ledger or b"") if "ops/webhook" in line["channels"]]


def test_trigger_resolve_and_once_only_on_each_receiver(receivers: Receivers) -> None:
    settings = NotifySettings(backoff_s=0.001, timeout_s=5.0)
    routes = receivers.routes(settings)
    notify = Notifier(settings)

    first = notify([run(1)], now=NOW, routes=routes)
    assert (first.sent, first.failed) == (3, 0)
    assert [item.problems for item in (receivers.webhook, receivers.pagerduty, receivers.teams)] == [[], [], []]
    [hook] = receivers.webhook.bodies
    [alert] = hook["alerts"]
    assert (hook["version"], alert["id"], alert["state"], alert["repeat"]) == (
        1, "llama-8r|most_severe|alert:critical", "firing", False)
    assert alert["labels"]["job_name"] == "llama-8r" and alert["labels"]["host"] == "node-3"
    assert alert["report_url"] == "https://r.example/llama-8r-0001/report.html"
    assert "Firing: llama-8r: Most severe alert:critical on rank 0" in hook["text"]
    [trigger] = receivers.pagerduty.bodies
    assert (trigger["event_action"], trigger["dedup_key"], trigger["payload"]["severity"]) == (
        "trigger", "llama-8r|most_severe|alert:critical", "critical")
    assert trigger["payload"]["component"] == "llama-8r" and trigger["payload"]["source"] == "node-3"
    assert trigger["links"] == [{"href": "https://r.example/llama-8r-0001/report.html", "text": "Stormwatch report"}]
    [card] = receivers.teams.bodies
    assert card["attachments"][0]["content"]["actions"][0]["url"] == "https://r.example/llama-8r-0001/report.html"

    again = notify([run(1)], now=NOW + timedelta(minutes=5), routes=routes)
    later = notify([run(2)], now=NOW + timedelta(days=1), routes=routes)  # still firing, within repeat_interval
    assert (again.sent, later.sent) == (0, 0)
    assert [len(item.posts) for item in (receivers.webhook, receivers.pagerduty, receivers.teams)] == [1, 1, 1]

    resolved = notify([run(3, clean=True)], now=NOW + timedelta(days=2), routes=routes)
    assert (resolved.sent, resolved.failed) == (3, 0)
    assert receivers.pagerduty.bodies[-1] == {"routing_key": PD_KEY, "event_action": "resolve",
                                              "dedup_key": "llama-8r|most_severe|alert:critical"}
    assert receivers.webhook.bodies[-1]["alerts"][0]["state"] == "resolved"
    assert receivers.webhook.bodies[-1]["alerts"][0]["ends_at"] == (NOW + timedelta(days=2)).isoformat()
    assert all(not item.problems for item in (receivers.webhook, receivers.pagerduty, receivers.teams))
    assert statuses(notify.ledger) == [("firing", "sent", "sent", "sent"),
                                       ("still_firing", "still_firing", "still_firing", "still_firing"),
                                       ("resolved", "sent", "sent", "sent")]


def test_a_receiver_that_never_answers_fails_alone_and_is_retried(receivers: Receivers, monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    settings = NotifySettings(backoff_s=0.001, timeout_s=0.3, max_attempts=2)
    routes = receivers.routes(settings)
    notify = Notifier(settings)
    caplog.set_level(logging.DEBUG)
    with silent_server() as (never_url, connections):
        monkeypatch.setenv("SW_TEST_HOOK_URL", never_url + "/hook-secret-Qp2")
        first = notify([run(1)], now=NOW, routes=routes)
    assert (first.sent, first.failed) == (2, 1)
    assert len(connections) == 2  # two attempts, each cut by the timeout; then the audit went on
    assert [len(receivers.pagerduty.posts), len(receivers.teams.posts)] == [1, 1]
    [line] = [line for line in lines(notify.ledger or b"") if "ops/webhook" in line["channels"]]
    hook = line["channels"]["ops/webhook"]
    assert (hook["status"], hook["attempts"]) == ("failed", 2) and "ReadTimeout" in hook["error"]

    monkeypatch.setenv("SW_TEST_HOOK_URL", receivers.webhook.url)  # the receiver is back
    second = notify([run(1)], now=NOW + timedelta(hours=1), routes=routes)
    assert (second.sent, second.failed) == (1, 0)  # only the failed one, once
    assert [len(item.posts) for item in (receivers.webhook, receivers.pagerduty, receivers.teams)] == [1, 1, 1]
    assert receivers.webhook.problems == []

    kept = b"\n".join([notify.ledger or b"", notify.alerts or b"", caplog.text.encode()])
    for secret in (HMAC_KEY, PD_KEY, "hook-secret-Qp2", "secret-path-Zq7", "teams-sig-Yx4"):
        assert secret.encode() not in kept, secret
    assert all(PD_KEY.encode() not in body.replace(f'"routing_key":"{PD_KEY}"'.encode(), b"")
               for _, body in receivers.pagerduty.posts)  # only where the Events API wants it
    assert all(HMAC_KEY.encode() not in body for _, body in receivers.webhook.posts)


def test_templates_override_the_text_and_html_ones_are_escaped(receivers: Receivers, tmp_path: Path) -> None:
    (tmp_path / "summary.txt.j2").write_text("{{ alert.labels.job_name }} is {{ alert.severity.value }} "
                                             "({{ alert.labels.signal }})")
    (tmp_path / "text.html.j2").write_text("<ul>{% for a in alerts %}<li>{{ a.summary }}</li>{% endfor %}</ul>")
    settings = NotifySettings(backoff_s=0.001, timeout_s=5.0)
    routes = receivers.routes(settings, extra=f'summary_template = "{tmp_path / "summary.txt.j2"}"\n'
                                              f'text_template = "{tmp_path / "text.html.j2"}"')
    result = Notifier(settings)([run(1, signal="<b>x</b>")], now=NOW, routes=routes)
    assert (result.sent, result.failed) == (3, 0)
    assert receivers.pagerduty.bodies[0]["payload"]["summary"] == "llama-8r is critical (<b>x</b>)"
    assert receivers.webhook.bodies[0]["text"] == "<ul><li>llama-8r is critical (&lt;b&gt;x&lt;/b&gt;)</li></ul>"


def test_a_template_that_fails_fails_its_receiver_only(receivers: Receivers, tmp_path: Path) -> None:
    (tmp_path / "broken.txt.j2").write_text("{{ alert.no_such_member }}")
    settings = NotifySettings(backoff_s=0.001, timeout_s=5.0)
    routes = receivers.routes(settings, extra=f'summary_template = "{tmp_path / "broken.txt.j2"}"')
    result = Notifier(settings)([run(1)], now=NOW, routes=routes)
    assert (result.sent, result.failed) == (0, 3)  # every integration of the receiver uses the template
    [line] = [line for line in lines(result.ledger) if "ops/webhook" in line["channels"]]
    assert all(line["channels"][target]["status"] == "failed" for target in TARGETS)
    assert "broken.txt.j2" in line["channels"]["ops/webhook"]["error"]
