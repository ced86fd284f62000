"""A ledger fold carries the newest line of each alert behind a line naming its archive."""

from __future__ import annotations

import orjson
import pytest

from stormwatch.alerting.ledger import (
    ChannelName,
    ChannelOutcome,
    ChannelStatus,
    ConfigNote,
    Decision,
    FindingKey,
    append_lines,
    firing_job_ids,
    read_ledger,
)
from stormwatch.alerting.ledger_carry import carried_archive, carried_header, carried_ledger, newest_lines
from stormwatch.severity import Severity

ARCHIVE = ".ledger-archive/20261201T020000000000Z-0a1b2c3d.jsonl"


def line(job_id: str, *, at: str, alert: str | None = "llama|oom|oom", state: str = "firing",
         status: ChannelStatus = ChannelStatus.SENT) -> Decision:
    return Decision(FindingKey(job_id, "oom", 0, "oom", 1), Severity.CRITICAL, at,
                    {ChannelName.SLACK: ChannelOutcome(status, 1)}, alert=alert, state=state)


def ledger_of(*lines: Decision | ConfigNote) -> bytes:
    return append_lines(None, lines)


@pytest.mark.parametrize(("lines", "kept"), [
    ([line("llama-1", at="2026-01-01"), line("llama-2", at="2026-01-02")], ["llama-2"]),  # the alert moved on
    ([line("llama-2", at="2026-01-02"), line("llama-1", at="2026-01-01")], ["llama-2"]),  # by time, not place
    ([line("llama-1", at="2026-01-01", status=ChannelStatus.FAILED), line("llama-1", at="2026-01-02")],
     ["llama-1"]),  # one key decided twice: its newest line
    ([line("llama-1", at="2026-01-01"), line("gpt-1", at="2026-01-02", alert="gpt|oom|oom")], ["llama-1", "gpt-1"]),
    ([line("old-1", at="2025-01-01", alert=None), line("old-2", at="2025-01-02", alert=None)],
     ["old-1", "old-2"]),  # lines from before fingerprints: each key its own alert
    ([line("llama-1", at="2026-01-01"), line("llama-2", at="2026-01-02", state="resolved")], ["llama-2"]),
    ([], []),
], ids=["moved on", "out of order", "decided twice", "two alerts", "no fingerprint", "resolved", "empty"])
def test_the_newest_line_of_each_alert_is_kept(lines: list[Decision], kept: list[str]) -> None:
    state = read_ledger(ledger_of(*lines))
    newest = newest_lines(state)
    assert [item.key.job_id for item in newest if isinstance(item, Decision)] == kept
    carried = read_ledger(b"".join(item.to_line() for item in newest))
    assert firing_job_ids(carried) == firing_job_ids(state)  # what a lost alert state recalls is unchanged
    for decision in newest:
        assert isinstance(decision, Decision) and carried.latest[decision.key] == state.latest[decision.key]


def test_the_newest_note_of_each_configuration_file_is_kept() -> None:
    notes = [ConfigNote("routes.toml", "line 3: bad", "2026-01-01"), ConfigNote("routes.toml", None, "2026-01-02"),
             ConfigNote("silences.json", "line 1: bad", "2026-01-01")]
    newest = newest_lines(read_ledger(ledger_of(*notes)))
    assert newest == [notes[2], notes[1]]  # oldest first


def test_a_carried_ledger_reads_without_a_problem_and_names_its_archive() -> None:
    data = ledger_of(line("llama-1", at="2026-01-01"), line("llama-2", at="2026-01-02"))
    carried = carried_ledger(read_ledger(data), stamp="2026-02-01T02:00:00+00:00", archive_key=ARCHIVE)
    header = carried_header(carried)
    assert orjson.loads(header) == {"type": "carried", "decided_at": "2026-02-01T02:00:00+00:00", "archive": ARCHIVE}
    assert carried_archive(carried) == ARCHIVE and carried_archive(data) is None
    state = read_ledger(carried)
    assert state.problems == () and [key.job_id for key in state.latest] == ["llama-2"]
    assert carried_ledger(state, stamp="2026-03-01", archive_key=ARCHIVE).endswith(carried[len(header):])  # stable


NOT_HEADERS = [b"", b'{"key": "x"}\n', b"not json\n", b'{"type": "config"}\n', b'{"type": "carried"}']


@pytest.mark.parametrize("data", NOT_HEADERS,
                         ids=["empty", "a decision", "garbage", "config", "no newline"])
def test_only_a_complete_carried_line_is_a_header(data: bytes) -> None:
    assert carried_header(data) == b""
