"""``stormwatch audit`` notifying a real webhook receiver and a real SMTP server, once per finding."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main
from tests import builders as b
from tests.ledger_files import ledger_lines_at
from tests.tasks.notify.servers import SmtpRecorder, WebhookServer

pytestmark = pytest.mark.usefixtures("prefect_api")
SECRET = "s3cr3t-token-XYZ"


@pytest.fixture
def fleet_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("STORMWATCH_SLACK_WEBHOOK", "STORMWATCH_SMTP_URL", "STORMWATCH_EMAIL_TO", "STORMWATCH_EMAIL_FROM",
                 "STORMWATCH_NOTIFY_ON", "STORMWATCH_STORAGE"):
        monkeypatch.setenv(name, "")  # registered for restoring: the CLI hands secret flags to the environment
        monkeypatch.delenv(name)
    root = tmp_path / "fleet"
    no_oom = b.DEFAULT_ALERTS[:2]  # a warning, then a critical alert (an OOM would inhibit them: test_alert_*)
    b.write_multi_rank_job(root / "jobs" / "critical-job", world_size=2, alerts=no_oom)
    b.write_multi_rank_job(root / "jobs" / "clean-job", world_size=2, samples=12)
    return root


def audit(root: Path, webhook: WebhookServer, smtp: SmtpRecorder, *extra: str) -> int:
    return main(["audit", "--storage", str(root), "--slack-webhook", f"{webhook.url}?token={SECRET}",
                 "--smtp-url", f"smtp://127.0.0.1:{smtp.port}", "--email-to", "oncall@example.com",
                 "--email-from", "stormwatch@example.com", "--report-base-url", "https://reports.example.com",
                 *extra])


def ledger(root: Path) -> list[dict]:
    return ledger_lines_at(root)


def test_critical_job_notified_on_both_channels_once(
    fleet_root: Path, webhook: WebhookServer, smtp: SmtpRecorder, capsys: pytest.CaptureFixture[str]
) -> None:
    assert audit(fleet_root, webhook, smtp) == 0
    assert len(webhook.posts) == 1 and len(smtp.messages) == 1
    post = orjson.dumps(webhook.posts[0]).decode()
    assert "critical-job" in post and "clean-job" not in post
    assert "https://reports.example.com/critical-job/report.html" in post
    message = smtp.messages[0].message
    assert "critical-job" in message["Subject"] and message["To"] == "oncall@example.com"
    entries = ledger(fleet_root)
    assert {entry["job_id"] for entry in entries} == {"critical-job"}
    assert {(entry["kind"], entry["severity"], entry["channels"]["slack"]["status"]) for entry in entries} == {
        ("earliest", "warning", "skipped_below_threshold"), ("most_severe", "critical", "sent")}

    assert audit(fleet_root, webhook, smtp, "--force") == 0  # re-diagnosed: same findings, nothing re-sent
    assert len(webhook.posts) == 1 and len(smtp.messages) == 1

    out = capsys.readouterr()
    written = b"".join(path.read_bytes() for path in (fleet_root / "reports").rglob("*") if path.is_file())
    assert SECRET not in out.out + out.err and SECRET.encode() not in written


def test_a_channel_down_is_recorded_and_caught_up_next_audit(
    fleet_root: Path, webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    webhook.always_fail = True
    assert audit(fleet_root, webhook, smtp) == 0  # a failed send never fails the audit
    assert not webhook.posts and len(smtp.messages) == 1
    statuses = {entry["channels"]["slack"]["status"] for entry in ledger(fleet_root) if entry["severity"] == "critical"}
    assert statuses == {"failed"}
    assert all(SECRET not in str(entry) for entry in ledger(fleet_root))

    webhook.always_fail = False
    assert audit(fleet_root, webhook, smtp) == 0  # job unchanged (skipped), its pending finding is sent now
    assert len(webhook.posts) == 1 and len(smtp.messages) == 1
    latest = [entry for entry in ledger(fleet_root) if entry["severity"] == "critical"][-1]
    assert latest["channels"]["slack"]["status"] == "sent"


def test_without_channels_decisions_are_still_recorded(fleet_root: Path) -> None:
    assert main(["audit", "--storage", str(fleet_root), "--fail-on", "critical"]) == 3
    entries = ledger(fleet_root)
    critical = [entry for entry in entries if entry["severity"] == "critical"]
    assert critical and all(
        channel["status"] == "not_configured" for entry in critical for channel in entry["channels"].values()
    )
