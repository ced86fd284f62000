"""A metrics push in the notify ledger: a failed push (a closed port) is a ``"type": "push"`` line naming the
gateway's host:port, every time it fails; the first push that reaches Debian's real Pushgateway after a
failure is recorded too; a healthy gateway adds no line. A fold keeps the gateway's newest line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from stormwatch.alerting.ledger import read_ledger
from stormwatch.alerting.push_notes import PushNote, PushStatus, gateway_name, push_line
from stormwatch.tasks.metrics import publish_metrics
from stormwatch.tasks.notify.ledger_store import read_ledger_bytes, write_ledger
from stormwatch.tasks.retry import RetryPolicy
from stormwatch.tasks.storage.local import LocalStorage
from stormwatch.tasks.storage.protocol import StorageSettings
from tests.ledger_files import ledger_lines_at
from tests.prometheus_parts import free_port, pushgateway
from tests.tasks.test_metrics_push import fleet_json

NO_WAIT = RetryPolicy(attempts=2, delays_s=(0.0,))
STAMP = "2026-12-01T02:00:00+00:00"


def pushes(root: Path) -> list[dict[str, object]]:
    return [line for line in ledger_lines_at(root) if line.get("type") == "push"]


@pytest.mark.parametrize(("url", "name"), [
    ("http://127.0.0.1:9091", "127.0.0.1:9091"),
    ("https://Gateway.Example/prefix/?x=1", "gateway.example"),
    ("http://user:secret@gw.example:9091/", "gw.example:9091"),  # refused by the parameters; never shown anyway
    ("http://[::1]:9091", "[::1]:9091"),
    ("not a url", "?"),
])
def test_a_gateway_is_named_by_host_and_port_only(url: str, name: str) -> None:
    assert gateway_name(url) == name


FAILED = PushNote(gateway="g:1", status=PushStatus.FAILED, attempts=3, decided_at=STAMP, error="ConnectError")
PUSHED = PushNote(gateway="g:1", status=PushStatus.PUSHED, attempts=1, decided_at=STAMP)


@pytest.mark.parametrize(("previous", "error", "recorded"), [
    (None, None, None),  # a healthy gateway adds nothing
    (PUSHED, None, None),
    (None, "ConnectError", PushStatus.FAILED),  # every failure is recorded
    (FAILED, "ConnectError", PushStatus.FAILED),
    (FAILED, None, PushStatus.PUSHED),  # back after a failure: recorded once
])
def test_which_pushes_make_a_line(previous: PushNote | None, error: str | None, recorded: PushStatus | None) -> None:
    note = push_line(previous, gateway="g:1", attempts=1, error=error, decided_at=STAMP)
    assert (None if note is None else note.status) == recorded


def test_an_unreachable_gateway_is_recorded_then_its_return_and_a_fold_keeps_the_newest(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    (root / "jobs").mkdir(parents=True)
    storage = LocalStorage(StorageSettings(uri=str(root)))
    storage.write_report("fleet.json", fleet_json({"llama": "critical"}), content_type="application/json")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    for _ in range(2):  # closed port: failed each time, each time a line
        result = publish_metrics(storage, storage_uri=str(root), pushgateway=url, policy=NO_WAIT, timeout_s=2.0)
        assert result["pushgateway"]["pushed"] is False and result["pushgateway"]["recorded"] == "failed"
    lines = pushes(root)
    assert [(line["gateway"], line["status"], line["attempts"]) for line in lines] == [
        (f"127.0.0.1:{port}", "failed", 2)] * 2
    assert all(str(line["error"]).startswith("ConnectError") for line in lines)
    assert (root / "reports" / "metrics.prom").is_file()  # the file is written whatever the push
    with pushgateway(tmp_path, port=port):
        back = publish_metrics(storage, storage_uri=str(root), pushgateway=url, policy=NO_WAIT)
        assert back["pushgateway"]["pushed"] is True and back["pushgateway"]["recorded"] == "pushed"
        again = publish_metrics(storage, storage_uri=str(root), pushgateway=url, policy=NO_WAIT)
        assert again["pushgateway"]["recorded"] is None
    assert [line["status"] for line in pushes(root)] == ["failed", "failed", "pushed"]
    # an audit's fold: notifications.jsonl keeps the gateway's newest line
    found = read_ledger_bytes(storage)
    write_ledger(storage, found.data or b"", read=found, whole=True, now=datetime(2026, 12, 2, tzinfo=UTC))
    state = read_ledger(storage.read_report("notifications.jsonl"))
    assert state.pushes[f"127.0.0.1:{port}"].status is PushStatus.PUSHED and not state.problems
