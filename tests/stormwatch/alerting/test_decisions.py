"""Per alert and target: send new, repeat after the interval, resolved when asked, or hold with a status."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from stormwatch.alerting.alert_records import AlertRecord, AlertStatus, TargetState, Transition
from stormwatch.alerting.decisions import Action, Circumstances, held_state, plan_alert, sent_state
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import ChannelStatus
from stormwatch.alerting.observations import Fingerprint
from stormwatch.alerting.policy import AlertPolicy
from stormwatch.alerting.routes import Receiver
from stormwatch.alerting.secret_names import SecretName
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import T0, book_of, make_fact, make_finding, make_regression

HOOK = Receiver(name="default", slack_webhook=SecretName(env="HOOK"))  # slack configured, email not
TEAM = Receiver(name="team", slack_webhook=SecretName(env="TEAM_HOOK"), send_resolved=True)
POLICY = AlertPolicy()
DAY = timedelta(days=1)
SOURCE = Fingerprint("x", AlertKind.OOM, "oom")


def record(*, status: AlertStatus = AlertStatus.FIRING, severity: Severity = Severity.CRITICAL,
           slack: TargetState | None = None, kind: str = "most_severe") -> AlertRecord:
    finding = make_regression("bert-7", job_name="bert") if kind == "regression" else \
        make_finding("llama-8r-1", make_fact(kind, severity=severity))
    base = next(iter(book_of(finding).records.values()))
    targets = {} if slack is None else {"slack": slack}
    return replace(base, status=status, targets=targets, resolved_at=None if status is AlertStatus.FIRING
                   else (T0 + DAY).isoformat())


def told(days_ago: float, status: ChannelStatus = ChannelStatus.SENT) -> TargetState:
    return TargetState(status, (T0 - timedelta(days=days_ago)).isoformat())


def facts(transition: Transition = Transition.STILL_FIRING, *, silenced: bool = False,
          inhibited: bool = False) -> Circumstances:
    return Circumstances(transition, "s-12345678" if silenced else None, SOURCE if inhibited else None)


CASES = [
    ("new", record(), facts(Transition.NEW), Action.SEND_NEW, ChannelStatus.SENT),
    ("still firing within the interval", record(slack=told(3)), facts(), Action.HOLD, ChannelStatus.STILL_FIRING),
    ("still firing after the interval", record(slack=told(7)), facts(), Action.SEND_REPEAT, ChannelStatus.SENT),
    ("firing, not observed again, past the interval", record(slack=told(9)), facts(Transition.NONE), Action.HOLD,
     ChannelStatus.STILL_FIRING),
    ("first send failed: retried", record(slack=TargetState(ChannelStatus.FAILED)), facts(Transition.NONE),
     Action.SEND_NEW, ChannelStatus.SENT),
    ("a repeat failed: retried", record(slack=told(8, ChannelStatus.FAILED)), facts(Transition.NONE),
     Action.SEND_REPEAT, ChannelStatus.SENT),
    ("below the threshold", record(severity=Severity.WARNING), facts(Transition.NEW), Action.HOLD,
     ChannelStatus.SKIPPED_BELOW_THRESHOLD),
    ("a fleet kind ignores the threshold", record(kind="regression"), facts(Transition.NEW), Action.SEND_NEW,
     ChannelStatus.SENT),
    ("silenced", record(), facts(Transition.NEW, silenced=True), Action.HOLD, ChannelStatus.SILENCED),
    ("inhibited", record(), facts(Transition.NEW, inhibited=True), Action.HOLD, ChannelStatus.INHIBITED),
    ("silenced after it was sent", record(slack=told(9)), facts(silenced=True), Action.HOLD, ChannelStatus.SILENCED),
    ("the silence ended: never told, so sent", record(slack=TargetState(ChannelStatus.SILENCED)), facts(),
     Action.SEND_NEW, ChannelStatus.SENT),
    ("a claim left unsettled, never told: no wait on any clock", record(
        slack=TargetState(ChannelStatus.IN_FLIGHT, None, None, 0, None, "tok", T0.isoformat())),
     facts(), Action.SEND_NEW, ChannelStatus.SENT),
    ("a send whose audit stopped, told before: a repeat", record(
        slack=TargetState(ChannelStatus.FAILED, told(9).notified_at, None, 0, "claimed by an audit that stopped")),
     facts(), Action.SEND_REPEAT, ChannelStatus.SENT),
    ("resolved, not asked", record(status=AlertStatus.RESOLVED, slack=told(2)), facts(Transition.RESOLVED),
     Action.HOLD, ChannelStatus.RESOLVED),
]


@pytest.mark.parametrize(("case", "alert", "known", "action", "status"), CASES, ids=[c[0] for c in CASES])
def test_firing_and_resolved_decisions(case: str, alert: AlertRecord, known: Circumstances, action: Action,
                                       status: ChannelStatus) -> None:
    plans = plan_alert(alert, (HOOK,), known, policy=POLICY, notify_on=Severity.CRITICAL, now=T0)
    slack, email = plans
    assert (slack.target, slack.action, slack.status) == ("slack", action, status)
    assert email.target == "email" and email.action is Action.HOLD  # the default receiver's email: unconfigured


RESOLVED = [
    ("asked by the receiver", TEAM, told(2), facts(Transition.RESOLVED), Action.SEND_RESOLVED),
    ("asked, but the receiver was never told it fired", TEAM, None, facts(Transition.RESOLVED), Action.HOLD),
    ("asked, but silenced", TEAM, told(2), facts(Transition.RESOLVED, silenced=True), Action.HOLD),
    ("asked, and its resolved message failed last time", TEAM, TargetState(ChannelStatus.FAILED, T0.isoformat()),
     facts(Transition.NONE), Action.SEND_RESOLVED),
    ("an old resolution, settled", TEAM, TargetState(ChannelStatus.SENT, "a", "b"), facts(Transition.NONE), None),
    ("the receiver declines, the policy asks", replace(TEAM, send_resolved=False), told(2),
     facts(Transition.RESOLVED), Action.HOLD),
]


@pytest.mark.parametrize(("case", "receiver", "slack", "known", "action"), RESOLVED, ids=[c[0] for c in RESOLVED])
def test_resolved_messages(case: str, receiver: Receiver, slack: TargetState | None, known: Circumstances,
                           action: Action | None) -> None:
    alert = record(status=AlertStatus.RESOLVED)
    alert = replace(alert, targets={} if slack is None else {"team/slack": slack})
    plans = plan_alert(alert, (receiver,), known, policy=AlertPolicy(notify_resolved=True),
                       notify_on=Severity.CRITICAL, now=T0)
    assert [plan.action for plan in plans] == ([] if action is None else [action])


def test_the_policy_asks_for_resolved_messages_when_the_receiver_does_not_say() -> None:
    alert = replace(record(status=AlertStatus.RESOLVED), targets={"slack": told(1)})
    asked = plan_alert(alert, (HOOK,), facts(Transition.RESOLVED), policy=AlertPolicy(notify_resolved=True),
                       notify_on=Severity.CRITICAL, now=T0)
    assert asked[0].action is Action.SEND_RESOLVED


def test_a_shorter_repeat_interval_repeats_sooner() -> None:
    plans = plan_alert(record(slack=told(1)), (HOOK,), facts(), policy=AlertPolicy(repeat_interval=timedelta(hours=12)),
                       notify_on=Severity.CRITICAL, now=T0)
    assert plans[0].action is Action.SEND_REPEAT


def test_states_after_decisions() -> None:
    alert = record()
    new, = [plan for plan in plan_alert(alert, (HOOK,), facts(Transition.NEW), policy=POLICY,
                                        notify_on=Severity.CRITICAL, now=T0) if plan.action.sends]
    ok = sent_state(None, new, ok=True, attempts=1, error=None, now="t1")
    assert (ok.status, ok.notified_at, ok.resolved_at) == (ChannelStatus.SENT, "t1", None)
    failed = sent_state(told(3), new, ok=False, attempts=3, error="HTTP 500", now="t1")
    assert (failed.status, failed.notified_at, failed.error) == (ChannelStatus.FAILED, told(3).notified_at, "HTTP 500")
    hold = plan_alert(record(slack=told(3)), (HOOK,), facts(), policy=POLICY, notify_on=Severity.CRITICAL, now=T0)[0]
    assert held_state(told(3), hold) == told(3)  # still firing after a send: nothing new to record
