"""Claims left by an audit that stopped: settled at once from what the ledger recorded of them.

An audit claims its sends in alerts.json before it sends (:func:`~stormwatch.alerting.decisions.claimed_state`),
then, after sending, writes the ledger lines (each carrying its claim token) and only then settles
alerts.json. Only the holder of the storage's audit lease notifies, so a claim still present when
the next audit reads the state is never a send under way: it belongs to an audit that stopped. The
ledger says what its sends came to:

- the line records the target ``sent``: the target was told, at the line's time (a resolution:
  resolved then); nothing is sent again, and a sent alert never reads as new;
- the line records another outcome (``failed``): that outcome, retried as any failure is;
- no line: the audit stopped between its claim and its ledger write, so the send may or may not have
  reached the receiver. It counts as failed and is sent again (a repeat when the target had been
  told before). This is the window that remains: a receiver may get one message twice.

Nothing waits out a timeout, and no clock is read: the decision is the same at any ``--as-of`` time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from stormwatch.alerting.alert_file import AlertBook
from stormwatch.alerting.alert_records import AlertStatus, TargetState, Transition
from stormwatch.alerting.ledger import ChannelStatus, Decision

#: The error a send claimed by a stopped audit, with no ledger line, is retried with.
UNRECORDED = "claimed by an audit that stopped before recording the send; sent again"


@dataclass(frozen=True)
class SettledClaims:
    """The book with every left-over claim settled; counts of claims found sent, failed and unrecorded."""

    book: AlertBook
    sent: int = 0
    failed: int = 0
    unrecorded: int = 0

    def problems(self) -> tuple[str, ...]:
        """One line for the audit's summary when claims were left over, else none."""
        found = self.sent + self.failed + self.unrecorded
        if not found:
            return ()
        return (f"{found} send{'s' * (found != 1)} claimed by an audit that stopped: {self.sent} found sent in "
                f"notifications.jsonl, {self.failed} failed, {self.unrecorded} not recorded and sent again",)


def settle_claims(book: AlertBook, claims: Mapping[str, Mapping[tuple[str, str], Decision]]) -> SettledClaims:
    """Every target of ``book`` holding a claim, settled from ``claims`` (the ledger's, by token)."""
    records = dict(book.records)
    sent = failed = unrecorded = 0
    for fingerprint, record in book.records.items():
        targets = dict(record.targets)
        for target, state in record.targets.items():
            if state.claim is None:
                continue
            line = claims.get(state.claim, {}).get((fingerprint.text, target))
            outcome = None if line is None else line.channels.get(target)
            if line is None or outcome is None:
                unrecorded += 1
                targets[target] = TargetState(status=ChannelStatus.FAILED, notified_at=state.notified_at,
                                              resolved_at=state.resolved_at, error=UNRECORDED)
            elif outcome.status is ChannelStatus.SENT:
                sent += 1
                targets[target] = _told(state, line, resolution=record.status is AlertStatus.RESOLVED,
                                        attempts=outcome.attempts)
            else:
                failed += 1
                targets[target] = TargetState(status=outcome.status, notified_at=state.notified_at,
                                              resolved_at=state.resolved_at, attempts=outcome.attempts,
                                              error=outcome.error)
        if targets != record.targets:
            records[fingerprint] = replace(record, targets=targets)
    return SettledClaims(AlertBook(records, book.runs, book.problems), sent=sent, failed=failed,
                         unrecorded=unrecorded)


def _told(state: TargetState, line: Decision, *, resolution: bool, attempts: int) -> TargetState:
    if resolution or line.state == Transition.RESOLVED.value:
        return TargetState(status=ChannelStatus.SENT, notified_at=state.notified_at, resolved_at=line.decided_at,
                           attempts=attempts)
    return TargetState(status=ChannelStatus.SENT, notified_at=line.decided_at, attempts=attempts)
