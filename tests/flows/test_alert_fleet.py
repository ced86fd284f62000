"""Thirty nights of an 8-job fleet through the notify step, with real receivers, routes and silences.

Each night every job name runs once (job id ``<name>-<date>``); its finding is one of a few
documents diagnosed from stormlog-written jobs, placed on hosts per night, and the fleet's
sections (a suspect device, a regression) are those of the planted problems. The step runs night
by night over a local storage holding ``reports/routes.toml`` and ``reports/silences.json``, as the
audit runs it; receivers are two webhook servers and one SMTP server. Planted:

- ``llama-7b``: a critical alert nights 5-12 (routed to ``llama-team``, which asks for resolutions);
- ``bert``: a confident collective spike every night from night 2 (default receiver);
- ``gpt``: a critical alert nights 8-20 under a silence until night 25;
- ``vit``: an OOM on night 10 (its ranks' findings are inhibited into the OOM's message);
- ``node-7`` device 1: a suspect device nights 18-26 (``infra`` and the default); ``resnet`` and ``t5``
  have a critical alert on their rank placed there those nights (inhibited into the device's message);
- ``mixtral``: a regression nights 21-22 (``infra`` and the default; an expired silence names it);
- ``vit`` and ``resnet``: a collective spike from night 26 (four alerts at once: one grouped message);
- ``t5``: a lost rank with a critical finding on night 27 (inhibited into the missing-ranks message);
- ``llama-70b``: warnings only (below the threshold; never sent).

Messages per night are printed (``-s``) as a table: the closing note of issue 17 quotes it.
"""

from __future__ import annotations

import functools
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.fleet_findings import fleet_findings
from stormwatch.alerting.silences import Silence, SilenceMatcher, silence_id
from stormwatch.diagnose import diagnose
from stormwatch.tasks.notify.config_store import change_silences
from stormwatch.tasks.notify.ledger_store import read_ledger_bytes
from stormwatch.tasks.notify.secrets import SecretRef
from stormwatch.tasks.notify.settings import NotifySettings
from stormwatch.tasks.notify.step import notify_step
from stormwatch.tasks.publish import publish_fleet
from stormwatch.tasks.storage.local import LocalStorage
from stormwatch.tasks.storage.protocol import StorageSettings
from tests import builders as b
from tests.ledger_files import ledger_lines_at
from tests.model_builders import build_collective_synchronized
from tests.tasks.notify.servers import SmtpRecorder, WebhookServer, webhook_server

NIGHTS = 30
FIRST = datetime(2026, 10, 1, 2, tzinfo=UTC)
NAMES = ("llama-7b", "llama-70b", "bert", "gpt", "vit", "resnet", "t5", "mixtral")
ONCALL, INFRA = "oncall@example.com", "infra@example.com"
ROUTES = """\
[receivers.llama-team]
slack_webhook_env = "STORMWATCH_SIM_LLAMA_HOOK"
send_resolved = true

[receivers.infra]
email_to = ["infra@example.com"]

[[routes]]
job = "llama-*"
receiver = "llama-team"

[[routes]]
kind = ["regression", "suspect_host"]
receiver = "infra"
continue = true

[[routes]]
kind = ["regression", "suspect_host"]
receiver = "default"
"""


def _alert_on(rank: int) -> Callable[[Path], None]:
    def write(root: Path) -> None:
        b.write_multi_rank_job(root, world_size=4, alerts_of=lambda r: (
            (b.Alert(2.0, "critical", "Memory usage above 95%"),) if r == rank else ()))
    return write


TEMPLATES: dict[str, Callable[[Path], None]] = {
    "clean": lambda root: b.write_multi_rank_job(root, world_size=4, samples=12),
    "alert_r0": _alert_on(0),
    "alert_r1": _alert_on(1),
    "collective": lambda root: build_collective_synchronized(root, world_size=4),
    "oom": lambda root: b.write_multi_rank_job(root, world_size=4, alerts=b.DEFAULT_ALERTS),
    "lost_rank": lambda root: build_collective_synchronized(root, world_size=4, ranks=(0, 1, 3)),
    "warning": lambda root: b.write_multi_rank_job(root, world_size=4, alerts=(b.Alert(2.0, "warning", "above 80%"),)),
}


@functools.cache
def templates() -> dict[str, bytes]:
    """Each template's model.json, diagnosed once per session."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="alert-fleet-") as tmp:
        for name, write in TEMPLATES.items():
            root = Path(tmp) / name
            root.mkdir()
            write(root)
            out[name] = bytes(diagnose([root], job_id=name, source_name=name).model_json())
    return out


def template_of(name: str, night: int) -> str:
    planted = {
        "llama-7b": "alert_r0" if 5 <= night <= 12 else "clean",
        "llama-70b": "warning" if night % 3 == 0 else "clean",
        "bert": "collective" if night >= 2 else "clean",
        "gpt": "alert_r0" if 8 <= night <= 20 else "clean",
        "vit": "oom" if night == 10 else "collective" if night >= 26 else "clean",
        "resnet": "collective" if night >= 26 else "alert_r1" if 18 <= night <= 26 else "clean",
        "t5": "lost_rank" if night == 27 else "alert_r1" if 18 <= night <= 26 else "clean",
        "mixtral": "clean",
    }
    return planted[name]


def job_id(name: str, night: int) -> str:
    return f"{name}-{(FIRST + timedelta(days=night)).date().isoformat()}"


def finding(name: str, night: int) -> JobFinding:
    document: dict[str, Any] = orjson.loads(templates()[template_of(name, night)])
    document["job_id"] = job_id(name, night)
    on_bad_device = name in ("resnet", "t5") and 18 <= night <= 26
    for rank in document["fleet"]["ranks"]:
        rank["host"] = "node-7" if on_bad_device and rank["rank"] == 1 else f"node-{NAMES.index(name)}"
    return JobFinding.from_document(document, report_url=f"https://reports.example/{document['job_id']}/report.html")


def sections(night: int) -> dict[str, Any]:
    out: dict[str, Any] = {"regressions": [], "suspect_hosts": []}
    if 18 <= night <= 26:
        out["suspect_hosts"].append({"host": "node-7", "device_id": 1, "jobs": 9, "anomalous_jobs": 7,
                                     "rate": 7 / 9, "fleet_rate": 0.05})
    if 21 <= night <= 22:
        out["regressions"].append({"job_id": job_id("mixtral", night), "job_name": "mixtral",
                                   "metric": "peak_reserved_bytes", "value_bytes": 30 << 30,
                                   "baseline_bytes": 20 << 30, "change_pct": 50.0, "baseline_runs": 7})
    return out


def silence(*texts: str, until: datetime, reason: str) -> Silence:
    matchers = tuple(sorted(SilenceMatcher.parse(text) for text in texts))
    return Silence(silence_id(matchers, until, reason), matchers, until, reason, FIRST, "sim")


@pytest.fixture
def llama_hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookServer]:
    with webhook_server() as server:
        monkeypatch.setenv("STORMWATCH_SIM_LLAMA_HOOK", server.url)
        yield server


def test_thirty_nights_of_alerts(tmp_path: Path, webhook: WebhookServer, llama_hook: WebhookServer,
                                 smtp: SmtpRecorder) -> None:
    root = tmp_path / "fleet"
    (root / "jobs").mkdir(parents=True)
    storage = LocalStorage(StorageSettings(uri=str(root)))
    publish_fleet(storage, [], generated_at=FIRST, storage_uri=str(root))
    storage.write_report("routes.toml", ROUTES.encode(), content_type="application/toml")
    gpt = silence("job=gpt-*", until=FIRST + timedelta(days=25), reason="known leak, fix in 2.4")
    mixtral = silence("job_name=mixtral", "kind=regression", until=FIRST + timedelta(days=60), reason="expired")
    change_silences(storage, lambda book: book.add(gpt))
    change_silences(storage, lambda book: (book.add(mixtral)[0].expire(mixtral.id, FIRST), None))
    settings = NotifySettings(slack_webhook=SecretRef.held(webhook.url), smtp_url=SecretRef.held(
        f"smtp://127.0.0.1:{smtp.port}"), email_to=(ONCALL,), email_from="stormwatch@example.com", backoff_s=0.001)

    per_night: list[Counter[str]] = []
    seen: dict[str, list[tuple[int, dict[str, Any]]]] = {"default slack": [], "llama-team slack": []}
    mails: list[tuple[int, str, str]] = []  # night, recipient, text
    for night in range(NIGHTS):
        before = (len(webhook.posts), len(llama_hook.posts), len(smtp.messages))
        found = [finding(name, night) for name in NAMES]
        fleet = fleet_findings(sections(night), index_url="https://reports.example/index.html",
                               report_url_of=lambda job: f"https://reports.example/{job}/report.html")
        notify_step(storage, [*found, *fleet], settings=settings, now=FIRST + timedelta(days=night, hours=1),
                    fleet_evaluated=True)
        counts: Counter[str] = Counter()
        for post in webhook.posts[before[0]:]:
            seen["default slack"].append((night, post))
            counts["default slack"] += 1
        for post in llama_hook.posts[before[1]:]:
            seen["llama-team slack"].append((night, post))
            counts["llama-team slack"] += 1
        for message in smtp.messages[before[2]:]:
            (recipient,) = message.rcpt_tos
            mails.append((night, recipient, message.part("plain")))
            counts["infra email" if recipient == INFRA else "default email"] += 1
        per_night.append(counts)

    columns = ("default slack", "default email", "llama-team slack", "infra email")
    print("\nmessages per night (30 nights, 8 job names, routes + silences)")
    print("night | " + " | ".join(columns) + " | total")
    for night, counts in enumerate(per_night):
        print(f"{night:5d} | " + " | ".join(f"{counts[name]:{len(name)}d}" for name in columns)
              + f" | {sum(counts.values()):5d}")
    totals = Counter[str]()
    for counts in per_night:
        totals.update(counts)
    print("total | " + " | ".join(f"{totals[name]:{len(name)}d}" for name in columns) + f" | {sum(totals.values()):5d}")

    def nights(channel: str, text: str) -> list[int]:
        return [night for night, post in seen[channel] if text in orjson.dumps(post).decode()]

    # bert: sent when it starts, then every 7 nights while still firing, never in between
    assert nights("default slack", "bert-") == [2, 9, 16, 23]
    assert [n for n, recipient, text in mails if "bert-" in text and recipient == ONCALL] == [2, 9, 16, 23]
    assert "*Still firing* since 2026-10-03" in orjson.dumps(seen["default slack"][1][1]).decode()
    # llama-7b: only its team; new, repeated after 7 nights, resolved once (the team asks for it)
    assert nights("llama-team slack", "llama-7b") == [5, 12, 13]
    assert "Stormwatch: resolved GPU-memory finding" in orjson.dumps(seen["llama-team slack"][2][1]).decode()
    assert nights("default slack", "llama-") == [] and not [m for m in mails if "llama-" in m[2]]
    # gpt: silenced from start to end, never sent; llama-70b: warnings only, never sent
    everything = orjson.dumps([post for posts in seen.values() for _, post in posts]).decode() + str(mails)
    assert "gpt-" not in everything and "llama-70b" not in everything
    ledger = ledger_lines_at(storage.root)  # every decision: the archives, then what followed
    gpt_lines = [line for line in ledger if line.get("job_id", "").startswith("gpt-") and line["state"] != "resolved"]
    assert gpt_lines and all(line["silenced_by"] == gpt.id for line in gpt_lines if line["kind"] == "most_severe")
    # vit's OOM: one message, its ranks' findings folded into it
    vit = [(night, post) for night, post in seen["default slack"] if "vit-2026-10-11" in orjson.dumps(post).decode()]
    assert [night for night, _ in vit] == [10] and "*OOM:*" in orjson.dumps(vit[0][1]).decode()
    # the suspect device: one message to infra and the default when it starts, again after 7 nights
    device_mails = [(n, recipient) for n, recipient, text in mails if "node-7 device 1" in text]
    assert device_mails == [(18, INFRA), (18, ONCALL), (25, INFRA), (25, ONCALL)]
    device_posts = nights("default slack", "Suspect host:")
    assert device_posts == [18, 25]
    first_device = orjson.dumps(seen["default slack"][[n for n, _ in seen["default slack"]].index(18)][1]).decode()
    assert "job resnet-2026-10-19: Most severe alert:critical on rank 1" in first_device
    assert "job t5-2026-10-19: Most severe alert:critical on rank 1" in first_device
    assert not any(n in range(18, 26) and ("resnet-" in text or "t5-" in text) and "node-7" not in text
                   for n, _, text in mails)  # their own findings were never sent on their own (26: a new spike)
    # the regression: infra and the default, the expired silence ignored
    assert [(n, recipient) for n, recipient, text in mails if "regression:peak_reserved_bytes" in text] == [
        (21, INFRA), (21, ONCALL)]
    # grouping: vit and resnet start firing together (four alerts): one message for the default's channels
    burst = [post for night, post in seen["default slack"] if night == 26]
    assert len(burst) == 1
    assert burst[0]["blocks"][0]["text"]["text"] == "Stormwatch: 2 jobs with critical GPU-memory findings"
    # the lost rank: one message, missing ranks first
    assert nights("default slack", "t5-2026-10-28") == [27]
    assert "*Missing ranks:* 2 of 4" in orjson.dumps(seen["default slack"][-1][1]).decode()
    # nothing is sent for infra but fleet findings
    assert all("node-7 device 1" in text or "regression:" in text for _, recipient, text in mails if recipient == INFRA)

    # replaying the last night sends nothing and records nothing new
    ledger_bytes = read_ledger_bytes(storage).data
    notify_step(storage, [*(finding(name, NIGHTS - 1) for name in NAMES)], settings=settings,
                now=FIRST + timedelta(days=NIGHTS - 1, hours=1), fleet_evaluated=True)
    assert read_ledger_bytes(storage).data == ledger_bytes
    assert sum(totals.values()) == len(webhook.posts) + len(llama_hook.posts) + len(smtp.messages)

    board = {item["name"]: item for item in orjson.loads(storage.read_report("fleet.json") or b"{}")["alerts"][
        "receivers"]}
    assert {item["job_name"] for item in board["default"]["alerts"] if item["status"] == "still_firing"} >= {"bert"}
