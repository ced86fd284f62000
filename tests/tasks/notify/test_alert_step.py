"""The notify step over a real local storage and real receivers: routes, silences, bad configuration files,
the fleet index, and the alert state's claims (a lost lease, a crash between claim and send)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.policy import AlertPolicy
from stormwatch.alerting.silences import Silence, SilenceBook, SilenceMatcher, silence_id
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.fleet import JobStatus, row_from_document
from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.notify.config_store import change_silences
from stormwatch.tasks.notify.dispatch import notify_jobs
from stormwatch.tasks.notify.settings import NotifySettings
from stormwatch.tasks.notify.step import UnchangedJob, commit_alerts, notify_step
from stormwatch.tasks.publish import publish_fleet
from stormwatch.tasks.storage.local import LocalStorage
from stormwatch.tasks.storage.protocol import ALERTS_KEY, StorageSettings, model_json_key
from tests.ledger_files import ledger_lines_at
from tests.stormwatch.alerting.documents import document
from tests.tasks.notify.servers import SmtpRecorder, WebhookServer, webhook_server
from tests.tasks.notify.test_notify import settings, slack_text

NOW = datetime(2026, 11, 30, 2, tzinfo=UTC)
ROUTES = """\
[receivers.llama-team]
slack_webhook_env = "STORMWATCH_TEST_LLAMA_HOOK"
email_to = ["llama-oncall@example.com"]

[[routes]]
job = "llama-*"
receiver = "llama-team"
"""


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    root = tmp_path / "fleet"
    (root / "jobs").mkdir(parents=True)
    store = LocalStorage(StorageSettings(uri=str(root)))
    publish_fleet(store, [], generated_at=NOW, storage_uri=str(root))  # fleet.json and index.html to refresh
    return store


@pytest.fixture
def team(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookServer]:
    with webhook_server() as server:
        monkeypatch.setenv("STORMWATCH_TEST_LLAMA_HOOK", server.url)
        yield server


def finding(name: str, job_id: str) -> JobFinding:
    return JobFinding.from_document(document(name, job_id=job_id), report_url=None)


def ledger(storage: LocalStorage) -> list[dict[str, Any]]:
    """Every decision line so far (the archives, then what was decided since)."""
    return ledger_lines_at(storage.root)


def alert_statuses(storage: LocalStorage) -> dict[str, str]:
    return {item["alert"]: item["status"] for item in orjson.loads(storage.read_report(ALERTS_KEY) or b"")["alerts"]}


def fleet(storage: LocalStorage) -> dict[str, Any]:
    return orjson.loads(storage.read_report("fleet.json") or b"{}")


def test_routes_in_storage_reach_the_right_receivers(storage: LocalStorage, webhook: WebhookServer,
                                                     smtp: SmtpRecorder, team: WebhookServer) -> None:
    storage.write_report("routes.toml", ROUTES.encode(), content_type="application/toml")
    found = [finding("collective", "llama-8r-0142"), finding("alerts", "bert-large-0007")]
    result = notify_step(storage, found, settings=settings(webhook, smtp), now=NOW)
    assert result["receivers"] == ["default", "llama-team"] and result["sent"] == 4
    assert [post["text"].split(" is ")[0] for post in team.posts] == ["Stormwatch: job llama-8r-0142"]
    assert [post["text"].split(" is ")[0] for post in webhook.posts] == ["Stormwatch: job bert-large-0007"]
    assert sorted(message.rcpt_tos for message in smtp.messages) == [
        ("llama-oncall@example.com",), ("oncall@example.com", "gpu-team@example.com")]
    llama = [line for line in ledger(storage) if line["job_id"] == "llama-8r-0142"]
    assert {tuple(line["channels"]) for line in llama} == {("llama-team/slack", "llama-team/email")}
    board = {item["name"]: item for item in fleet(storage)["alerts"]["receivers"]}
    assert board["llama-team"]["counts"]["sent"] == 2 and board["default"]["counts"]["sent"] == 1
    index = storage.read_report("index.html").decode()  # type: ignore[union-attr]
    assert '<section id="alerts">' in index and "llama-team" in index


def test_a_local_routes_file_wins_and_a_bad_one_falls_back_to_the_default_receiver(
        storage: LocalStorage, webhook: WebhookServer, smtp: SmtpRecorder, team: WebhookServer, tmp_path: Path
) -> None:
    routes = tmp_path / "routes.toml"
    routes.write_text(ROUTES.replace('receiver = "llama-team"', 'receiver = "llama-tem"'))
    storage.write_report("routes.toml", b"this is not used", content_type="application/toml")
    broken = settings(webhook, smtp, alerting=AlertPolicy(routes_file=str(routes)))
    result = notify_step(storage, [finding("collective", "llama-8r-0142")], settings=broken, now=NOW)
    error = f"{routes} line 7: route 1: names the unknown receiver 'llama-tem'"
    assert result["problems"] == [error] and result["sent"] == 2
    assert len(webhook.posts) == len(smtp.messages) == 1 and not team.posts  # everything to the default receiver
    notes = [line for line in ledger(storage) if line.get("type") == "config"]
    assert notes == [{"type": "config", "file": str(routes), "error": error, "decided_at": NOW.isoformat()}]
    assert fleet(storage)["alerts"]["problems"] == [error]
    assert "names the unknown receiver &#39;llama-tem&#39;" in storage.read_report("index.html").decode()  # type: ignore[union-attr]

    notify_step(storage, [finding("collective", "llama-8r-0143")], settings=broken, now=NOW + timedelta(days=1))
    assert len([line for line in ledger(storage) if line.get("type") == "config"]) == 1  # the same error: one line
    routes.write_text(ROUTES)
    notify_step(storage, [finding("collective", "llama-8r-0144")], settings=broken, now=NOW + timedelta(days=2))
    assert [line["error"] for line in ledger(storage) if line.get("type") == "config"] == [error, None]


def silence(*texts: str, until: datetime) -> Silence:
    matchers = tuple(sorted(SilenceMatcher.parse(text) for text in texts))
    return Silence(silence_id(matchers, until, "known"), matchers, until, "known", NOW - timedelta(days=1), "ana")


def test_a_silenced_alert_is_recorded_never_sent_and_sent_once_the_silence_ends(
        storage: LocalStorage, webhook: WebhookServer) -> None:
    held = silence("job=llama-*", "kind=most_severe", until=NOW + timedelta(days=3))
    change_silences(storage, lambda book: book.add(held))
    for night in range(3):
        notify_step(storage, [finding("collective", f"llama-8r-01{night}")], settings=settings(webhook),
                    now=NOW + timedelta(days=night))
    silenced = [line for line in ledger(storage) if line["kind"] == "most_severe"]
    assert [line["channels"]["slack"]["status"] for line in silenced] == ["silenced"] * 3
    assert {line["silenced_by"] for line in silenced} == {held.id}
    earliest = [post for post in webhook.posts]  # the earliest alert is not silenced: sent once
    assert len(earliest) == 1 and "*Earliest:*" in slack_text(earliest[0])
    board = fleet(storage)["alerts"]["receivers"][0]
    assert [(item["kind"], item["status"], item["by"]) for item in board["alerts"]] == [
        ("most_severe", "silenced", f"silence {held.id}"), ("earliest", "still_firing", None)]

    notify_step(storage, [finding("collective", "llama-8r-013")], settings=settings(webhook),
                now=NOW + timedelta(days=3))  # expired: ignored
    assert len(webhook.posts) == 2 and ledger(storage)[-1]["channels"]["slack"]["status"] == "sent"


def test_a_malformed_silences_file_without_a_good_copy_is_an_error_and_silences_nothing(
        storage: LocalStorage, webhook: WebhookServer) -> None:
    storage.write_report("silences.json", b'{"version": 1, "silences": [\n{"id": "s-1", "matchers": []}\n]}',
                         content_type=MediaType.JSON)
    result = notify_step(storage, [finding("collective", "llama-8r-0142")], settings=settings(webhook), now=NOW)
    assert result["problems"] == ["reports/silences.json line 2: silence 1: matchers must be a non-empty list of "
                                  "name=value strings; no good copy was kept: no silence applies until it is fixed"]
    assert len(webhook.posts) == 1 and ledger(storage)[0]["type"] == "config"


@pytest.mark.parametrize("damage", [b"", b'{"version": 1, "silences": [', b"\x00\xff garbage"],
                         ids=["zero bytes", "truncated", "garbage"])
def test_a_damaged_silences_file_keeps_the_last_good_one_and_says_so_every_audit(
        storage: LocalStorage, webhook: WebhookServer, damage: bytes) -> None:
    held = silence("job=llama-*", until=NOW + timedelta(days=3))
    change_silences(storage, lambda book: book.add(held))  # each write keeps a copy
    good = storage.read_report("silences.json")
    assert storage.read_report("silences.last-good.json") == good
    storage.write_report("silences.json", damage, content_type=MediaType.JSON)
    for night in range(2):
        result = notify_step(storage, [finding("collective", f"llama-8r-01{night}")], settings=settings(webhook),
                             now=NOW + timedelta(days=night))
        (problem,) = result["problems"]
        assert problem.startswith("reports/silences.json") and problem.endswith(
            "; applying the last good copy reports/silences.last-good.json (1 silence) until it is fixed")
    assert webhook.posts == []  # the silenced job is never paged because its file broke
    assert storage.read_report("silences.json") == damage  # reported, never overwritten behind the user's back
    assert storage.read_report("silences.last-good.json") == good


def test_an_audit_backs_up_a_silences_file_that_reads(storage: LocalStorage, webhook: WebhookServer) -> None:
    held = silence("job=llama-*", until=NOW + timedelta(days=3))
    text = SilenceBook().add(held)[0].to_bytes()
    storage.write_report("silences.json", text, content_type=MediaType.JSON)  # written by hand, no copy yet
    notify_step(storage, [], settings=settings(webhook), now=NOW)
    assert storage.read_report("silences.last-good.json") == text


def test_an_audit_whose_claim_is_refused_sends_nothing(storage: LocalStorage, webhook: WebhookServer) -> None:
    """A lost lease: audit A read the alert state, then audit B changed it; A's claim fails, A sends nothing."""
    quiet = settings(webhook)
    notify_step(storage, [finding("collective", "llama-8r-0141")], settings=quiet, now=NOW)
    read, version = storage.read_report_versioned(ALERTS_KEY)  # type: ignore[misc]
    notify_step(storage, [finding("alerts", "bert-7")], settings=quiet, now=NOW)  # B: sends bert's OOM
    assert len(webhook.posts) == 2
    stale = notify_jobs([finding("alerts", "bert-7")], ledger=storage.read_report("notifications.jsonl"),
                        alerts=read, settings=quiet, now=NOW,
                        claim=lambda data: storage.replace_report_if(ALERTS_KEY, data, version=version,
                                                                     content_type=MediaType.JSON) is not None)
    assert stale.refused and stale.sent == 0 and len(webhook.posts) == 2


class Died(Exception):
    """The process ends here (a SIGKILL, as far as storage can tell)."""


def test_a_send_claimed_by_an_audit_that_died_before_sending_is_sent_at_once(storage: LocalStorage,
                                                                             webhook: WebhookServer) -> None:
    def claim_then_die(data: bytes) -> bool:
        storage.create_report_exclusive(ALERTS_KEY, data, content_type=MediaType.JSON)
        raise Died  # the process ends between its claim and its send

    quiet = settings(webhook)
    with pytest.raises(Died):
        notify_jobs([finding("collective", "llama-8r-0141")], ledger=None, settings=quiet, now=NOW,
                    claim=claim_then_die)
    rerun = notify_step(storage, [], settings=quiet, now=NOW)  # at once, at the same --as-of time
    assert rerun["sent"] == 1 and len(webhook.posts) == 1  # its two alerts (earliest, most severe), one message
    assert rerun["problems"] == ["2 sends claimed by an audit that stopped: 0 found sent in notifications.jsonl, "
                                 "0 failed, 2 not recorded and sent again"]
    assert notify_step(storage, [], settings=quiet, now=NOW)["sent"] == 0 and len(webhook.posts) == 1


def test_an_audit_killed_after_recording_its_sends_is_never_sent_again(
        storage: LocalStorage, webhook: WebhookServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def die(*args: Any, **kwargs: Any) -> bool:
        raise Died  # the ledger is written; alerts.json still holds the claims

    quiet = settings(webhook)
    with monkeypatch.context() as patch:
        patch.setattr("stormwatch.tasks.notify.step.commit_alerts", die)
        with pytest.raises(Died):
            notify_step(storage, [finding("collective", "llama-8r-0141")], settings=quiet, now=NOW)
    assert len(webhook.posts) == 1
    sent = [line for line in ledger(storage) if line.get("channels", {}).get("slack", {}).get("status") == "sent"]
    assert len(sent) == 2 and len({line["claim"] for line in sent}) == 1  # two alerts, one claim
    rerun = notify_step(storage, [finding("collective", "llama-8r-0141")], settings=quiet, now=NOW)
    assert rerun["sent"] == 0 and len(webhook.posts) == 1  # settled from the ledger, not sent again
    assert rerun["problems"] == ["2 sends claimed by an audit that stopped: 2 found sent in notifications.jsonl, "
                                 "0 failed, 0 not recorded and sent again"]
    state = orjson.loads(storage.read_report(ALERTS_KEY) or b"")
    slack = [alert["targets"]["slack"] for alert in state["alerts"]]
    told = [(t["status"], "claim" in t, t["notified_at"]) for t in slack]
    assert told == [("sent", False, sent[0]["decided_at"])] * 2
    assert [line["state"] for line in ledger(storage) if "state" in line] == ["firing"] * 2  # never "new" twice


@pytest.mark.parametrize("damage", [b"", b'{"version": 2, "findings": {}, "alerts": [{"fingerp', None],
                         ids=["zero bytes", "truncated", "deleted"])
def test_a_lost_alert_state_is_rebuilt_from_the_ledger_and_nothing_is_sent_again(
        storage: LocalStorage, webhook: WebhookServer, damage: bytes | None) -> None:
    quiet = settings(webhook)
    first = [finding("collective", "llama-8r-0141"), finding("alerts", "bert-7")]
    assert notify_step(storage, first, settings=quiet, now=NOW)["sent"] == 2
    if damage is None:
        storage.delete_report(ALERTS_KEY)
    else:
        storage.write_report(ALERTS_KEY, damage, content_type=MediaType.JSON)
    again = notify_step(storage, first, settings=quiet, now=NOW + timedelta(days=1))
    assert again["sent"] == 0 and len(webhook.posts) == 2
    what = "missing" if damage is None else ("empty" if not damage else "unreadable")
    assert f"alerts.json {what}: the alert state is rebuilt from notifications.jsonl" in again["problems"]
    kept = [key for key in storage.list_reports("damaged")]
    assert [entry.key.startswith("damaged/alerts.json.") for entry in kept] == ([] if not damage else [True])
    assert orjson.loads(storage.read_report(ALERTS_KEY) or b"")["alerts"]  # a usable state again
    third = notify_step(storage, first, settings=quiet, now=NOW + timedelta(days=2))
    assert third["sent"] == 0 and not [p for p in third["problems"] if "rebuilt" in p]


@pytest.mark.parametrize("damage", [b"", b'{"version": 2, "findings": {}, "alerts": [{"fingerp', None],
                         ids=["zero bytes", "truncated", "deleted"])
def test_a_rebuilt_state_keeps_an_unchanged_jobs_alert_firing_until_it_resolves(
        storage: LocalStorage, webhook: WebhookServer, damage: bytes | None) -> None:
    """The audit after the loss diagnoses only bert-7; llama-8r-0141 is unchanged, its alert known only
    from the ledger. It is re-created from its model.json, told, and resolves when a clean run comes."""
    told = settings(webhook, alerting=AlertPolicy(notify_resolved=True))
    llama = document("collective", job_id="llama-8r-0141")
    storage.write_report(model_json_key("llama-8r-0141"), orjson.dumps(llama), content_type=MediaType.JSON)
    row = row_from_document(JobDocument.from_data(llama, name="model.json"), status=JobStatus.DIAGNOSED,
                            report=None)
    bert = finding("alerts", "bert-7")
    assert notify_step(storage, [JobFinding.from_document(llama, report_url=None), bert], settings=told,
                       now=NOW)["sent"] == 2
    before = alert_statuses(storage)
    assert before["llama-8r|most_severe|collective:collective_confident"] == "firing"
    if damage is None:
        storage.delete_report(ALERTS_KEY)
    else:
        storage.write_report(ALERTS_KEY, damage, content_type=MediaType.JSON)
    again = notify_step(storage, [bert], settings=told, now=NOW + timedelta(days=1),
                        unchanged=[UnchangedJob(row, None)])
    assert again["sent"] == 0 and len(webhook.posts) == 2
    assert alert_statuses(storage) == before
    clean = finding("clean", "llama-8r-0142")
    assert notify_step(storage, [clean], settings=told, now=NOW + timedelta(days=2))["sent"] == 1
    assert webhook.posts[-1]["blocks"][0]["text"]["text"] == "Stormwatch: resolved GPU-memory finding"
    assert webhook.posts[-1]["text"].endswith("collective:collective_confident of llama-8r")


@pytest.mark.parametrize("damage", [b"", None], ids=["zero bytes", "deleted"])
def test_a_rebuilt_state_resolves_the_alert_of_a_job_diagnosed_again_without_it(
        storage: LocalStorage, webhook: WebhookServer, damage: bytes | None) -> None:
    """bert-7's inputs changed and its new run is clean: its model.json no longer shows the old alert,
    which only the ledger remembers. It is recalled from there and resolves, told once."""
    told = settings(webhook, alerting=AlertPolicy(notify_resolved=True))
    assert notify_step(storage, [finding("alerts", "bert-7")], settings=told, now=NOW)["sent"] == 1
    if damage is None:
        storage.delete_report(ALERTS_KEY)
    else:
        storage.write_report(ALERTS_KEY, damage, content_type=MediaType.JSON)
    again = notify_step(storage, [finding("clean", "bert-7")], settings=told, now=NOW + timedelta(days=1))
    assert again["sent"] == 1 and len(webhook.posts) == 2
    assert webhook.posts[-1]["blocks"][0]["text"]["text"] == "Stormwatch: resolved GPU-memory finding"
    assert set(alert_statuses(storage).values()) == {"resolved"}
    assert notify_step(storage, [finding("clean", "bert-7")], settings=told,
                       now=NOW + timedelta(days=2))["sent"] == 0


def test_a_stalled_audits_outcomes_land_in_the_state_its_successor_wrote(storage: LocalStorage,
                                                                        webhook: WebhookServer) -> None:
    """A stalled past its lease while sending; B took the lease and, finding A's claims, sent them again
    (the window of a holder that stalls past its lease, docs/alerting.md). A's outcomes still land."""
    quiet = settings(webhook)
    claimed: list[str | None] = []

    def claim(data: bytes) -> bool:
        claimed.append(storage.create_report_exclusive(ALERTS_KEY, data, content_type=MediaType.JSON))
        return claimed[-1] is not None

    mine = notify_jobs([finding("collective", "llama-8r-0141")], ledger=None, settings=quiet, now=NOW, claim=claim)
    assert mine.sent == 1
    notify_step(storage, [finding("alerts", "bert-7")], settings=quiet, now=NOW)  # B wrote after A's claim
    assert commit_alerts(storage, mine, version=claimed[0], read=None)
    state = orjson.loads(storage.read_report(ALERTS_KEY) or b"{}")
    slack = {item["alert"]: item["targets"]["slack"]["status"] for item in state["alerts"]}
    assert slack["llama-8r|most_severe|collective:collective_confident"] == "sent"  # A's outcome, merged
    assert slack["bert|oom|oom"] == "sent"  # B's own
    assert len(webhook.posts) == 3  # A's, B's repeat of A's unrecorded claim, and B's own


def test_post_job_never_resolves_fleet_alerts(storage: LocalStorage, webhook: WebhookServer) -> None:
    from tests.stormwatch.alerting.alert_builders import make_suspect

    quiet = settings(webhook, alerting=AlertPolicy(notify_resolved=True))
    notify_step(storage, [make_suspect("node-7")], settings=quiet, now=NOW, fleet_evaluated=True)
    notify_step(storage, [finding("clean", "x-1")], settings=quiet, now=NOW + timedelta(hours=3))  # post-job
    notify_step(storage, [], settings=quiet, now=NOW + timedelta(days=1), fleet_evaluated=True)  # audit: gone
    assert [post["blocks"][0]["text"]["text"] for post in webhook.posts] == [
        "Stormwatch: critical GPU-memory finding", "Stormwatch: resolved GPU-memory finding"]
    assert "no longer seen" in slack_text(webhook.posts[1]) and "node-7 device 1" in webhook.posts[1]["text"]


def test_rerunning_the_same_step_writes_and_sends_nothing_new(storage: LocalStorage, webhook: WebhookServer) -> None:
    found = [finding("collective", "llama-8r-0141"), finding("alerts", "bert-7")]
    notify_step(storage, found, settings=settings(webhook), now=NOW)
    before = {key: storage.read_report(key) for key in ("notifications.jsonl", ALERTS_KEY)}
    notify_step(storage, found, settings=settings(webhook), now=NOW)
    assert {key: storage.read_report(key) for key in before} == before and len(webhook.posts) == 2


def test_settings_without_a_policy_keep_the_defaults() -> None:
    assert NotifySettings().alerting == AlertPolicy() and AlertPolicy().repeat_interval == timedelta(days=7)


def test_garbage_ledger_lines_are_taken_out_once_and_the_file_kept(storage: LocalStorage,
                                                                   webhook: WebhookServer) -> None:
    quiet = settings(webhook)
    notify_step(storage, [finding("collective", "llama-8r-0141")], settings=quiet, now=NOW)
    good = storage.read_report("notifications.jsonl") or b""
    damaged = b"garbage\n" + good + b'{"key": "torn'
    storage.write_report("notifications.jsonl", damaged, content_type=MediaType.NDJSON)
    result = notify_step(storage, [], settings=quiet, now=NOW + timedelta(days=1))
    (problem,) = [p for p in result["problems"] if "unreadable" in p]
    kept = "damaged/notifications.jsonl.20261201T020000Z"
    lines = len(good.splitlines())
    assert problem == (f"reports/notifications.jsonl lines 1, {lines + 2} unreadable: taken out, the file as it "
                       f"was kept as reports/{kept}")
    assert storage.read_report(kept) == damaged
    # the repaired ledger is folded at once: its readable lines archived, the newest of each alert carried
    archive = storage.list_reports(".ledger-archive")[-1]
    assert (storage.read_report(archive.key) or b"").startswith(good)
    carried = (storage.read_report("notifications.jsonl") or b"").splitlines(keepends=True)
    assert b'"type":"carried"' in carried[0] and set(carried[1:]) <= set(good.splitlines(keepends=True))
    assert result["sent"] == 0 and len(webhook.posts) == 1  # nothing the good lines record is sent again
    later = notify_step(storage, [], settings=quiet, now=NOW + timedelta(days=2))
    assert not [p for p in later["problems"] if "unreadable" in p]  # repaired: said once, not every night
