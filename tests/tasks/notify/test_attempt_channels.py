"""A job of several sessions names its worst attempt in every channel, escaped (Slack, email)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.messages import new_jobs
from stormwatch.severity import Severity
from stormwatch.tasks.notify.email import email_html, email_subject, email_text
from stormwatch.tasks.notify.slack import slack_payload
from tests import builders as b
from tests.stormwatch.alerting.test_attempt_findings import DESCRIPTION, attempt_document


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("restarted") / "train"
    b.write_restarted_job(root)
    return root


def test_every_channel_names_the_attempt(restarted: Path) -> None:
    finding = JobFinding.from_document(attempt_document(restarted), report_url="https://reports.example.com/train/report.html")
    slack = orjson.dumps(slack_payload([finding], notify_on=Severity.CRITICAL)).decode()
    assert DESCRIPTION in slack and "(attempt 1 of 2, interrupted)" in slack

    message = new_jobs([finding], notify_on=Severity.CRITICAL)
    assert "(attempt 1 of 2, interrupted)" in email_subject(message)
    assert f"From: {DESCRIPTION}" in email_text(message)
    assert DESCRIPTION in email_html(message)


def test_an_attempts_description_is_escaped_in_every_channel(restarted: Path) -> None:
    document = attempt_document(restarted)
    hostile = "<!channel> <b>run</b> & <https://evil.example|click>"
    for attempt in document["attempts"]:
        attempt["description"] = hostile
    finding = JobFinding.from_document(document, report_url=None)
    assert finding.attempt is not None and finding.attempt.description == hostile

    slack = orjson.dumps(slack_payload([finding], notify_on=Severity.CRITICAL)).decode()
    assert "<!channel>" not in slack and "&lt;!channel&gt;" in slack and "<https://evil" not in slack
    html = email_html(new_jobs([finding], notify_on=Severity.CRITICAL))
    assert "<b>run</b>" not in html and "&lt;b&gt;run&lt;/b&gt;" in html
