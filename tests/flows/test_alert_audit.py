"""``stormwatch audit`` end to end with a routes file and silences made by ``stormwatch silence``, over three
nights (``--as-of``), against real receivers: routed, silenced, still firing, resolved, then the silence expired."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main
from tests import builders as b
from tests.ledger_files import ledger_lines_at
from tests.stormwatch.alerting.documents import HOSTILE
from tests.tasks.notify.servers import SmtpRecorder, WebhookServer, webhook_server

pytestmark = pytest.mark.usefixtures("prefect_api")
ROUTES = """\
[receivers.llama-team]
slack_webhook_env = "STORMWATCH_TEST_LLAMA_HOOK"
send_resolved = true

[[routes]]
job = "llama-*"
receiver = "llama-team"
"""
CRITICAL = (b.Alert(2.0, "critical", f"Memory usage above 95% {HOSTILE}"),)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STORMWATCH_SLACK_WEBHOOK", "STORMWATCH_SMTP_URL", "STORMWATCH_EMAIL_TO", "STORMWATCH_EMAIL_FROM",
                 "STORMWATCH_NOTIFY_ON", "STORMWATCH_STORAGE"):
        monkeypatch.setenv(name, "")  # registered for restoring: the CLI hands secret flags to the environment
        monkeypatch.delenv(name)


@pytest.fixture
def team(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookServer]:
    with webhook_server() as server:
        monkeypatch.setenv("STORMWATCH_TEST_LLAMA_HOOK", server.url)
        yield server


def night(root: Path, day: int, *, llama_critical: bool) -> str:
    date = f"2026-10-0{day}"
    for name, critical in (("llama-a", llama_critical), ("bert", True), ("gpt", True)):
        job_id = f"{name}-{date}"
        b.write_multi_rank_job(root / "jobs" / job_id, world_size=2, job_id=job_id,
                               alerts=CRITICAL if critical else ())
    return f"{date}T03:00:00+00:00"


def audit(root: Path, as_of: str, routes: Path, webhook: WebhookServer, smtp: SmtpRecorder) -> int:
    return main(["audit", "--storage", str(root), "--as-of", as_of, "--routes", str(routes),
                 "--slack-webhook", webhook.url, "--smtp-url", f"smtp://127.0.0.1:{smtp.port}",
                 "--email-to", "oncall@example.com", "--email-from", "stormwatch@example.com",
                 "--repeat-interval", "7d", "--group-above", "3", "--workers", "1", "--engine", "threads"])


def texts(server: WebhookServer) -> list[str]:
    return [post["text"] for post in server.posts]


def test_audits_route_silence_hold_and_resolve(tmp_path: Path, env: None, webhook: WebhookServer, smtp: SmtpRecorder,
                                               team: WebhookServer, capsys: pytest.CaptureFixture[str]) -> None:
    root, routes = tmp_path / "fleet", tmp_path / "routes.toml"
    routes.write_text(ROUTES)
    (root / "jobs").mkdir(parents=True)
    assert main(["silence", "add", "--storage", str(root), "--match", "job=gpt-*", "--until", "2027-01-01",
                 "--reason", "known leak"]) == 0
    silence_id = capsys.readouterr().out.split()[1]
    assert main(["silence", "add", "--storage", str(root), "--match", "job=gpt-*", "--until", "2020-01-01",
                 "--reason", "x"]) == 2

    assert audit(root, night(root, 1, llama_critical=True), routes, webhook, smtp) == 0
    assert [text.split(" is ")[0] for text in texts(team)] == ["Stormwatch: job llama-a-2026-10-01"]
    assert [text.split(" is ")[0] for text in texts(webhook)] == ["Stormwatch: job bert-2026-10-01"]
    assert len(smtp.messages) == 1 and "bert-2026-10-01" in smtp.messages[0].message["Subject"]
    ledger = ledger_lines_at(root)
    gpt = [line for line in ledger if line["job_id"] == "gpt-2026-10-01" and line["kind"] == "most_severe"]
    assert gpt[0]["channels"]["slack"]["status"] == "silenced" and gpt[0]["silenced_by"] == silence_id
    assert gpt[0]["decided_at"] == "2026-10-01T03:00:00+00:00"  # the audit's --as-of time

    assert audit(root, night(root, 2, llama_critical=False), routes, webhook, smtp) == 0
    assert len(webhook.posts) == 1 and len(smtp.messages) == 1  # bert still firing: not repeated
    assert len(team.posts) == 2 and team.posts[1]["blocks"][0]["text"]["text"] == (
        "Stormwatch: resolved GPU-memory finding")  # llama-a resolved: its team asked
    assert "llama-a is no longer seen" in team.posts[1]["blocks"][1]["text"]["text"]

    assert main(["silence", "expire", silence_id, "--storage", str(root)]) == 0
    assert audit(root, night(root, 3, llama_critical=False), routes, webhook, smtp) == 0
    assert [text.split(" is ")[0] for text in texts(webhook)] == ["Stormwatch: job bert-2026-10-01",
                                                                   "Stormwatch: job gpt-2026-10-03"]

    fleet = orjson.loads((root / "reports" / "fleet.json").read_bytes())
    board = {item["name"]: item for item in fleet["alerts"]["receivers"]}
    assert {(item["job_name"], item["status"]) for item in board["default"]["alerts"]} == {
        ("bert", "still_firing"), ("gpt", "sent")}
    index = (root / "reports" / "index.html").read_text()
    assert '<section id="alerts">' in index and "llama-team" in index and "<script>alert(1)</script>" not in index
    out = capsys.readouterr().out
    assert "notifications:" in out and team.url not in out and webhook.url not in out
