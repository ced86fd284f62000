"""``notifications.jsonl``: lines round trip, appends never rewrite, bad lines are skipped, pending jobs."""

from __future__ import annotations

import orjson
import pytest

from stormwatch.alerting.ledger import (
    DEFAULT_CHANNELS,
    ChannelName,
    ChannelOutcome,
    ChannelStatus,
    Decision,
    FindingKey,
    append_lines,
    firing_job_ids,
    pending_job_ids,
    read_ledger,
)
from stormwatch.severity import Severity


def decision(job_id: str, slack: ChannelStatus, email: ChannelStatus, severity: str = "critical") -> Decision:
    key = FindingKey(job_id, "most_severe", 3, "alert:critical", 1_700_000_003_500_000_000)
    channels = {ChannelName.SLACK: ChannelOutcome(slack, 1), ChannelName.EMAIL: ChannelOutcome(email, 0, "boom")}
    return Decision(key, Severity(severity), "2026-01-02T02:00:00+00:00", channels)


def test_ledger_lines_round_trip_and_the_latest_line_wins() -> None:
    first = decision("job-1", ChannelStatus.FAILED, ChannelStatus.NOT_CONFIGURED)
    later = decision("job-1", ChannelStatus.SENT, ChannelStatus.NOT_CONFIGURED)
    state = read_ledger(append_lines(None, [first, later]))
    assert state.latest == {first.key: later} and state.problems == ()
    assert orjson.loads(first.to_line())["key"] == "job-1|most_severe|3|alert:critical|1700000003500000000"


@pytest.mark.parametrize(
    ("existing", "expected_prefix"),
    [(None, b""), (b"", b""), (b'{"x":1}\n', b'{"x":1}\n'), (b'{"torn', b'{"torn\n')],
)
def test_appending_never_rewrites_existing_bytes(existing: bytes | None, expected_prefix: bytes) -> None:
    line = decision("job-1", ChannelStatus.SENT, ChannelStatus.SENT).to_line()
    combined = append_lines(existing, [decision("job-1", ChannelStatus.SENT, ChannelStatus.SENT)])
    assert combined == expected_prefix + line
    assert append_lines(existing, []) == (existing or b"")


def test_unreadable_lines_and_unknown_channels_are_tolerated() -> None:
    line = orjson.loads(decision("job-1", ChannelStatus.SENT, ChannelStatus.SENT).to_line())
    line["channels"]["pager"] = {"status": "sent"}
    data = b"\n".join([b"garbage", orjson.dumps(line), b'{"key": 1}', b""])
    state = read_ledger(data)
    assert list(state.latest) == [decision("job-1", ChannelStatus.SENT, ChannelStatus.SENT).key]
    assert state.problems == (
        "notifications.jsonl line 1: unreadable (JSONDecodeError); skipped",
        "notifications.jsonl line 3: unreadable (KeyError); skipped",
    )


def test_pending_jobs_are_those_not_yet_sent_on_a_configured_channel() -> None:
    data = append_lines(
        None,
        [
            decision("sent-both", ChannelStatus.SENT, ChannelStatus.SENT),
            decision("slack-failed", ChannelStatus.FAILED, ChannelStatus.SENT),
            decision("email-unconfigured", ChannelStatus.SENT, ChannelStatus.NOT_CONFIGURED),
            decision(
                "warning-only", ChannelStatus.SKIPPED_BELOW_THRESHOLD, ChannelStatus.SKIPPED_BELOW_THRESHOLD, "warning"
            ),
        ],
    )
    assert pending_job_ids(data, channels=[ChannelName.SLACK]) == {"slack-failed"}
    assert pending_job_ids(data, channels=list(DEFAULT_CHANNELS)) == {"slack-failed", "email-unconfigured"}
    assert pending_job_ids(data, channels=[ChannelName.SLACK], notify_on=Severity.WARNING) == {
        "slack-failed",
        "warning-only",
    }
    assert pending_job_ids(None, channels=list(DEFAULT_CHANNELS)) == set()


def line(job_id: str, *, state: str | None, at: str, alert: str | None = "llama|oom|oom") -> Decision:
    key = FindingKey(job_id, "oom", 0, "oom", 1)
    return Decision(key, Severity.CRITICAL, at, {ChannelName.SLACK: ChannelOutcome(ChannelStatus.SENT, 1)},
                    alert=alert, state=state)


@pytest.mark.parametrize(("lines", "firing"), [
    ([line("llama-1", state="firing", at="2026-01-01")], {"llama-1"}),
    ([line("llama-1", state="firing", at="2026-01-01"), line("llama-2", state="still_firing", at="2026-01-02")],
     {"llama-2"}),  # the alert moved on to the newer run
    ([line("llama-1", state="firing", at="2026-01-01"), line("llama-2", state="resolved", at="2026-01-02")], set()),
    ([line("llama-1", state=None, at="2026-01-01", alert=None)], {"llama-1"}),  # a line from before alerts
    ([], set()),
], ids=["firing", "moved", "resolved", "no alert member", "empty"])
def test_the_jobs_whose_alerts_the_ledger_shows_firing(lines: list[Decision], firing: set[str]) -> None:
    assert firing_job_ids(read_ledger(append_lines(None, lines))) == firing
