"""Regressions and suspect hosts reach Slack and email once each, whatever --notify-on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.fleet_findings import fleet_findings
from stormwatch.severity import Severity
from stormwatch.tasks.notify.dispatch import notify_jobs
from tests.tasks.notify.servers import SmtpRecorder, WebhookServer
from tests.tasks.notify.test_notify import settings, slack_text

NOW = datetime(2026, 11, 30, 2, tzinfo=UTC)
SECTIONS = {
    "regressions": [{"job_id": "train-05-2026-11-30", "job_name": "train-05", "metric": "peak_reserved_bytes",
                     "value_bytes": 3 << 30, "baseline_bytes": 2 << 30, "change_pct": 50.0, "baseline_runs": 7}],
    "suspect_hosts": [{"host": "node-<13>", "device_id": 2, "jobs": 11, "anomalous_jobs": 9, "rate": 9 / 11,
                       "fleet_rate": 0.06}],
}


def findings() -> list[JobFinding]:
    return fleet_findings(SECTIONS, index_url="https://r.example/index.html",
                          report_url_of=lambda job_id: f"https://r.example/{job_id}/report.html")


def test_fleet_findings_are_sent_once_each_at_the_default_threshold(webhook: WebhookServer,
                                                                     smtp: SmtpRecorder) -> None:
    channels = settings(webhook, smtp, notify_on=Severity.CRITICAL)
    first = notify_jobs(findings(), ledger=None, settings=channels, now=NOW, fleet_evaluated=True)
    assert (first.sent, first.failed) == (4, 0)  # two findings, two channels
    texts = [slack_text(post) for post in webhook.posts]
    assert any("Regression:* all ranks · regression:peak_reserved_bytes" in text and "50% above the median 2.00 GiB"
               in text for text in texts)
    assert any("Suspect host:* device 2" in text and "node-&lt;13&gt;" in text for text in texts)  # escaped
    assert any("9 of 11 jobs had their first cause on node-<13> device 2" in message.part("plain")
               for message in smtp.messages)
    assert all("<13>" not in message.part("html") for message in smtp.messages)  # escaped in HTML

    again = notify_jobs(findings(), ledger=first.ledger, alerts=first.alerts, settings=channels,
                        now=NOW + timedelta(days=1), fleet_evaluated=True)
    assert (again.sent, again.changed) == (0, False)  # the next night: still suspect, not sent again
    assert len(webhook.posts) == 2
    gone = notify_jobs([], ledger=again.ledger, alerts=again.alerts, settings=channels, now=NOW + timedelta(days=2),
                       fleet_evaluated=True)
    assert gone.sent == 0 and {decision.state for decision in gone.decisions} == {"resolved"}  # not asked to say so


def test_fleet_findings_count_only_when_the_fleet_was_evaluated(webhook: WebhookServer) -> None:
    result = notify_jobs(findings(), ledger=None, settings=settings(webhook), now=NOW)  # post-job: no fleet sections
    assert result.sent == 0 and not result.decisions and not webhook.requests
