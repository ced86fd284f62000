"""alerts.json: version 2 stores each finding once and reads back equal; version 1 is read and upgraded."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import orjson
import pytest

from stormwatch.alerting.alert_file import VERSION, AlertBook, read_book, rebuild_note, unusable
from stormwatch.alerting.alert_records import AlertRecord, AlertStatus, TargetState
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import ChannelStatus, FindingKey
from stormwatch.alerting.observations import Fingerprint
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import T0, book_of, make_fact, make_finding
from tests.stormwatch.alerting.alert_golden import GOLDEN_V1, golden_book


def lines(data: bytes) -> tuple[dict[str, dict[str, object]], list[dict[str, object]]]:
    document = orjson.loads(data)
    assert document["version"] == VERSION == 2
    return document["findings"], document["alerts"]


def test_a_version_1_file_reads_as_the_state_it_was_written_from_and_is_written_as_version_2() -> None:
    old = GOLDEN_V1.read_bytes()
    assert orjson.loads(old)["version"] == 1
    book = read_book(old)
    assert book.problems == () and book == golden_book()
    new = book.to_bytes()
    assert read_book(new) == book and read_book(new).to_bytes() == new
    findings, alerts = lines(new)
    assert len(alerts) == len(orjson.loads(old)["alerts"]) == 10 and len(findings) == 7
    assert len(new) < 0.6 * len(old)


def test_each_finding_is_stored_once_and_alerts_name_it_and_their_fact() -> None:
    job = make_finding("vit-3", make_fact("earliest", rank=1), make_fact("most_severe", rank=2), oom_rank=2,
                       missing=(3,), hosts=("n0", "n1", "n2"))
    book = book_of(job)
    data = book.to_bytes()
    findings, alerts = lines(data)
    assert list(findings) == ["vit-3"] and {item["job"] for item in alerts} == {"vit-3"}
    stored = findings["vit-3"]
    assert stored["placements"] == [[1, "n1", 1], [2, "n2", 2]]  # the ranks its alerts are on, nothing else
    assert "oom" not in stored and "started_at_ns" not in stored and "host" not in stored  # not read from a record
    facts = {item["kind"]: item["fact"] for item in alerts}
    assert facts["earliest"] == 0 and facts["most_severe"] == 1  # indices into the finding's indicators
    assert isinstance(facts["oom"], dict) and facts["oom"]["signal"] == "oom" and "phase_path" not in facts["oom"]
    assert all("key" not in item and "last_seen_at" not in item and "placements" not in item for item in alerts)
    again = read_book(data)
    assert again == book
    records = {fingerprint.kind: record for fingerprint, record in again.records.items()}
    assert records[AlertKind.OOM].job is records[AlertKind.MOST_SEVERE].job  # rank 2's: one object
    assert records[AlertKind.EARLIEST].job.placements == ((1, "n1", 1),)


def test_members_that_differ_from_their_defaults_are_kept() -> None:
    """A record not made by an audit (its whole finding, a key of its own, seen later): read back equal."""
    job = make_finding("run#2", make_fact(rank=1), hosts=("a", "b", "c"), missing=(2,))
    record = AlertRecord(Fingerprint("run", AlertKind.MOST_SEVERE, "alert:critical", "h|x", 7), AlertStatus.RESOLVED,
                         Severity.WARNING, T0.isoformat(), (T0 + timedelta(days=1)).isoformat(),
                         FindingKey("other", "most_severe", 5, "s", 9), make_fact(rank=1, severity=Severity.INFO),
                         job, resolved_at=T0.isoformat(), silenced_by="s-1", inhibited_by="run|oom|oom",
                         targets={"b": TargetState(ChannelStatus.FAILED, "t", "u", 4, "e", "c", "d")})
    other = replace(record, fingerprint=Fingerprint("run", AlertKind.EARLIEST, "x"), job=replace(job, summary="2nd"),
                    key=FindingKey("run#2", "most_severe", 1, "alert:critical", record.fact.timestamp_ns))
    third = replace(record, fingerprint=Fingerprint("run", AlertKind.OOM, "x"),
                    job=make_finding("run", make_fact(rank=1)), targets={})
    book = AlertBook({item.fingerprint: item for item in (record, other, third)})
    data = book.to_bytes()
    assert read_book(data) == book
    findings, alerts = lines(data)
    assert sorted(findings) == ["run", "run#2", "run#2#2"]  # a job id that looks like a second key collides not
    full = next(item for item in alerts if item["kind"] == "most_severe")
    assert full["placements"] == [[0, "a", 0], [1, "b", 1], [2, "c", 2]] and full["key"] == ["other", "most_severe",
                                                                                              5, "s", 9]
    assert isinstance(full["fact"], dict) and full["last_seen_at"] == (T0 + timedelta(days=1)).isoformat()
    assert next(item for item in alerts if item["kind"] == "earliest").get("key") is None  # its fact's own key


def damaged(change: str) -> AlertBook:
    """Three alerts: vit's earliest (damaged) and OOM, zeta's most severe."""
    book = book_of(make_finding("vit-3", make_fact("earliest"), oom_rank=0), make_finding("zeta-7"))
    document = orjson.loads(book.to_bytes())
    findings, alerts = document["findings"], document["alerts"]
    if change == "finding":
        del findings["vit-3"]["verdict"]
    elif change == "reference":
        alerts[0]["job"] = "nobody"
    elif change == "index":
        alerts[0]["fact"] = 7
    elif change == "negative":
        alerts[0]["fact"] = -1
    elif change == "boolean":
        alerts[0]["fact"] = True
    elif change == "kind":
        alerts[0]["kind"] = "bogus"
    return read_book(orjson.dumps(document))


@pytest.mark.parametrize(("change", "skipped"), [("finding", 2), ("reference", 1), ("index", 1), ("negative", 1),
                                                  ("boolean", 1), ("kind", 1)])
def test_a_record_that_cannot_be_read_is_skipped_with_a_problem(change: str, skipped: int) -> None:
    book = damaged(change)
    assert len(book.records) == 3 - skipped and len(book.problems) == skipped
    assert book.problems[0].startswith("alerts.json alert 1: unreadable (") and book.problems[0].endswith("; skipped")
    assert Fingerprint("zeta", AlertKind.MOST_SEVERE, "alert:critical") in book.records


@pytest.mark.parametrize("data", [b'{"version": 3, "alerts": []}', b'{"version": 2, "findings": [], "alerts": []}',
                                  b"[1]", b"{not json"])
def test_a_document_that_cannot_be_read_is_an_empty_state_with_one_problem(data: bytes) -> None:
    book = read_book(data)
    assert book.records == {} and len(book.problems) == 1 and book.problems[0].startswith("alerts.json unreadable (")
    assert unusable(data, book)
    assert rebuild_note(data, book, has_ledger=False) == (
        "alerts.json unreadable: the alert state is rebuilt from notifications.jsonl")


@pytest.mark.parametrize(("data", "has_ledger", "note"), [
    (None, False, None),
    (None, True, "alerts.json missing: the alert state is rebuilt from notifications.jsonl"),
    (b"", False, "alerts.json empty: the alert state is rebuilt from notifications.jsonl"),
    (b" \n", True, "alerts.json empty: the alert state is rebuilt from notifications.jsonl"),
    (b'{"version": 2, "findings": {}, "alerts": []}', True, None),
], ids=["first audit", "deleted", "zero bytes", "blank", "an empty but valid state"])
def test_a_lost_alert_state_is_rebuilt_and_said(data: bytes | None, has_ledger: bool, note: str | None) -> None:
    assert rebuild_note(data, read_book(data), has_ledger=has_ledger) == note


def test_a_damaged_version_1_record_is_skipped() -> None:
    document = orjson.loads(GOLDEN_V1.read_bytes())
    document["alerts"][2]["job"]["indicators"] = [{"kind": "earliest"}]
    book = read_book(orjson.dumps(document))
    assert len(book.records) == 9 and book.problems == ("alerts.json alert 3: unreadable (KeyError); skipped",)
