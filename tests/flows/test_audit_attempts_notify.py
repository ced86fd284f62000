"""The nightly audit tells of an OOM in an earlier attempt of a restarted job whose latest attempt
is clean: once, on every channel, naming the attempt."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main
from tests import builders as b
from tests.tasks.notify.servers import SmtpRecorder, WebhookServer

pytestmark = pytest.mark.usefixtures("prefect_api")
DESCRIPTION = "attempt 1 of 2, interrupted, OOM on rank 3"


@pytest.fixture
def fleet_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("STORMWATCH_SLACK_WEBHOOK", "STORMWATCH_SMTP_URL", "STORMWATCH_EMAIL_TO", "STORMWATCH_EMAIL_FROM",
                 "STORMWATCH_NOTIFY_ON", "STORMWATCH_STORAGE"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    root = tmp_path / "fleet"
    b.write_restarted_job(root / "jobs" / "train-restarted")
    b.write_multi_rank_job(root / "jobs" / "clean-job", world_size=2, samples=12)
    return root


def audit(root: Path, webhook: WebhookServer, smtp: SmtpRecorder, *extra: str) -> int:
    return main(["audit", "--storage", str(root), "--slack-webhook", webhook.url,
                 "--smtp-url", f"smtp://127.0.0.1:{smtp.port}", "--email-to", "oncall@example.com",
                 "--email-from", "stormwatch@example.com", *extra])


def test_an_earlier_attempts_oom_is_sent_once_naming_the_attempt(
    fleet_root: Path, webhook: WebhookServer, smtp: SmtpRecorder
) -> None:
    assert audit(fleet_root, webhook, smtp) == 0

    assert len(webhook.posts) == 1 and len(smtp.messages) == 1
    post = orjson.dumps(webhook.posts[0]).decode()
    assert "train-restarted" in post and "clean-job" not in post
    assert DESCRIPTION in post and "(attempt 1 of 2, interrupted)" in post
    email = smtp.messages[0]
    assert "(attempt 1 of 2, interrupted)" in email.message["Subject"]
    assert f"From: {DESCRIPTION}" in email.part("plain")
    model = orjson.loads((fleet_root / "reports" / "train-restarted" / "model.json").read_bytes())
    assert model["verdict"]["status"] == "critical" and [a["status"] for a in model["attempts"]] == [
        "interrupted", "completed"]

    assert audit(fleet_root, webhook, smtp) == 0  # unchanged: nothing sent again
    assert audit(fleet_root, webhook, smtp, "--force") == 0  # re-diagnosed: the same alert, still nothing
    assert len(webhook.posts) == 1 and len(smtp.messages) == 1
