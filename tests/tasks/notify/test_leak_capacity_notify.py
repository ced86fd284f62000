"""Leaks, capacity warnings and regressions a suspect device explains, through the real notify path: each
sent once on Slack and email at --notify-on critical, the explained regression only inside the device's message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.fleet_findings import fleet_findings
from stormwatch.history.regressions import RegressionThresholds
from stormwatch.history.sections import compare_fleet
from stormwatch.history.suspects import SuspectThresholds
from stormwatch.severity import Severity
from stormwatch.tasks.notify.dispatch import notify_jobs
from tests.stormwatch.alerting.test_leak_capacity import capacity_sections, growth, leaking_document
from tests.stormwatch.history.device_scenario import NIGHTS, night_time, scenario_history
from tests.tasks.notify.servers import SmtpRecorder, WebhookServer
from tests.tasks.notify.test_notify import settings, slack_text

NOW = datetime(2026, 11, 30, 2, tzinfo=UTC)


def findings() -> list[JobFinding]:
    sections = compare_fleet(scenario_history(), as_of=night_time(NIGHTS - 1), trend_days=30,
                             regression=RegressionThresholds(), suspects=SuspectThresholds()).as_json()
    sections["capacity"] = capacity_sections()["capacity"]
    fleet = fleet_findings(sections, index_url="https://r.example/index.html",
                           report_url_of=lambda job_id: f"https://r.example/{job_id}/report.html")
    return [JobFinding.from_document(leaking_document("vit-0007", growth(1)), report_url=None), *fleet]


def test_each_is_sent_once_and_the_explained_regression_only_with_its_device(webhook: WebhookServer,
                                                                               smtp: SmtpRecorder) -> None:
    channels = settings(webhook, smtp, notify_on=Severity.CRITICAL)
    first = notify_jobs(findings(), ledger=None, settings=channels, now=NOW, fleet_evaluated=True)
    texts = [slack_text(post) for post in webhook.posts]
    assert (first.sent, first.failed, len(texts)) == (6, 0, 3)  # leak, capacity, device; Slack and email each
    assert any("Leak:* rank 1" in text and "grows 1.2 GiB/h; at this rate it would run out of the 80 GiB device"
               in text for text in texts)
    assert any("Capacity:*" in text and "needs more than 80 GiB within 3 runs" in text for text in texts)
    (device,) = [text for text in texts if "Suspect host:* device 2" in text]
    assert "explained by suspect device node-bad/2" in device and "train-e-0011" in device
    assert not any("is regression" in text for text in texts)  # never to the job's team on its own
    plain = "\n".join(message.part("plain") for message in smtp.messages)
    assert "explained by suspect device node-bad/2" in plain and "Leak" in plain and "Capacity" in plain

    again = notify_jobs(findings(), ledger=first.ledger, alerts=first.alerts, settings=channels,
                        now=NOW + timedelta(days=1), fleet_evaluated=True)
    assert (again.sent, len(webhook.posts)) == (0, 3)  # still firing: not told again
