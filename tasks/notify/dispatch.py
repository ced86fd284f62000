"""Notifications for an audit: alerts per fingerprint, routed, silenced, inhibited, grouped, sent once.

The notify step calls :func:`notify_jobs` with the findings of the jobs diagnosed now (and the
fleet's regressions and suspect devices), the current ``notifications.jsonl`` and ``alerts.json``,
the routes and silences; then writes back ``NotifyResult.ledger`` and ``NotifyResult.alerts``.
Steps, all pure but the sends:

1. observe (:mod:`stormwatch.alerting.observations`): each job name evaluated by its latest run;
   fleet kinds when the fleet's sections were computed;
2. advance the alert state (:mod:`stormwatch.alerting.alert_state`): new alerts fire, seen ones are
   still firing, evaluated ones not seen resolve;
3. inhibit, route, silence and decide per target (:mod:`stormwatch.alerting.inhibition`, ``.routes``,
   ``.silences``, ``.decisions``): send new, repeat after ``repeat_interval``, resolved when asked, or hold;
4. claim the sends in the alert state (``claim``: the caller's conditional write; refused means
   another audit changed the state meanwhile: nothing is sent), send (``stormwatch.alerting.grouping``,
   :mod:`.sending`), settle each target and append one ledger line per finding whose decision changed.

A failed send is retried by the next call; a rerun with the same findings sends nothing and
appends nothing. Nothing raises out of :func:`notify_jobs` for a channel's failure.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from stormwatch.alerting import collector
from stormwatch.alerting.alert_file import AlertBook, read_book, rebuild_note
from stormwatch.alerting.alert_records import AlertRecord, AlertStatus, TargetState, Transition
from stormwatch.alerting.alert_state import advance, recalled, seeded
from stormwatch.alerting.claims import settle_claims
from stormwatch.alerting.decisions import (
    Circumstances,
    TargetPlan,
    claimed_state,
    held_state,
    plan_alert,
    sent_state,
)
from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.grouping import Outgoing, outgoing
from stormwatch.alerting.inhibition import Inhibitions, inhibit
from stormwatch.alerting.ledger import (
    DEFAULT_RECEIVER,
    ChannelOutcome,
    ChannelStatus,
    ConfigNote,
    Decision,
    FindingKey,
    LedgerState,
    append_lines,
    firing_job_ids,
    read_ledger,
)
from stormwatch.alerting.observations import Fingerprint, RunMark, observe
from stormwatch.alerting.overview import alert_overview
from stormwatch.alerting.routes import Receiver, RouteTable
from stormwatch.alerting.silences import SilenceBook
from stormwatch.tasks.notify.delivery import Delivery
from stormwatch.tasks.notify.sending import send_all
from stormwatch.tasks.notify.settings import NotifySettings

log = logging.getLogger("stormwatch.tasks.notify.dispatch")
Claim = Callable[[bytes], bool]
Settled = Mapping[tuple[Fingerprint, str], TargetState]


@dataclass(frozen=True)
class NotifyResult:
    """What one call decided. ``ledger``: the full new notifications.jsonl (old bytes + new lines);
    ``alerts``: the new alerts.json; ``settled``: the targets this call claimed and their outcome (to
    merge into a state another audit wrote meanwhile, by ``token``); ``overview``: fleet.json's
    ``alerts`` member.

    ``sent``/``failed``: messages delivered / not delivered in this call; ``skipped``: findings newly
    recorded without any send. ``problems`` (also on the index): unreadable ledger lines and alert records,
    a rebuilt alert state, claims a stopped audit left, and the
    configuration errors. ``refused``: why nothing was sent (the claim was refused). No field holds a secret.
    """

    ledger: bytes
    decisions: tuple[Decision, ...]
    sent: int
    failed: int
    skipped: int
    problems: tuple[str, ...] = ()
    alerts: bytes = b""
    token: str = ""
    settled: Settled = field(default_factory=dict)
    overview: Mapping[str, object] = field(default_factory=dict)
    notes: tuple[ConfigNote, ...] = ()
    refused: str | None = None
    rebuilt: str | None = None  # why the alert state was rebuilt from the ledger (a damaged or lost alerts.json)

    @property
    def changed(self) -> bool:
        return bool(self.decisions or self.notes)

    def summary(self) -> str:
        if self.refused:
            return f"notifications: nothing sent ({self.refused})"
        return f"notifications: {self.sent} sent, {self.failed} failed, {self.skipped} findings recorded without a send"


def default_receiver(settings: NotifySettings) -> Receiver:
    """The flags' (or environment's, or blocks') webhook and addresses, as the ``default`` receiver."""
    return Receiver(name=DEFAULT_RECEIVER, slack_webhook=settings.slack_webhook, smtp_url=settings.smtp_url,
                    email_to=settings.email_to, email_from=settings.email_from)


@dataclass(frozen=True)
class _Decided:
    """Step 3's result: the records as decided (silence, inhibition, severity applied) and every plan."""

    records: dict[Fingerprint, AlertRecord]
    plans: dict[Fingerprint, list[TargetPlan]]
    inhibitions: Inhibitions
    transitions: Mapping[Fingerprint, Transition]


def _decide(book: AlertBook, transitions: Mapping[Fingerprint, Transition], routes: RouteTable,
            silences: SilenceBook, settings: NotifySettings, now: datetime) -> _Decided:
    inhibitions = inhibit(book.records)
    records: dict[Fingerprint, AlertRecord] = {}
    plans: dict[Fingerprint, list[TargetPlan]] = {}
    for fingerprint in sorted(book.records, key=Fingerprint.sort_key):
        record = book.records[fingerprint]
        source = inhibitions.by.get(fingerprint)
        record = replace(record, severity=inhibitions.severity.get(fingerprint, record.severity),
                         inhibited_by=None if source is None else source.text)
        silence = silences.silencing(record.labels, now)
        if record.status is AlertStatus.FIRING or transitions[fingerprint] is Transition.RESOLVED:
            record = replace(record, silenced_by=None if silence is None else silence.id)
        facts = Circumstances(transitions[fingerprint], record.silenced_by, source)
        records[fingerprint] = record
        decided = plan_alert(record, routes.receivers_for(record.labels), facts, policy=settings.alerting,
                             notify_on=settings.notify_on, now=now)
        if decided:
            plans[fingerprint] = decided
    return _Decided(records=records, plans=plans, inhibitions=inhibitions, transitions=transitions)


def _with_targets(decided: _Decided, state_of: Callable[[AlertRecord, TargetPlan], TargetState]) -> AlertBook:
    records = dict(decided.records)
    for fingerprint, plans in decided.plans.items():
        record = records[fingerprint]
        targets = {plan.target: state_of(record, plan) for plan in plans}
        records[fingerprint] = replace(record, targets=targets)
    return AlertBook(records)


def _ledger_key(record: AlertRecord) -> FindingKey:
    """A firing alert's line is its latest finding's; a resolution's carries the resolution time."""
    if record.status is AlertStatus.FIRING or record.resolved_at is None:
        return record.key
    stamp_ns = int(datetime.fromisoformat(record.resolved_at).timestamp()) * 1_000_000_000
    return replace(record.key, timestamp_ns=stamp_ns)


def _ledger_state(record: AlertRecord, transition: Transition) -> Transition:
    """What a ledger line says the alert did: resolved (now, or a resolution retried), fired, or fires still."""
    if record.status is AlertStatus.RESOLVED:
        return Transition.RESOLVED
    return Transition.NEW if transition is Transition.NEW else Transition.STILL_FIRING


def _lines(decided: _Decided, settled: Settled, state: LedgerState, stamp: str, token: str
           ) -> tuple[list[Decision], int]:
    """The ledger lines whose decision changed (or that sent), and how many of them sent nothing."""
    lines, skipped = [], 0
    for fingerprint, plans in decided.plans.items():
        record = decided.records[fingerprint]
        key = _ledger_key(record)
        previous = state.latest.get(key)
        channels: dict[str, ChannelOutcome] = {}
        attempted = False
        for plan in plans:
            outcome = settled.get((fingerprint, plan.target))
            if outcome is not None and plan.action.sends:
                attempted = True
                channels[plan.target] = ChannelOutcome(outcome.status, outcome.attempts, outcome.error)
            elif plan.status is ChannelStatus.STILL_FIRING and previous is not None \
                    and previous.status(plan.target) is ChannelStatus.SENT:
                channels[plan.target] = ChannelOutcome(ChannelStatus.SENT)  # this finding was the one sent
            else:
                channels[plan.target] = ChannelOutcome(plan.status)
        same = previous is not None and {name: item.status for name, item in previous.channels.items()} == {
            name: item.status for name, item in channels.items()}
        if attempted or not same:
            state_now = _ledger_state(record, decided.transitions[fingerprint])
            lines.append(Decision(key=key, severity=record.severity, decided_at=stamp, channels=channels,
                                  alert=fingerprint.text, state=state_now.value, silenced_by=record.silenced_by,
                                  inhibited_by=record.inhibited_by, claim=token if attempted else None))
            skipped += 0 if attempted else 1
    return lines, skipped


def _notes(state: LedgerState, config: Mapping[str, str | None], stamp: str) -> list[ConfigNote]:
    """A line when a configuration file's error appears, changes or goes away."""
    out = []
    for file, error in config.items():
        previous = state.config.get(file)
        if (previous.error if previous else None) != error:
            out.append(ConfigNote(file, error, stamp))
    return out


def _claimed(decided: _Decided, runs: Mapping[str, RunMark], *, token: str, now: str) -> bytes:
    """The alert state with this call's sends claimed (``token``), the other targets held."""

    def state_of(record: AlertRecord, plan: TargetPlan) -> TargetState:
        previous = record.targets.get(plan.target)
        return claimed_state(previous, plan, token=token, now=now) if plan.action.sends else held_state(previous, plan)

    return AlertBook(_with_targets(decided, state_of).records, runs).to_bytes()


def _settled_result(decided: _Decided, runs: Mapping[str, RunMark], messages: Sequence[Outgoing],
                    deliveries: Sequence[Delivery], *, ledger: bytes | None, state: LedgerState,
                    problems: tuple[str, ...], token: str, table: RouteTable, config: Mapping[str, str | None],
                    now: datetime) -> NotifyResult:
    """After the sends: each target's outcome, the new alert state, ledger lines and overview."""
    stamp = now.isoformat()
    settled: dict[tuple[Fingerprint, str], TargetState] = {}
    plan_of = {(plan.fingerprint, plan.target): plan for plans in decided.plans.values() for plan in plans}
    for item, delivery in zip(messages, deliveries, strict=True):
        for fingerprint in item.alerts:
            plan = plan_of[fingerprint, item.target]
            previous = decided.records[fingerprint].targets.get(item.target)
            settled[fingerprint, item.target] = sent_state(previous, plan, ok=delivery.ok, attempts=delivery.attempts,
                                                           error=delivery.error, now=stamp)

    def state_of(record: AlertRecord, plan: TargetPlan) -> TargetState:
        done = settled.get((record.fingerprint, plan.target))
        return done if done is not None else held_state(record.targets.get(plan.target), plan)

    new_book = AlertBook(_with_targets(decided, state_of).records, runs)
    decisions, skipped = _lines(decided, settled, state, stamp, token)
    notes = _notes(state, config, stamp)
    return NotifyResult(
        ledger=append_lines(ledger, [*notes, *decisions]),
        decisions=tuple(decisions),
        sent=sum(1 for item in deliveries if item.ok),
        failed=sum(1 for item in deliveries if not item.ok),
        skipped=skipped,
        problems=problems,
        alerts=new_book.to_bytes(),
        token=token,
        settled=settled,
        overview=alert_overview(new_book, table, now=now, problems=list(problems)),
        notes=tuple(notes),
    )


def notify_jobs(
    jobs: Sequence[JobFinding],
    *,
    ledger: bytes | None,
    settings: NotifySettings,
    now: datetime,
    alerts: bytes | None = None,
    routes: RouteTable | None = None,
    silences: SilenceBook | None = None,
    fleet_evaluated: bool = False,
    config: Mapping[str, str | None] | None = None,
    claim: Claim | None = None,
    repairs: Sequence[str] = (),
    revive: Callable[[frozenset[str]], Sequence[JobFinding]] | None = None,
    ledger_state: LedgerState | None = None,
) -> NotifyResult:
    """Decide, send and record notifications; never raises for a channel's failure.

    ``jobs``: findings of jobs diagnosed now, and fleet findings (counted when ``fleet_evaluated``);
    ``ledger`` / ``alerts``: the current notifications.jsonl / alerts.json (None: absent; without an
    alert state, alerts the ledger shows sent count as told); ``now``: the decision time (naive means
    UTC); ``routes``: None sends everything to the default receiver; ``config``: configuration files
    read (name -> error text, None when fine), recorded in the ledger when their state changes;
    ``claim``: called with the alert state holding this call's claims before anything is sent;
    ``repairs``: lines saying what the caller repaired in the files read (reported with the problems);
    ``revive``: when the alert state is missing or unusable (its firing alerts are then recalled from
    the ledger, :func:`recalled`), called with the job ids (not among ``jobs``) whose alerts the
    ledger shows firing, for those jobs' stored findings: observed again, their records hold the
    runs' findings rather than what a ledger line names; ``ledger_state``: ``ledger`` read already.
    """
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    stamp = now.isoformat()
    token = uuid.uuid4().hex
    with collector.paused():  # here and after the sends, never around them: see collector (bench/README.md)
        state = read_ledger(ledger) if ledger_state is None else ledger_state
        book = read_book(alerts)
        rebuilt = rebuild_note(alerts, book, has_ledger=bool(state.latest))
        left_over = settle_claims(book, state.claims)  # claims of an audit that stopped: see claims
        book = left_over.book
        names = settings.alerting.job_names()
        if alerts is None or rebuilt is not None:  # no usable state: the ledger's firing alerts are recalled
            book = recalled(book, state.latest, names)
            wanted = firing_job_ids(state) - {job.job_id for job in jobs}
            jobs = [*jobs, *revive(wanted)] if wanted and revive is not None else jobs
        observed = observe(jobs, names=names, known_runs=book.runs, fleet_evaluated=fleet_evaluated)
        advanced, transitions = advance(book, observed, now=now)
        if alerts is None or rebuilt is not None:  # no usable state: what the ledger shows sent stays told
            advanced = seeded(advanced, transitions, state.latest, names)
        table = routes or RouteTable.only(default_receiver(settings))
        decided = _decide(advanced, transitions, table, silences or SilenceBook(), settings, now)
        sending = any(plan.action.sends for plans in decided.plans.values() for plan in plans)
        claimed = _claimed(decided, advanced.runs, token=token, now=stamp) if sending and claim is not None else None
        messages = outgoing([plan for plans in decided.plans.values() for plan in plans], decided.records,
                            decided.inhibitions, group_above=settings.alerting.group_above, digest=settings.digest,
                            notify_on=settings.notify_on)
    problems = (*repairs, *state.problems, *book.problems, *((rebuilt,) if rebuilt else ()), *left_over.problems(),
                *(error for error in (config or {}).values() if error))
    for problem in problems:
        log.warning("notify: %s", problem)
    if claimed is not None and claim is not None and not claim(claimed):
        reason = "the alert state changed meanwhile (another audit is notifying)"
        log.warning("notify: nothing sent: %s", reason)
        return NotifyResult(ledger=ledger or b"", decisions=(), sent=0, failed=0, skipped=0, problems=problems,
                            token=token, refused=reason)
    deliveries: list[Delivery] = send_all(messages, settings) if messages else []
    with collector.paused():
        result = _settled_result(decided, advanced.runs, messages, deliveries, ledger=ledger, state=state,
                                 problems=problems, token=token, table=table, config=config or {}, now=now)
    result = replace(result, rebuilt=rebuilt)
    log.info("notify: %s", result.summary())
    return result
