"""notify_jobs end to end against real local servers: a webhook receiver and aiosmtpd, on 127.0.0.1."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from stormwatch.tasks.notify.dispatch import JobFinding, NotifyResult, NotifySettings, SecretRef, notify_jobs
from tests.tasks.notify.servers import (
    JOB_BUILDERS,
    SmtpRecorder,
    WebhookServer,
    document,
    free_port,
)

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
COLLECTIVE, ALERTS, WARNING = (JOB_BUILDERS[name][0] for name in ("collective", "alerts", "warning_only"))


def test_critical_jobs_are_notified_on_both_channels_and_the_others_are_not(
    webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    result = notify_jobs(jobs(*ALL), ledger=None, settings=settings(webhook, smtp), now=NOW)

    assert [post["text"].split(" is ")[0] for post in webhook.posts] == [
        f"Stormwatch: job {COLLECTIVE}",
        f"Stormwatch: job {ALERTS}",
    ]
    collective = slack_text(webhook.posts[0])
    for fact in (
        f"*Job:* {COLLECTIVE} · *verdict:* critical",
        "*Earliest:* rank 0 · collective:collective_confident (critical) · phase train / all_reduce",
        "*Most severe:* rank 0 · collective:collective_confident (critical)",
        "2023-11-14 22:13:22.", "after start)",
        f"*Report:* <{REPORTS}/{COLLECTIVE}/report.html|open report>",
    ):  # fmt: skip
        assert fact in collective
    assert "*Earliest:* rank 0 · alert:warning (warning)" in slack_text(webhook.posts[1])
    assert "*Most severe:* rank 0 · alert:critical (critical)" in slack_text(webhook.posts[1])
    assert webhook.posts[0]["blocks"][0]["type"] == "header"

    assert [message.rcpt_tos for message in smtp.messages] == [ONCALL, ONCALL]
    first = smtp.messages[0].message
    assert first["From"] == "stormwatch@example.com"
    assert first["To"] == ", ".join(ONCALL)
    assert first["Subject"] == f"[stormwatch] critical: job {COLLECTIVE}: collective:collective_confident on rank 0"
    text, html = smtp.messages[0].part("plain"), smtp.messages[0].part("html")
    for fact in (COLLECTIVE, "collective:collective_confident", "train / all_reduce", "2023-11-14 22:13:22."):
        assert fact in text and fact in html
    assert f'<a href="{REPORTS}/{COLLECTIVE}/report.html">' in html

    assert states(result.ledger) == {
        (COLLECTIVE, "earliest"): ("sent", "sent"),
        (COLLECTIVE, "most_severe"): ("sent", "sent"),
        (ALERTS, "earliest"): ("skipped_below_threshold", "skipped_below_threshold"),
        (ALERTS, "most_severe"): ("sent", "sent"),
        (WARNING, "earliest"): ("skipped_below_threshold", "skipped_below_threshold"),
        (WARNING, "most_severe"): ("skipped_below_threshold", "skipped_below_threshold"),
    }
    assert (result.sent, result.failed, result.skipped) == (4, 0, 3)


def test_missing_ranks_are_reported_on_both_channels(webhook: WebhookServer, smtp: SmtpRecorder) -> None:
    notify_jobs(jobs("collective_missing"), ledger=None, settings=settings(webhook, smtp), now=NOW)
    assert "*Missing ranks:* 2 of 4" in slack_text(webhook.posts[0])
    (received,) = smtp.messages
    assert received.message.get_content_type() == "multipart/alternative"
    assert "Missing ranks: 2 of 4" in received.part("plain")
    assert '<th align="left">Missing ranks</th><td>2 of 4</td>' in received.part("html")


def test_ledger_lines_carry_the_key_the_finding_and_each_channel(webhook: WebhookServer, smtp: SmtpRecorder) -> None:
    result = notify_jobs(jobs("alerts"), ledger=None, settings=settings(webhook, smtp), now=NOW)
    skipped, sent = lines(result.ledger)
    assert sent == {
        "key": f"{ALERTS}|most_severe|0|alert:critical|{sent['timestamp_ns']}",
        "job_id": ALERTS,
        "kind": "most_severe",
        "rank": 0,
        "signal": "alert:critical",
        "timestamp_ns": 1_700_000_003_500_000_000,
        "severity": "critical",
        "decided_at": "2026-01-02T02:00:00+00:00",
        "channels": {"slack": {"status": "sent", "attempts": 1}, "email": {"status": "sent", "attempts": 1}},
    }
    assert skipped["channels"]["slack"] == {"status": "skipped_below_threshold", "attempts": 0}
    assert result.ledger.endswith(b"\n") and result.changed


def test_notify_on_warning_sends_warning_jobs_and_one_message_per_job(
    webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    result = notify_jobs(jobs(*ALL), ledger=None, settings=settings(webhook, smtp, notify_on="warning"), now=NOW)
    assert [post["text"].split(" is ")[0].removeprefix("Stormwatch: job ") for post in webhook.posts] == [
        COLLECTIVE,
        ALERTS,
        WARNING,
    ]
    assert len(smtp.messages) == 3
    assert set(states(result.ledger).values()) == {("sent", "sent")}
    assert webhook.posts[0]["blocks"][0]["text"]["text"] == "Stormwatch: warning GPU-memory finding"


def test_reruns_and_later_audits_send_nothing_twice(webhook: WebhookServer, smtp: SmtpRecorder) -> None:
    first = notify_jobs(jobs("collective", "alerts"), ledger=None, settings=settings(webhook, smtp), now=NOW)
    rerun = notify_jobs(jobs("collective", "alerts"), ledger=first.ledger, settings=settings(webhook, smtp), now=NOW)
    assert rerun.ledger == first.ledger and not rerun.changed
    assert (rerun.sent, rerun.failed, rerun.skipped) == (0, 0, 0)

    later = notify_jobs(
        [*jobs("collective", "alerts"), job("collective", job_id="train-collective-9")],
        ledger=first.ledger,
        settings=settings(webhook, smtp, digest=True),
        now=NOW + timedelta(days=1),
    )
    assert later.ledger.startswith(first.ledger)
    assert {line["job_id"] for line in lines(later.ledger[len(first.ledger) :])} == {"train-collective-9"}
    assert len(webhook.posts) == len(smtp.messages) == 3
    assert "train-collective-9" in webhook.posts[-1]["text"] and COLLECTIVE not in webhook.posts[-1]["text"]


def test_a_new_finding_of_a_known_job_is_sent(webhook: WebhookServer) -> None:
    """The key holds the timestamp: a re-diagnosed job whose first cause moved is notified again."""
    first = notify_jobs(jobs("collective"), ledger=None, settings=settings(webhook), now=NOW)
    moved = document("collective")
    for indicator in moved["model"]["indicators"]:
        indicator["timestamp_ns"] += 1_000_000_000
    again = JobFinding.from_document(moved, report_url=None)
    result = notify_jobs([again], ledger=first.ledger, settings=settings(webhook), now=NOW)
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
    down = notify_jobs(jobs("collective", "alerts"), ledger=None, settings=settings(webhook, smtp), now=NOW)
    assert [status for _, status in webhook.requests] == [500, 500, 500]  # second job not tried: channel down
    assert len(smtp.messages) == 2
    assert (down.sent, down.failed) == (2, 2)
    slack = {(line["job_id"], line["kind"]): line["channels"]["slack"] for line in lines(down.ledger)}
    assert slack[COLLECTIVE, "most_severe"]["status"] == "failed"
    assert slack[COLLECTIVE, "most_severe"]["attempts"] == 3
    assert slack[COLLECTIVE, "most_severe"]["error"].startswith("HTTP 500 Internal Server Error: upstream error for ")
    assert slack[ALERTS, "most_severe"]["attempts"] == 0
    assert slack[ALERTS, "most_severe"]["error"].startswith("not attempted: channel down earlier in this call")
    assert "SecretToken" not in down.ledger.decode() and "[redacted]" in down.ledger.decode()

    webhook.always_fail = False
    up = notify_jobs(jobs("collective", "alerts"), ledger=down.ledger, settings=settings(webhook, smtp), now=NOW)
    assert len(webhook.posts) == 2 and len(smtp.messages) == 2  # email already sent: not again
    assert states(up.ledger)[COLLECTIVE, "most_severe"] == ("sent", "sent")
    assert states(up.ledger)[ALERTS, "earliest"] == ("skipped_below_threshold", "skipped_below_threshold")
    assert (up.sent, up.failed, up.skipped) == (2, 0, 0)
    final = notify_jobs(jobs("collective", "alerts"), ledger=up.ledger, settings=settings(webhook, smtp), now=NOW)
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
    names = [*jobs(*ALL), job("collective", job_id="train-collective-9")]
    result = notify_jobs(names, ledger=None, settings=settings(webhook, smtp, digest=True), now=NOW)
    assert len(webhook.posts) == len(smtp.messages) == 1
    post = webhook.posts[0]
    assert post["blocks"][0]["text"]["text"] == "Stormwatch: 3 jobs with critical GPU-memory findings"
    sections = [block["text"]["text"] for block in post["blocks"][1:]]
    assert [section.split(" · ")[0] for section in sections] == [
        f"*Job:* {COLLECTIVE}",
        f"*Job:* {ALERTS}",
        "*Job:* train-collective-9",
    ]
    message = smtp.messages[0].message
    assert message["Subject"] == "[stormwatch] 3 jobs with critical GPU-memory findings"
    assert all(job_id in smtp.messages[0].part("html") for job_id in (COLLECTIVE, ALERTS))
    assert (result.sent, result.failed) == (2, 0)


def test_with_no_channel_decisions_are_recorded_and_sent_once_a_channel_exists(webhook: WebhookServer) -> None:
    quiet = notify_jobs(jobs(*ALL), ledger=None, settings=NotifySettings(), now=NOW)
    assert states(quiet.ledger)[COLLECTIVE, "most_severe"] == ("not_configured", "not_configured")
    assert states(quiet.ledger)[ALERTS, "earliest"] == ("skipped_below_threshold", "skipped_below_threshold")
    assert len(lines(quiet.ledger)) == 6 and (quiet.sent, quiet.failed, quiet.skipped) == (0, 0, 6)
    assert not webhook.requests
    again = notify_jobs(jobs(*ALL), ledger=quiet.ledger, settings=NotifySettings(), now=NOW)
    assert not again.changed

    configured = notify_jobs(jobs(*ALL), ledger=quiet.ledger, settings=settings(webhook), now=NOW)
    assert len(webhook.posts) == 2
    assert states(configured.ledger)[COLLECTIVE, "earliest"] == ("sent", "not_configured")
    assert len(lines(configured.ledger)) == 6 + 3


def test_the_flow_can_pass_a_result_ledger_with_unreadable_lines(webhook: WebhookServer) -> None:
    first = notify_jobs(jobs("collective"), ledger=None, settings=settings(webhook), now=NOW)
    torn = b"not json\n" + first.ledger + b'{"key": "half a line'
    result: NotifyResult = notify_jobs(jobs("collective"), ledger=torn, settings=settings(webhook), now=NOW)
    assert len(webhook.posts) == 1 and result.ledger == torn and len(result.problems) == 2
