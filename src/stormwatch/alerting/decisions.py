"""What to do, per alert and target, in one audit: send (new, repeat, resolved) or hold with a status.

For a firing alert, in order: below ``notify_on`` (fleet-wide kinds and leaks excepted,
:data:`~.kinds.ALWAYS_SENT`) -> skipped; inhibited;
silenced; the target not configured; never told in this episode (or its first send failed) -> send; observed again
now and last told at least ``repeat_interval`` ago, or a repeat that failed -> send again; on a channel
that must be refreshed (Alertmanager, whose alerts lapse at their ``endsAt``), last told at least its
refresh interval ago, observed again or not -> send again; else still firing. For an alert that
resolved now (or whose resolved message failed): a resolved message when the receiver
(``send_resolved``) or the policy asks for it (Alertmanager and PagerDuty always: they keep the alert
open otherwise), the alert is not silenced and the target had been told it fired; else nothing to say.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from stormwatch.alerting.alert_records import AlertRecord, AlertStatus, TargetState, Transition
from stormwatch.alerting.ledger import ChannelName, ChannelStatus
from stormwatch.alerting.observations import Fingerprint
from stormwatch.alerting.policy import AlertPolicy
from stormwatch.alerting.routes import Receiver
from stormwatch.severity import Severity


class Action(StrEnum):
    SEND_NEW = "firing"
    SEND_REPEAT = "still_firing"
    SEND_RESOLVED = "resolved"
    HOLD = "hold"

    @property
    def sends(self) -> bool:
        return self is not Action.HOLD


@dataclass(frozen=True)
class TargetPlan:
    """One target's decision for one alert; ``status``: what the ledger records when nothing is sent."""

    fingerprint: Fingerprint
    receiver: Receiver
    target: str
    channel: ChannelName
    action: Action
    status: ChannelStatus


@dataclass(frozen=True)
class Circumstances:
    """What the audit knows about one alert beyond its record."""

    transition: Transition
    silenced_by: str | None
    inhibited_by: Fingerprint | None


def _elapsed(since: str | None, now: datetime, interval: timedelta) -> bool:
    """Whether ``interval`` has passed since ``since`` (ISO 8601; None: long ago)."""
    return since is None or now - datetime.fromisoformat(since) >= interval


def _firing(record: AlertRecord, target: TargetState | None, *, configured: bool, facts: Circumstances,
            policy: AlertPolicy, notify_on: Severity, now: datetime, refresh_s: float | None = None
            ) -> tuple[Action, ChannelStatus]:
    if not record.fingerprint.kind.always_sent and record.severity.level < notify_on.level:
        return Action.HOLD, ChannelStatus.SKIPPED_BELOW_THRESHOLD
    if facts.inhibited_by is not None:
        return Action.HOLD, ChannelStatus.INHIBITED
    if facts.silenced_by is not None:
        return Action.HOLD, ChannelStatus.SILENCED
    if not configured:
        return Action.HOLD, ChannelStatus.NOT_CONFIGURED
    if target is None or target.notified_at is None:
        return Action.SEND_NEW, ChannelStatus.SENT
    if target.status in (ChannelStatus.FAILED, ChannelStatus.IN_FLIGHT):
        return Action.SEND_REPEAT, ChannelStatus.SENT  # a repeat that failed or was cut short
    if facts.transition is Transition.STILL_FIRING and _elapsed(target.notified_at, now, policy.repeat_interval):
        return Action.SEND_REPEAT, ChannelStatus.SENT
    if refresh_s is not None and _elapsed(target.notified_at, now, timedelta(seconds=refresh_s)):
        return Action.SEND_REPEAT, ChannelStatus.SENT  # keep it active in a receiver where it lapses
    return Action.HOLD, ChannelStatus.STILL_FIRING


def _resolved(record: AlertRecord, target: TargetState | None, receiver: Receiver, channel: ChannelName, *,
              configured: bool, facts: Circumstances, policy: AlertPolicy) -> tuple[Action, ChannelStatus] | None:
    """None: nothing to decide (an old resolution, settled)."""
    retry = target is not None and target.status is ChannelStatus.FAILED and target.resolved_at is None
    if facts.transition is not Transition.RESOLVED and not retry:
        return None
    asked = receiver.wants_resolved(channel)
    wanted = asked if asked is not None else policy.notify_resolved
    told = target is not None and target.notified_at is not None
    if not wanted or not told or facts.silenced_by is not None:
        return Action.HOLD, ChannelStatus.RESOLVED
    if not configured:
        return Action.HOLD, ChannelStatus.NOT_CONFIGURED
    return Action.SEND_RESOLVED, ChannelStatus.SENT


def plan_alert(
    record: AlertRecord,
    receivers: tuple[Receiver, ...],
    facts: Circumstances,
    *,
    policy: AlertPolicy,
    notify_on: Severity,
    now: datetime,
) -> list[TargetPlan]:
    """Every routed target's decision for ``record`` (resolved alerts with nothing to decide give none)."""
    plans = []
    for receiver in receivers:
        usable = set(receiver.channels)
        for target, channel in receiver.targets:
            previous = record.targets.get(target)
            configured = channel in usable
            if record.status is AlertStatus.FIRING:
                decided: tuple[Action, ChannelStatus] | None = _firing(
                    record, previous, configured=configured, facts=facts, policy=policy, notify_on=notify_on, now=now,
                    refresh_s=receiver.refresh_s(channel))
            else:
                decided = _resolved(record, previous, receiver, channel, configured=configured, facts=facts,
                                    policy=policy)
            if decided is not None:
                action, status = decided
                plans.append(TargetPlan(fingerprint=record.fingerprint, receiver=receiver, target=target,
                                        channel=channel, action=action, status=status))
    return plans


def held_state(previous: TargetState | None, plan: TargetPlan) -> TargetState:
    """A target's state after a decision that sends nothing (a claim by another audit is kept)."""
    base = previous or TargetState(status=plan.status)
    if plan.status is ChannelStatus.IN_FLIGHT:
        return base
    if plan.status is ChannelStatus.STILL_FIRING and base.status is ChannelStatus.SENT:
        return base  # told already; nothing new to record
    return TargetState(status=plan.status, notified_at=base.notified_at, resolved_at=base.resolved_at)


def claimed_state(previous: TargetState | None, plan: TargetPlan, *, token: str, now: str) -> TargetState:
    base = previous or TargetState(status=ChannelStatus.IN_FLIGHT)
    return replace(base, status=ChannelStatus.IN_FLIGHT, claim=token, claimed_at=now)


def sent_state(previous: TargetState | None, plan: TargetPlan, *, ok: bool, attempts: int, error: str | None,
               now: str) -> TargetState:
    """A target's state after its send: told now (firing or resolved), or failed (retried next audit)."""
    base = previous or TargetState(status=ChannelStatus.FAILED)
    if not ok:
        return TargetState(status=ChannelStatus.FAILED, notified_at=base.notified_at, resolved_at=base.resolved_at,
                           attempts=attempts, error=error)
    if plan.action is Action.SEND_RESOLVED:
        return TargetState(status=ChannelStatus.SENT, notified_at=base.notified_at, resolved_at=now, attempts=attempts)
    return TargetState(status=ChannelStatus.SENT, notified_at=now, attempts=attempts)

