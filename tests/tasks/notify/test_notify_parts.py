"""The pieces under notify_jobs that talk to the world: escaping, Slack limits, email headers, retries, redaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.severity import Severity
from stormwatch.tasks.notify.delivery import SendError, deliver
from stormwatch.tasks.notify.email import build_message
from stormwatch.tasks.notify.secrets import Redactor
from stormwatch.tasks.notify.slack import MAX_SECTION_CHARS, job_section_text, slack_escape, slack_link, slack_payload
from stormwatch.tasks.retry import RetryPolicy
from tests.stormwatch.alerting.documents import HOSTILE, document

NOW = datetime(2026, 1, 2, 2, 0, tzinfo=UTC)


# --- escaping ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("<!channel>", "&lt;!channel&gt;"),
        ("<!here|here>", "&lt;!here|here&gt;"),
        ("<http://evil.example|click>", "&lt;http://evil.example|click&gt;"),
        ("<@U0ADMIN> & <#C0GENERAL>", "&lt;@U0ADMIN&gt; &amp; &lt;#C0GENERAL&gt;"),
        ("&lt; already", "&amp;lt; already"),
        ("line\nbreak", "line break"),
    ],
)
def test_slack_escape(raw: str, escaped: str) -> None:
    assert slack_escape(raw) == escaped


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://r.example/job-1/report.html", "<https://r.example/job-1/report.html|open report>"),
        ("https://r.example/a|b>c<d e?x=1&y=2", "<https://r.example/a%7Cb%3Ec%3Cd%20e?x=1&amp;y=2|open report>"),
        ("file:///srv/reports/<job>/report.html", "file:///srv/reports/&lt;job&gt;/report.html"),
        ("s3://bucket/reports/job-1/report.html", "s3://bucket/reports/job-1/report.html"),
        (None, None),
    ],
)
def test_slack_links_only_for_web_urls(url: str | None, shown: str | None) -> None:
    assert slack_link(url) == shown


def huge_hostile_job() -> JobFinding:
    doc = document("hostile", job_id=HOSTILE * 40)
    for indicator in doc["model"]["indicators"]:
        indicator["details"] = indicator["phase_path"] = indicator["signal"] = "<&>" * 2000
    return JobFinding.from_document(doc, report_url="https://r.example/report.html")


def test_a_section_stays_within_slacks_limit_and_inert() -> None:
    text = job_section_text(huge_hostile_job())
    assert len(text) <= MAX_SECTION_CHARS
    assert text.count("<") == 1 and "<https://r.example/report.html|open report>" in text
    assert not text.rstrip("…").endswith(("&", "&a", "&am", "&l", "&g"))


def test_a_digest_keeps_within_fifty_blocks() -> None:
    jobs = [JobFinding.from_document(document("collective", job_id=f"job-{n}"), report_url=None) for n in range(60)]
    payload = slack_payload(jobs, notify_on=Severity.CRITICAL)
    assert len(payload["blocks"]) == 47
    assert payload["blocks"][-1]["elements"][0]["text"].startswith("… and 15 more job(s)")
    assert payload["text"].startswith("Stormwatch: 60 jobs with critical GPU-memory findings: job job-0 is critical")
    assert len(orjson.dumps(payload)) < 200_000


def test_email_headers_stay_single_lines_for_any_job_id() -> None:
    message = build_message(
        [huge_hostile_job()], notify_on=Severity.CRITICAL, sender="s@example.com", recipients=["a@example.com"], now=NOW
    )
    head = bytes(message).split(b"\r\n\r\n", 1)[0].decode()
    names = [line.split(":", 1)[0] for line in head.split("\r\n") if not line.startswith((" ", "\t"))]
    assert names == ["Subject", "From", "To", "Date", "Message-ID", "Auto-Submitted", "MIME-Version", "Content-Type"]
    assert len(str(message["Subject"])) <= 200


# --- retries ---------------------------------------------------------------------------------


def flaky(failures: list[Exception]) -> Callable[[], None]:
    def send() -> None:
        if failures:
            raise failures.pop(0)

    return send


@pytest.mark.parametrize(
    ("failures", "ok", "attempts", "sleeps"),
    [
        ([], True, 1, []),
        ([SendError("HTTP 500", retriable=True)] * 2, True, 3, [0.1, 0.2]),
        ([SendError("HTTP 500", retriable=True)] * 3, False, 3, [0.1, 0.2]),
        ([SendError("HTTP 400 invalid_payload", retriable=False)], False, 1, []),
        ([SendError("HTTP 429", retriable=True, retry_after_s=7.0)], True, 2, [7.0]),
        ([SendError("HTTP 429", retriable=True, retry_after_s=3600.0)], True, 2, [30.0]),
        ([RuntimeError("bug with https://hooks.example/T/secret-path")], False, 1, []),
    ],
)
def test_deliver_retries_transient_failures_with_exponential_back_off(
    failures: list[Exception], ok: bool, attempts: int, sleeps: list[float]
) -> None:
    slept: list[float] = []
    delivery = deliver(
        flaky(list(failures)),
        what="test message",
        policy=RetryPolicy.exponential(3, first_delay_s=0.1),
        redact=Redactor(["https://hooks.example/T/secret-path"]),
        sleep=slept.append,
    )
    assert (delivery.ok, delivery.attempts, slept) == (ok, attempts, sleeps)
    assert delivery.error is None if ok else "secret-path" not in (delivery.error or "")


def test_back_off_doubles() -> None:
    policy = RetryPolicy.exponential(5, first_delay_s=1.0)
    assert [policy.delay_s(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]


def test_redactor_covers_encoded_forms_and_url_parts() -> None:
    redact = Redactor(["smtp://bot:p%40ss%2Fw0rd@mail.example:25", "https://hooks.example/services/T1/B2/tok3n?x=1"])
    text = (
        "login p@ss/w0rd p%40ss%2Fw0rd url /services/T1/B2/tok3n?x=1 raw https://hooks.example/services/T1/B2/tok3n?x=1"
    )
    assert redact(text) == "login [redacted] [redacted] url [redacted] raw [redacted]"
