"""Hostile telemetry stays inert in Slack and email; secrets never reach the ledger, results, reprs or logs;
SMTP login over plain SMTP, STARTTLS and smtps against aiosmtpd with a certificate made in the test."""

from __future__ import annotations

import logging
import re
import ssl
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.tasks.notify.dispatch import notify_jobs
from stormwatch.tasks.notify.secrets import SecretRef
from stormwatch.tasks.notify.settings import NotifySettings
from tests.stormwatch.alerting.documents import HOSTILE_JOB_ID, document
from tests.tasks.notify.servers import WEBHOOK_PATH, SmtpRecorder, WebhookServer, self_signed_tls, smtp_server
from tests.tasks.notify.test_notify import NOW, ONCALL, REPORTS, lines, states

PASSWORD = "p@ss:w0rd/Secret%42"
USER = "stormwatch-bot"
SECRET_FRAGMENTS = ("xoxSecretToken42", "T0SECRET", WEBHOOK_PATH, PASSWORD, quote(PASSWORD, safe=""))
ALLOWED_TAGS = {"html", "body", "p", "h3", "code", "table", "tr", "th", "td", "a", "br", "small"}


def hostile_job() -> JobFinding:
    return JobFinding.from_document(document("hostile"), report_url=f"{REPORTS}/{HOSTILE_JOB_ID}/report.html")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    return self_signed_tls(tmp_path_factory.mktemp("tls"))


def both(webhook: WebhookServer, smtp: SmtpRecorder) -> NotifySettings:
    return NotifySettings(
        slack_webhook=SecretRef.held(webhook.url),
        smtp_url=SecretRef.held(f"smtp://127.0.0.1:{smtp.port}"),
        email_to=ONCALL,
        email_from="stormwatch@example.com",
        backoff_s=0.001,
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)


def test_hostile_strings_cannot_link_mention_or_format_in_slack(webhook: WebhookServer, smtp: SmtpRecorder) -> None:
    notify_jobs([hostile_job()], ledger=None, settings=both(webhook, smtp), now=NOW)
    (post,) = webhook.posts
    texts = [post["text"], *(block["text"]["text"] for block in post["blocks"] if block["type"] == "section")]
    for text in texts:
        assert "\r" not in text and "\n\n" not in text
        links = re.findall(r"<([^>]*)>", text)
        assert all(link.startswith(f"{REPORTS}/") and link.endswith("|open report") for link in links)
        assert all(link.count("|") == 1 for link in links)
    section = texts[1]
    for inert in (
        "&lt;!channel&gt;",
        "&lt;http://evil.example|click&gt;",
        "&amp;",
        "&lt;script&gt;",
        "&lt;@U0ADMIN&gt;",
    ):
        assert inert in section
    assert "*Job:* evil  Bcc: victim@evil.example  X-Injected: 1 &lt;!channel&gt;" in section
    assert f"<{REPORTS}/evil%20%20Bcc:%20victim@evil.example%20%20X-Injected:%201%20%3C!channel%3E" in section
    assert b"<!channel>" not in webhook.raw_posts[0] and b"<script>" not in webhook.raw_posts[0]


def test_hostile_strings_are_escaped_in_email_and_cannot_add_headers(
    webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    notify_jobs([hostile_job()], ledger=None, settings=both(webhook, smtp), now=NOW)
    (received,) = smtp.messages
    assert received.rcpt_tos == ONCALL
    message = received.message
    assert sorted(message.keys()) == sorted(
        ["Subject", "From", "To", "Date", "Message-ID", "Auto-Submitted", "MIME-Version", "Content-Type"]
    )
    assert message["Subject"].startswith("[stormwatch] critical: job evil  Bcc: victim@evil.example  X-Injected: 1 ")
    header_block = received.data.split(b"\r\n\r\n", 1)[0]
    assert not re.search(rb"^(Bcc|X-Injected):", header_block, re.MULTILINE | re.IGNORECASE)

    html = received.part("html")
    parser = _Tags()
    parser.feed(html)
    assert parser.tags <= ALLOWED_TAGS
    assert "<script>" not in html and "<!channel>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;!channel&gt;" in html
    assert html.count("<a href=") == 1
    text = received.part("plain")
    assert "<!channel> <http://evil.example|click> & <script>alert(1)</script>" in text  # plain text: shown as is


def test_secrets_never_reach_ledger_results_reprs_or_logs(
    webhook: WebhookServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    evidence: list[str] = []
    with smtp_server(auth=(USER, PASSWORD), auth_require_tls=False) as smtp:
        good_smtp = f"smtp://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{smtp.port}"
        bad_smtp = f"smtp://{USER}:{quote('wrong' + PASSWORD, safe='')}@127.0.0.1:{smtp.port}"
        ledger: bytes | None = None
        for smtp_url, webhook_down in ((bad_smtp, True), (good_smtp, False)):
            webhook.always_fail = webhook_down
            settings = NotifySettings.from_sources(
                flags={"slack_webhook": webhook.url, "smtp_url": smtp_url, "email_to": ",".join(ONCALL)},
                environ={},
                backoff_s=0.001,
                max_attempts=2,
            )
            result = notify_jobs([hostile_job()], ledger=ledger, settings=settings, now=NOW)
            ledger = result.ledger
            evidence += [repr(settings), str(settings), repr(result), result.summary(), ledger.decode()]
        assert len(smtp.messages) == 1 and smtp.logins[-1][1] == USER
    assert len(webhook.posts) == 1 and ledger is not None
    first_errors = [line["channels"] for line in lines(ledger)[:2]]
    assert first_errors[0]["email"]["error"].startswith("SMTPAuthenticationError: (535")
    assert "[redacted]" in first_errors[0]["slack"]["error"]
    assert states(ledger)[HOSTILE_JOB_ID, "most_severe"] == ("sent", "sent")
    evidence.append(caplog.text)
    assert any("HTTP Request: POST" in record.getMessage() for record in caplog.records)  # httpx logged, redacted
    for fragment in SECRET_FRAGMENTS:
        for text in evidence:
            assert fragment not in text


def test_login_after_starttls_with_a_trusted_certificate(
    tls: tuple[Path, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert_path, context = tls
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_path))
    with smtp_server(auth=(USER, PASSWORD), starttls_context=context) as smtp:
        url = f"smtp://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{smtp.port}?starttls=true"
        settings = NotifySettings(smtp_url=SecretRef.held(url), email_to=ONCALL, backoff_s=0.001)
        result = notify_jobs([hostile_job()], ledger=None, settings=settings, now=NOW)
        assert result.sent == 1 and len(smtp.messages) == 1 and smtp.logins == [("PLAIN", USER)]
        assert smtp.messages[0].message["From"] == "stormwatch@localhost"


def test_smtps_with_a_trusted_certificate_and_an_untrusted_one(
    tls: tuple[Path, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert_path, context = tls
    # aiosmtpd cannot tell that an implicit-TLS connection is encrypted: let it offer AUTH anyway
    with smtp_server(auth=(USER, PASSWORD), auth_require_tls=False, implicit_tls_context=context) as smtp:
        url = f"smtps://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{smtp.port}"
        settings = NotifySettings(smtp_url=SecretRef.held(url), email_to=ONCALL, backoff_s=0.001)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        untrusted = notify_jobs([hostile_job()], ledger=None, settings=settings, now=NOW)
        email = lines(untrusted.ledger)[-1]["channels"]["email"]
        assert email["status"] == "failed" and email["attempts"] == 1  # a certificate problem is not retried
        assert email["error"].startswith("SSLCertVerificationError")
        monkeypatch.setenv("SSL_CERT_FILE", str(cert_path))
        trusted = notify_jobs([hostile_job()], ledger=untrusted.ledger, settings=settings, now=NOW)
        assert trusted.sent == 1 and len(smtp.messages) == 1 and smtp.logins == [("PLAIN", USER)]
