"""notify_jobs end to end against real local servers: a webhook receiver and aiosmtpd, on 127.0.0.1.

Each test threads the ledger and the alert state from one call to the next (:class:`Notifier`), as the
notify step does through storage."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.policy import AlertPolicy
from stormwatch.tasks.notify.dispatch import NotifyResult, notify_jobs
from stormwatch.tasks.notify.secrets import SecretRef
from stormwatch.tasks.notify.settings import NotifySettings
from tests.stormwatch.alerting.documents import JOB_BUILDERS, document
from tests.tasks.notify.servers import SmtpRecorder, WebhookServer, free_port

NOW = datetime(2026, 1, 2, 2, 0, tzinfo=UTC)
REPORTS = "https://reports.example/stormwatch"
ONCALL = ("oncall@example.com", "gpu-team@example.com")


def job(name: str, *, job_id: str | None = None) -> JobFinding:
    job_id = job_id or JOB_BUILDERS[name][0]
    return JobFinding.from_document(document(name, job_id=job_id), report_url=f"{REPORTS}/{job_id}/report.html")


def jobs(*names: str) -> list[JobFinding]:
    return [job(name) for name in names]


def settings(webhook: WebhookServer | None = None, smtp: SmtpRecorder | None = None, **extra: Any) -> NotifySettings:
    return NotifySettings(
        slack_webhook=None if webhook is None else SecretRef.held(webhook.url, flag="--slack-webhook"),
        smtp_url=None if smtp is None else SecretRef.held(f"smtp://127.0.0.1:{smtp.port}", flag="--smtp-url"),
        email_to=ONCALL if smtp is not None else (),
        email_from="stormwatch@example.com",
        **{"backoff_s": 0.001, "timeout_s": 5.0, **extra},
    )


@dataclass
class Notifier:
    """Calls notify_jobs with the ledger and alert state the previous call left."""

    settings: NotifySettings
    ledger: bytes | None = None
    alerts: bytes | None = None

    def __call__(self, found: list[JobFinding], *, now: datetime = NOW, **extra: Any) -> NotifyResult:
        result = notify_jobs(found, ledger=self.ledger, alerts=self.alerts, settings=extra.pop("settings",
                             self.settings), now=now, **extra)
        self.ledger, self.alerts = result.ledger, result.alerts
        return result


def lines(ledger: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in ledger.splitlines()]


def states(ledger: bytes) -> dict[tuple[str, str], tuple[str, str]]:
    """Latest (slack, email) status per (job id, indicator kind)."""
    out = {}
    for line in lines(ledger):
        out[line["job_id"], line["kind"]] = (line["channels"]["slack"]["status"], line["channels"]["email"]["status"])
    return out


def slack_text(post: dict[str, Any]) -> str:
    return "\n".join(block["text"]["text"] for block in post["blocks"] if block["type"] == "section")


ALL = ("collective", "alerts", "clean", "missing", "warning_only")
COLLECTIVE, ALERTS, WARNING, MISSING = (JOB_BUILDERS[name][0]
                                        for name in ("collective", "alerts", "warning_only", "missing"))


def test_critical_jobs_are_notified_on_both_channels_and_the_others_are_not(
    webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    result = notify_jobs(jobs(*ALL), ledger=None, settings=settings(webhook, smtp), now=NOW)

    assert [post["text"].split(" is ")[0] for post in webhook.posts] == [  # one message per job, by job id
        f"Stormwatch: job {ALERTS}",
        f"Stormwatch: job {COLLECTIVE}",
    ]
    collective = slack_text(webhook.posts[1])
    for fact in (
        f"*Job:* {COLLECTIVE} · *verdict:* critical",
        "*Earliest:* rank 0 · collective:collective_confident (critical) · phase train / all_reduce",
        "*Most severe:* rank 0 · collective:collective_confident (critical)",
        "2023-11-14 22:13:22.", "after start)",
        f"*Report:* <{REPORTS}/{COLLECTIVE}/report.html|open report>",
    ):  # fmt: skip
        assert fact in collective
    alerts = slack_text(webhook.posts[0])  # its OOM is the news; its first causes are folded in
    assert webhook.posts[0]["text"] == f"Stormwatch: job {ALERTS} is critical: oom on rank 0"
    assert "*OOM:* rank 0 · oom (critical)" in alerts and "> OOM detected (allocator_fragmentation)" in alerts
    assert "*Most severe:* rank 0 · alert:critical (critical)" in alerts
    assert "*Inhibited:* this job's earliest (alert:warning), most severe (alert:critical)" in alerts
    assert webhook.posts[0]["blocks"][0]["type"] == "header"

    assert [message.rcpt_tos for message in smtp.messages] == [ONCALL, ONCALL]
    second = smtp.messages[1].message
    assert second["From"] == "stormwatch@example.com"
    assert second["To"] == ", ".join(ONCALL)
    assert second["Subject"] == f"[stormwatch] critical: job {COLLECTIVE}: collective:collective_confident on rank 0"
    assert smtp.messages[0].message["Subject"] == f"[stormwatch] critical: job {ALERTS}: oom on rank 0"
    text, html = smtp.messages[1].part("plain"), smtp.messages[1].part("html")
    for fact in (COLLECTIVE, "collective:collective_confident", "train / all_reduce", "2023-11-14 22:13:22."):
        assert fact in text and fact in html
    assert f'<a href="{REPORTS}/{COLLECTIVE}/report.html">' in html

    assert states(result.ledger) == {
        (COLLECTIVE, "earliest"): ("sent", "sent"),
        (COLLECTIVE, "most_severe"): ("sent", "sent"),
        (ALERTS, "earliest"): ("skipped_below_threshold", "skipped_below_threshold"),
        (ALERTS, "most_severe"): ("inhibited", "inhibited"),
        (ALERTS, "oom"): ("sent", "sent"),
        (MISSING, "missing_ranks"): ("skipped_below_threshold", "skipped_below_threshold"),
        (WARNING, "earliest"): ("skipped_below_threshold", "skipped_below_threshold"),
        (WARNING, "most_severe"): ("skipped_below_threshold", "skipped_below_threshold"),
    }
    assert (result.sent, result.failed, result.skipped) == (4, 0, 5)


def test_missing_ranks_are_reported_on_both_channels(webhook: WebhookServer, smtp: SmtpRecorder) -> None:
    notify_jobs(jobs("collective_missing"), ledger=None, settings=settings(webhook, smtp), now=NOW)
    assert "*Missing ranks:* 2 of 4" in slack_text(webhook.posts[0])
    (received,) = smtp.messages
    assert received.message.get_content_type() == "multipart/alternative"
    assert "Missing ranks: 2 of 4" in received.part("plain")
    assert '<th align="left">Missing ranks</th><td>2 of 4</td>' in received.part("html")


def test_ledger_lines_carry_the_key_the_finding_and_each_channel(webhook: WebhookServer, smtp: SmtpRecorder) -> None:
    result = notify_jobs(jobs("alerts"), ledger=None, settings=settings(webhook, smtp), now=NOW)
    skipped, muted, sent = lines(result.ledger)
    assert muted == {
        "key": f"{ALERTS}|most_severe|0|alert:critical|{muted['timestamp_ns']}",
        "job_id": ALERTS,
        "kind": "most_severe",
        "rank": 0,
        "signal": "alert:critical",
        "timestamp_ns": 1_700_000_003_500_000_000,
        "severity": "critical",
        "decided_at": "2026-01-02T02:00:00+00:00",
        "channels": {"slack": {"status": "inhibited", "attempts": 0}, "email": {"status": "inhibited", "attempts": 0}},
        "alert": "train-alerts|most_severe|alert:critical",
        "state": "firing",
        "inhibited_by": "train-alerts|oom|oom",
    }
    assert sent["kind"] == "oom" and sent["alert"] == "train-alerts|oom|oom" and sent["timestamp_ns"] == (
        1_700_000_004_000_000_000)
    assert sent["channels"] == {"slack": {"status": "sent", "attempts": 1}, "email": {"status": "sent", "attempts": 1}}
    assert skipped["channels"]["slack"] == {"status": "skipped_below_threshold", "attempts": 0}
    assert result.ledger.endswith(b"\n") and result.changed


def test_notify_on_warning_sends_warning_jobs_grouped_above_three_alerts(
    webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    result = notify_jobs(jobs(*ALL), ledger=None, settings=settings(webhook, smtp, notify_on="warning"), now=NOW)
    assert set(states(result.ledger).values()) == {("sent", "sent"), ("inhibited", "inhibited")}
    assert len(webhook.posts) == len(smtp.messages) == 1  # six alerts due: one message listing them
    sections = [block["text"]["text"].split(" · ")[0] for block in webhook.posts[0]["blocks"][1:]]
    assert sections == [f"*Job:* {job_id}" for job_id in (ALERTS, COLLECTIVE, MISSING, WARNING)]  # missing: a warning
    assert webhook.posts[0]["blocks"][0]["text"]["text"] == "Stormwatch: 4 jobs with warning GPU-memory findings"

    apart = settings(webhook, smtp, notify_on="warning", alerting=AlertPolicy(group_above=10))
    notify_jobs(jobs(*ALL), ledger=None, settings=apart, now=NOW)
    assert [post["text"].split(" is ")[0].removeprefix("Stormwatch: job ") for post in webhook.posts[1:]] == [
        ALERTS, COLLECTIVE, MISSING, WARNING]
    assert webhook.posts[1]["blocks"][0]["text"]["text"] == "Stormwatch: warning GPU-memory finding"


def test_reruns_send_nothing_twice_and_later_runs_of_a_job_name_are_the_same_alert(
    webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    notify = Notifier(settings(webhook, smtp))
    first = notify(jobs("collective", "alerts"))
    rerun = notify(jobs("collective", "alerts"))
    assert rerun.ledger == first.ledger and not rerun.changed and rerun.alerts == first.alerts
    assert (rerun.sent, rerun.failed, rerun.skipped) == (0, 0, 0)

    later = notify([job("collective", job_id="train-collective-9")], now=NOW + timedelta(days=1),
                   settings=settings(webhook, smtp, digest=True))
    assert len(webhook.posts) == len(smtp.messages) == 2  # the next run of train-collective: still firing, not sent
    added = lines(later.ledger[len(first.ledger):])
    assert {(line["job_id"], line["state"], line["channels"]["slack"]["status"]) for line in added} == {
        ("train-collective-9", "still_firing", "still_firing")}
    assert later.skipped == 2

    week = notify([job("collective", job_id="train-collective-10")], now=NOW + timedelta(days=7))
    assert week.sent == 2 and len(webhook.posts) == 3  # seven days after it was sent: repeated once
    assert webhook.posts[-1]["blocks"][0]["text"]["text"] == "Stormwatch: still firing: critical GPU-memory finding"
    assert "*Still firing* since 2026-01-02" in slack_text(webhook.posts[-1])
    assert notify([job("collective", job_id="train-collective-11")], now=NOW + timedelta(days=8)).sent == 0


def test_a_moved_finding_is_the_same_alert_and_a_new_signal_is_a_new_one(webhook: WebhookServer) -> None:
    notify = Notifier(settings(webhook))
    notify(jobs("collective"))
    moved = document("collective")
    for indicator in moved["model"]["indicators"]:
        indicator["timestamp_ns"] += 1_000_000_000
    assert notify([JobFinding.from_document(moved, report_url=None)]).sent == 0
    for indicator in moved["model"]["indicators"]:
        indicator["signal"] = "gap:fragmentation"
    result = notify([JobFinding.from_document(moved, report_url=None)])
    assert len(webhook.posts) == 2 and result.sent == 1
    assert "*Report:*" not in slack_text(webhook.posts[1])


def test_a_channel_answering_500_then_recovering_is_retried_within_the_call(
    webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    webhook.fail_next, smtp.tempfail_next = 2, 1
    result = notify_jobs(jobs("collective"), ledger=None, settings=settings(webhook, smtp), now=NOW)
    assert [status for _, status in webhook.requests] == [500, 500, 200]
    assert len(webhook.posts) == len(smtp.messages) == 1
    channels = lines(result.ledger)[-1]["channels"]
    assert channels == {"slack": {"status": "sent", "attempts": 3}, "email": {"status": "sent", "attempts": 2}}
    assert (result.sent, result.failed) == (2, 0)


def test_a_channel_still_down_is_recorded_failed_and_sent_by_the_next_call(
    webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    webhook.always_fail = True
    notify = Notifier(settings(webhook, smtp))
    down = notify(jobs("collective", "alerts"))
    assert [status for _, status in webhook.requests] == [500, 500, 500]  # second job not tried: channel down
    assert len(smtp.messages) == 2
    assert (down.sent, down.failed) == (2, 2)
    slack = {(line["job_id"], line["kind"]): line["channels"]["slack"] for line in lines(down.ledger)}
    assert slack[ALERTS, "oom"]["status"] == "failed"
    assert slack[ALERTS, "oom"]["attempts"] == 3
    assert slack[ALERTS, "oom"]["error"].startswith("HTTP 500 Internal Server Error: upstream error for ")
    assert slack[COLLECTIVE, "most_severe"]["attempts"] == 0
    assert slack[COLLECTIVE, "most_severe"]["error"].startswith("not attempted: channel down earlier in this call")
    assert "SecretToken" not in down.ledger.decode() and "[redacted]" in down.ledger.decode()
    assert "SecretToken" not in down.alerts.decode()

    webhook.always_fail = False
    up = notify([])  # the next audit diagnoses nothing: the alert state still holds what failed
    assert len(webhook.posts) == 2 and len(smtp.messages) == 2  # email already sent: not again
    assert states(up.ledger)[COLLECTIVE, "most_severe"] == ("sent", "sent")
    assert states(up.ledger)[ALERTS, "earliest"] == ("skipped_below_threshold", "skipped_below_threshold")
    assert (up.sent, up.failed, up.skipped) == (2, 0, 0)
    final = notify(jobs("collective", "alerts"))
    assert not final.changed and len(webhook.posts) == 2


def test_closed_ports_become_failed_records_not_exceptions() -> None:
    port = free_port()  # nothing listens there
    broken = NotifySettings(
        slack_webhook=SecretRef.held(f"http://127.0.0.1:{port}/services/T/B/closedSecret"),
        smtp_url=SecretRef.held(f"smtp://127.0.0.1:{port}"),
        email_to=ONCALL,
        max_attempts=2,
        backoff_s=0.001,
    )
    result = notify_jobs(jobs("collective"), ledger=None, settings=broken, now=NOW)
    channels = lines(result.ledger)[-1]["channels"]
    assert channels["slack"]["status"] == channels["email"]["status"] == "failed"
    assert channels["slack"]["error"].startswith("ConnectError: ")
    assert "ConnectionRefusedError" in channels["email"]["error"]
    assert (result.sent, result.failed) == (0, 2)
    assert "closedSecret" not in repr(result)


def test_an_unresolvable_secret_fails_the_channel_without_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STORMWATCH_TEST_UNSET_WEBHOOK", raising=False)
    unresolvable = NotifySettings(slack_webhook=SecretRef(env="STORMWATCH_TEST_UNSET_WEBHOOK"))
    result = notify_jobs(jobs("collective"), ledger=None, settings=unresolvable, now=NOW)
    slack = lines(result.ledger)[-1]["channels"]["slack"]
    assert slack["status"] == "failed" and slack["attempts"] == 0
    assert "STORMWATCH_TEST_UNSET_WEBHOOK" in slack["error"] and "not found" in slack["error"]


def test_digest_sends_one_message_per_call_listing_every_new_critical_job(
    webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    names = [*jobs(*ALL), job("collective_missing"), job("collective", job_id="train-collective-9")]
    result = notify_jobs(names, ledger=None, settings=settings(webhook, smtp, digest=True), now=NOW)
    assert len(webhook.posts) == len(smtp.messages) == 1
    post = webhook.posts[0]
    assert post["blocks"][0]["text"]["text"] == "Stormwatch: 3 jobs with critical GPU-memory findings"
    sections = [block["text"]["text"] for block in post["blocks"][1:]]
    assert [section.split(" · ")[0] for section in sections] == [  # two runs of train-collective: the later one
        f"*Job:* {ALERTS}",
        "*Job:* train-collective-9",
        "*Job:* train-collective-missing-6",
    ]
    assert "*Missing ranks:* 2 of 4" in sections[2] and "*Inhibited:* this job's earliest" in sections[2]
    message = smtp.messages[0].message
    assert message["Subject"] == "[stormwatch] 3 jobs with critical GPU-memory findings"
    assert all(job_id in smtp.messages[0].part("html") for job_id in (ALERTS, "train-collective-9"))
    assert (result.sent, result.failed) == (2, 0)


def test_with_no_channel_decisions_are_recorded_and_sent_once_a_channel_exists(webhook: WebhookServer) -> None:
    notify = Notifier(NotifySettings())
    quiet = notify(jobs(*ALL))
    assert states(quiet.ledger)[COLLECTIVE, "most_severe"] == ("not_configured", "not_configured")
    assert states(quiet.ledger)[ALERTS, "earliest"] == ("skipped_below_threshold", "skipped_below_threshold")
    assert len(lines(quiet.ledger)) == 8 and (quiet.sent, quiet.failed, quiet.skipped) == (0, 0, 8)
    assert not webhook.requests
    again = notify(jobs(*ALL))
    assert not again.changed

    configured = notify(jobs(*ALL), settings=settings(webhook))
    assert len(webhook.posts) == 2
    assert states(configured.ledger)[COLLECTIVE, "earliest"] == ("sent", "not_configured")
    assert len(lines(configured.ledger)) == 8 + 3  # collective's two findings and the OOM


def test_the_flow_can_pass_a_result_ledger_with_unreadable_lines(webhook: WebhookServer) -> None:
    first = notify_jobs(jobs("collective"), ledger=None, settings=settings(webhook), now=NOW)
    torn = b"not json\n" + first.ledger + b'{"key": "half a line'
    result: NotifyResult = notify_jobs(jobs("collective"), ledger=torn, settings=settings(webhook), now=NOW)
    assert len(webhook.posts) == 1 and result.ledger == torn and len(result.problems) == 3
    assert result.problems[2] == "alerts.json missing: the alert state is rebuilt from notifications.jsonl"
