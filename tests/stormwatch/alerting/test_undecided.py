"""Unchanged jobs: a finding is read from model.json only while the ledger has not settled it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from stormwatch.alerting.ledger import (
    ChannelName,
    ChannelOutcome,
    ChannelStatus,
    Decision,
    FindingKey,
    read_ledger,
    undecided,
)
from stormwatch.analysis.model import IndicatorKind
from stormwatch.severity import Severity

EARLIEST = {"rank": 1, "signal": "alert:critical", "timestamp_ns": 1_700_000_000_000_000_000, "severity": "critical"}
KEY = FindingKey("job-1", IndicatorKind.EARLIEST.value, 1, "alert:critical", 1_700_000_000_000_000_000)


def ledger_of(**channels: ChannelStatus) -> bytes:
    outcomes = {ChannelName(name): ChannelOutcome(status, 1) for name, status in channels.items()}
    return Decision(KEY, Severity.CRITICAL, datetime(2026, 1, 1, tzinfo=UTC).isoformat(), outcomes).to_line()


CASES = [
    ("never decided", b"", (ChannelName.SLACK,), Severity.CRITICAL, True),
    ("sent on the one channel", ledger_of(slack=ChannelStatus.SENT), (ChannelName.SLACK,), Severity.CRITICAL, False),
    ("failed last time", ledger_of(slack=ChannelStatus.FAILED), (ChannelName.SLACK,), Severity.CRITICAL, True),
    ("a channel added since", ledger_of(slack=ChannelStatus.SENT), (ChannelName.SLACK, ChannelName.EMAIL),
     Severity.CRITICAL, True),
    ("no channel, decided", ledger_of(slack=ChannelStatus.NOT_CONFIGURED), (), Severity.CRITICAL, False),
    ("still firing, not sent again", ledger_of(slack=ChannelStatus.STILL_FIRING), (ChannelName.SLACK,),
     Severity.CRITICAL, False),
    ("silenced", ledger_of(slack=ChannelStatus.SILENCED), (ChannelName.SLACK,), Severity.CRITICAL, False),
    ("inhibited", ledger_of(slack=ChannelStatus.INHIBITED), (ChannelName.SLACK,), Severity.CRITICAL, False),
    ("claimed by an audit that may have died", ledger_of(slack=ChannelStatus.IN_FLIGHT), (ChannelName.SLACK,),
     Severity.CRITICAL, True),
]


@pytest.mark.parametrize(("name", "ledger", "channels", "notify_on", "expected"), CASES, ids=[c[0] for c in CASES])
def test_undecided(name: str, ledger: bytes, channels: tuple[ChannelName, ...], notify_on: Severity,
                   expected: bool) -> None:
    indicators = {IndicatorKind.EARLIEST: EARLIEST, IndicatorKind.MOST_SEVERE: None}
    assert undecided(read_ledger(ledger), "job-1", indicators, channels=channels, notify_on=notify_on) is expected


def test_a_job_without_indicators_needs_nothing() -> None:
    assert not undecided(read_ledger(b""), "job-1", {IndicatorKind.EARLIEST: None, IndicatorKind.MOST_SEVERE: None},
                         channels=(ChannelName.SLACK,), notify_on=Severity.WARNING)


def test_an_unreadable_indicator_asks_for_the_model() -> None:
    assert undecided(read_ledger(b""), "job-1", {IndicatorKind.EARLIEST: {"rank": "x"}}, channels=(),
                     notify_on=Severity.CRITICAL)


def test_a_finding_below_the_threshold_once_decided_needs_nothing() -> None:
    warning = {**EARLIEST, "severity": "warning"}
    ledger = read_ledger(ledger_of(slack=ChannelStatus.SKIPPED_BELOW_THRESHOLD))
    assert not undecided(ledger, "job-1", {IndicatorKind.EARLIEST: warning}, channels=(ChannelName.SLACK,),
                         notify_on=Severity.CRITICAL)
    assert undecided(ledger, "job-1", {IndicatorKind.EARLIEST: warning}, channels=(ChannelName.SLACK,),
                     notify_on=Severity.WARNING)  # the threshold was lowered since
