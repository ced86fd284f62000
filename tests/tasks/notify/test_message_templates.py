"""Slack's and email's message text from a receiver's own templates (``slack_template``,
``email_text_template``, ``email_html_template`` in routes.toml), checked on what the real local
webhook receiver and aiosmtpd server get; telemetry strings stay escaped whatever the template."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.routes import RouteTable, parse_routes
from stormwatch.tasks.notify.dispatch import default_receiver
from stormwatch.tasks.notify.settings import NotifySettings
from stormwatch.tasks.notify.templating import load_template, render_template
from tests.stormwatch.alerting.documents import HOSTILE, document
from tests.tasks.notify.servers import SmtpRecorder, WebhookServer, webhook_server
from tests.tasks.notify.test_notify import REPORTS, Notifier, lines, settings

# a job id that would close a JSON string and open a mention if anything wrote it raw
SLY_JOB_ID = 'llama-8r-0001", "text": "<!channel>'
SLACK_OVERRIDE = """\
{"text": {{ "On call: " ~ entries[0].headline }},
 "blocks": [{% for entry in entries %}{"type": "section", "text": {"type": "mrkdwn",
   "text": {{ "*" ~ entry.job_id ~ "* is " ~ entry.verdict }}}}{% if not loop.last %},{% endif %}{% endfor %}]}
"""
TEXT_OVERRIDE = ("Pager ({{ receiver }}): "
                 "{% for entry in entries %}{{ entry.job_id }} is {{ entry.verdict }}{% endfor %}")
HTML_OVERRIDE = ("<p>{{ title }}</p>{% for entry in entries %}<b>{{ entry.job_id }}</b>"
                 "{% for fact in entry.facts %}<i>{{ fact.phase }}</i>{% endfor %}{% endfor %}")


@pytest.fixture
def team(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookServer]:
    with webhook_server() as server:
        monkeypatch.setenv("STORMWATCH_TEST_TEAM_HOOK", server.url)
        yield server


def hostile(job_id: str = SLY_JOB_ID) -> JobFinding:
    """A critical job whose alert signal and phase are :data:`HOSTILE`."""
    return JobFinding.from_document(document("hostile", job_id=job_id), report_url=f"{REPORTS}/x/report.html")


def team_routes(notify: NotifySettings, **templates: Path) -> RouteTable:
    keys = "".join(f'{key} = "{path}"\n' for key, path in templates.items())
    text = (f'[receivers.team]\nslack_webhook_env = "STORMWATCH_TEST_TEAM_HOOK"\nemail_to = ["team@example.com"]\n'
            f'{keys}\n[[routes]]\njob = "*"\nreceiver = "team"\n')
    return parse_routes(text, file="routes.toml", default=default_receiver(notify))


def test_overrides_change_what_the_webhook_and_the_smtp_server_receive(
    team: WebhookServer, smtp: SmtpRecorder, tmp_path: Path
) -> None:
    paths = {"slack_template": tmp_path / "team.json.j2", "email_text_template": tmp_path / "team.txt.j2",
             "email_html_template": tmp_path / "team.html.j2"}
    for path, text in zip(paths.values(), (SLACK_OVERRIDE, TEXT_OVERRIDE, HTML_OVERRIDE), strict=True):
        path.write_text(text)
    notify = settings(smtp=smtp)
    result = Notifier(notify)([hostile()], routes=team_routes(notify, **paths))
    assert (result.sent, result.failed) == (2, 0)
    [post] = team.posts
    assert list(post) == ["text", "blocks"]  # the override's structure, whatever the job id holds
    assert post["text"].startswith("On call: job llama-8r-0001\", \"text\": \"&lt;!channel&gt; is critical: ")
    assert post["blocks"] == [{"type": "section", "text": {
        "type": "mrkdwn", "text": '*llama-8r-0001", "text": "&lt;!channel&gt;* is critical'}}]
    assert b"<!channel>" not in team.raw_posts[0]
    [mail] = smtp.messages
    assert mail.rcpt_tos == ("team@example.com",)
    assert mail.part("plain").strip() == f'Pager (team): {SLY_JOB_ID} is critical'
    html = mail.part("html")
    assert html.startswith("<p>Stormwatch: critical GPU-memory finding</p><b>llama-8r-0001&quot;, &quot;text&quot;: "
                           "&quot;&lt;!channel&gt;</b>")
    assert "<i>&lt;!channel&gt; &lt;http://evil.example|click&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>" not in html and HOSTILE not in html


def test_without_overrides_a_receiver_gets_the_default_text(team: WebhookServer, smtp: SmtpRecorder) -> None:
    notify = settings(smtp=smtp)
    Notifier(notify)([hostile("llama-8r-0002")], routes=team_routes(notify))
    [post] = team.posts
    assert post["text"].startswith("Stormwatch: job llama-8r-0002 is critical: ")
    assert post["blocks"][0] == {"type": "header", "text": {"type": "plain_text",
                                                             "text": "Stormwatch: critical GPU-memory finding"}}
    plain = smtp.messages[0].part("plain")
    assert plain.startswith("Stormwatch: critical GPU-memory finding.\r\n\r\nJob: llama-8r-0002\r\n")


@pytest.mark.parametrize(("key", "name", "text", "says"), [
    ("slack_template", "bad.json.j2", '{"text": {{ entries[0].headline }', "line 1"),  # does not compile
    ("slack_template", "list.json.j2", "[{{ title }}]", "did not give a JSON object"),
    ("slack_template", "unknown.json.j2", '{"text": {{ entries[0].no_such_member }}}', "UndefinedError"),
    ("email_text_template", "bad.txt.j2", "{% for entry in entries %}", "line 1"),
    ("email_html_template", "missing.html.j2", None, "cannot be read"),
])
def test_a_broken_override_fails_its_target_by_name_and_the_next_call_retries(
    team: WebhookServer, smtp: SmtpRecorder, tmp_path: Path, key: str, name: str, text: str | None, says: str
) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    notify = settings(smtp=smtp)
    routes = team_routes(notify, **{key: path})
    notifier = Notifier(notify)
    first = notifier([hostile("llama-8r-0003")], routes=routes)
    broken = "team/slack" if key == "slack_template" else "team/email"
    working = "team/email" if key == "slack_template" else "team/slack"
    assert (first.sent, first.failed) == (1, 1)  # the other channel of the receiver is not held up
    for line in lines(first.ledger):  # one per finding of the job, sent in one message
        assert line["channels"][broken]["status"] == "failed" and line["channels"][working]["status"] == "sent"
        assert name in line["channels"][broken]["error"] and says in line["channels"][broken]["error"]
    path.unlink(missing_ok=True)  # the receiver's override removed: the next call sends with the default
    second = notifier([hostile("llama-8r-0003")], routes=team_routes(notify))
    assert (second.sent, second.failed) == (1, 0)
    latest = {line["kind"]: line for line in lines(second.ledger)}
    assert all(line["channels"][broken]["status"] == "sent" for line in latest.values())
    assert len(team.posts) == len(smtp.messages) == 1  # each channel told once: the failed one on the retry


@pytest.mark.parametrize("value", ['x", "y": "z', "a\\\"b", "<!channel> & </script>", "line\nbreak", "\u2028"])
def test_a_json_template_writes_every_value_as_json(tmp_path: Path, value: str) -> None:
    (tmp_path / "t.json.j2").write_text('{"text": {{ value }}, "same": {{ value | tojson }}, "n": {{ 3 }}}')
    rendered = orjson.loads(render_template(load_template(tmp_path / "t.json.j2"), value=value))
    assert rendered == {"text": value, "same": value, "n": 3}
