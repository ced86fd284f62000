"""Claims left by an audit that stopped, settled at once from the ledger: sent stays told (never new),
failed is retried, unrecorded is sent again (the window), and nothing without a claim changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stormwatch.alerting.alert_file import AlertBook
from stormwatch.alerting.alert_records import AlertRecord, AlertStatus, TargetState, Transition
from stormwatch.alerting.claims import UNRECORDED, settle_claims
from stormwatch.alerting.ledger import ChannelOutcome, ChannelStatus, Decision, read_ledger
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import T0, book_of, make_fact, make_finding

CLAIMED_AT = T0.isoformat()
DECIDED_AT = "2026-01-02T02:00:07+00:00"
EARLIER = "2025-12-20T02:00:00+00:00"


def claimed(*, status: AlertStatus = AlertStatus.FIRING, notified_at: str | None = None,
            token: str = "tok-dead") -> AlertRecord:
    base = next(iter(book_of(make_finding("llama-8r-1", make_fact("most_severe"))).records.values()))
    state = TargetState(ChannelStatus.IN_FLIGHT, notified_at=notified_at, claim=token, claimed_at=CLAIMED_AT)
    return replace(base, status=status, targets={"slack": state, "email": TargetState(ChannelStatus.SENT, EARLIER)})


def ledger_of(record: AlertRecord, outcome: ChannelStatus | None, *, state: Transition = Transition.NEW,
              token: str = "tok-dead") -> bytes:
    if outcome is None:
        return b""
    line = Decision(key=record.key, severity=Severity.CRITICAL, decided_at=DECIDED_AT,
                    channels={"slack": ChannelOutcome(outcome, 1, None if outcome is ChannelStatus.SENT else "boom")},
                    alert=record.fingerprint.text, state=state.value, claim=token)
    return line.to_line()


CASES = [
    ("recorded sent: told then, not again", AlertStatus.FIRING, None, ChannelStatus.SENT, Transition.NEW,
     TargetState(ChannelStatus.SENT, notified_at=DECIDED_AT, attempts=1), (1, 0, 0)),
    ("a recorded repeat keeps the new time", AlertStatus.FIRING, EARLIER, ChannelStatus.SENT, Transition.STILL_FIRING,
     TargetState(ChannelStatus.SENT, notified_at=DECIDED_AT, attempts=1), (1, 0, 0)),
    ("a recorded resolution", AlertStatus.RESOLVED, EARLIER, ChannelStatus.SENT, Transition.RESOLVED,
     TargetState(ChannelStatus.SENT, notified_at=EARLIER, resolved_at=DECIDED_AT, attempts=1), (1, 0, 0)),
    ("recorded failed: retried as any failure", AlertStatus.FIRING, None, ChannelStatus.FAILED, Transition.NEW,
     TargetState(ChannelStatus.FAILED, attempts=1, error="boom"), (0, 1, 0)),
    ("not recorded: sent again", AlertStatus.FIRING, EARLIER, None, Transition.NEW,
     TargetState(ChannelStatus.FAILED, notified_at=EARLIER, error=UNRECORDED), (0, 0, 1)),
]


@pytest.mark.parametrize(("status", "notified_at", "outcome", "line_state", "settled", "counts"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_left_over_claim_is_settled_from_the_ledger(
        status: AlertStatus, notified_at: str | None, outcome: ChannelStatus | None, line_state: Transition,
        settled: TargetState, counts: tuple[int, int, int]) -> None:
    record = claimed(status=status, notified_at=notified_at)
    book = AlertBook({record.fingerprint: record})
    result = settle_claims(book, read_ledger(ledger_of(record, outcome, state=line_state)).claims)
    targets = result.book.records[record.fingerprint].targets
    assert targets["slack"] == settled and targets["slack"].claim is None
    assert targets["email"] == record.targets["email"]  # held targets are left as they were
    assert (result.sent, result.failed, result.unrecorded) == counts
    (problem,) = result.problems()
    assert problem.startswith("1 send claimed by an audit that stopped: ")


def test_another_claims_line_does_not_settle_this_one() -> None:
    record = claimed(token="tok-dead")
    result = settle_claims(AlertBook({record.fingerprint: record}),
                           read_ledger(ledger_of(record, ChannelStatus.SENT, token="tok-other")).claims)
    assert result.book.records[record.fingerprint].targets["slack"].error == UNRECORDED


def test_a_book_without_claims_is_left_alone() -> None:
    book = book_of(make_finding("llama-8r-1", make_fact("most_severe")))
    result = settle_claims(book, {})
    assert result.book.records == book.records and result.problems() == ()
