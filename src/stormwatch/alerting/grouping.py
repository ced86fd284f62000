"""Grouping: the messages of one target (a receiver's channel) in one audit.

A target's due alerts become entries: a job's alerts due together make one entry (its latest run,
its OOM, what it inhibits), each fleet finding one entry (a suspect device lists the jobs it
inhibits), a job name's resolved alerts one entry (each resolved fleet finding its own). With more
than ``group_above`` due alerts, or with ``digest``, the target gets one message holding every
entry; otherwise one message per entry.
Entries are ordered new and still-firing jobs by job id, then fleet findings, then resolutions.
A message to a machine-readable channel (Alertmanager, PagerDuty, the JSON webhook, Teams) also
carries one :class:`~.notices.AlertNotice` per alert.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stormwatch.alerting.alert_records import AlertRecord
from stormwatch.alerting.decisions import Action, TargetPlan
from stormwatch.alerting.inhibition import Inhibitions
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import DEFAULT_CHANNELS, ChannelName
from stormwatch.alerting.messages import Entry, EntryState, Message
from stormwatch.alerting.notices import AlertNotice, notice_of
from stormwatch.alerting.observations import Fingerprint
from stormwatch.alerting.routes import Receiver
from stormwatch.severity import Severity


@dataclass(frozen=True)
class Outgoing:
    """One message to send on one target, and the alerts whose state its delivery settles."""

    receiver: Receiver
    target: str
    channel: ChannelName
    message: Message
    alerts: tuple[Fingerprint, ...]
    notices: tuple[AlertNotice, ...] = ()  # one per alert, for the channels that are not Slack or email


def inhibited_line(record: AlertRecord) -> str:
    """``job x: Most severe alert:critical on rank 2 (critical)``; a regression says what it is
    (``...: hidden gap peak bytes 9.00 GiB is 300% above ...; explained by suspect device node-bad/2``)."""
    fact = record.fact
    line = f"job {record.job.job_id}: {fact.label} {fact.signal} on {fact.where} ({record.severity.value})"
    return f"{line}: {fact.details}" if fact.kind == AlertKind.REGRESSION and fact.details else line


def _inhibited(records: Sequence[AlertRecord], inhibitions: Inhibitions, book: Mapping[Fingerprint, AlertRecord]
               ) -> tuple[str, ...]:
    """What the entry's alerts inhibit: another job's findings one line each; the entry's own job's
    (listed in its section already) as one line naming them."""
    own, others = [], []
    for record in records:
        for target in inhibitions.folded(record.fingerprint):
            muted = book[target]
            if muted.job.job_id == record.job.job_id:
                own.append(f"{muted.fact.label.lower()} ({muted.fact.signal})")
            else:
                others.append(inhibited_line(muted))
    head = [f"this job's {', '.join(own)}: symptoms of the above, not sent on their own"] if own else []
    return (*head, *others)


def _firing_entry(records: Sequence[AlertRecord], actions: Mapping[Fingerprint, Action],
                  inhibitions: Inhibitions, book: Mapping[Fingerprint, AlertRecord]) -> Entry:
    first = records[0]
    state = EntryState.NEW if any(actions[r.fingerprint] is Action.SEND_NEW for r in records) \
        else EntryState.STILL_FIRING
    extra = tuple(r.fact for r in records if r.fingerprint.kind in (AlertKind.OOM, AlertKind.LEAK))
    inhibited = _inhibited(records, inhibitions, book)
    return Entry(state=state, job=first.job, job_name=first.fingerprint.job_name, extra=extra,
                 since=min(r.started_at for r in records), inhibited=inhibited, alerts=len(records))


def entries_for(due: Mapping[Fingerprint, Action], book: Mapping[Fingerprint, AlertRecord],
                inhibitions: Inhibitions) -> list[tuple[Entry, tuple[Fingerprint, ...]]]:
    """The entries of a target's due alerts, each with the alerts it carries."""
    jobs: dict[str, list[AlertRecord]] = {}
    fleet: list[AlertRecord] = []
    resolved: dict[tuple[str, str], list[AlertRecord]] = {}  # per job name (a device: per device)
    for fingerprint in sorted(due, key=Fingerprint.sort_key):
        record = book[fingerprint]
        if due[fingerprint] is Action.SEND_RESOLVED:
            subject = "" if fingerprint.kind.fleet_wide else fingerprint.job_name
            resolved.setdefault((subject, fingerprint.text if not subject else ""), []).append(record)
        elif fingerprint.kind.fleet_wide:
            fleet.append(record)
        else:
            jobs.setdefault(record.job.job_id, []).append(record)
    out = []
    for job_id in sorted(jobs):
        records = jobs[job_id]
        out.append((_firing_entry(records, due, inhibitions, book), tuple(r.fingerprint for r in records)))
    for record in fleet:
        out.append((_firing_entry([record], due, inhibitions, book), (record.fingerprint,)))
    for records in resolved.values():
        first = records[0]
        entry = Entry(state=EntryState.RESOLVED, job=first.job, job_name=first.fingerprint.job_name,
                      extra=tuple(r.fact for r in records), since=min(r.started_at for r in records),
                      alerts=len(records))
        out.append((entry, tuple(r.fingerprint for r in records)))
    return out


def outgoing(plans: Sequence[TargetPlan], book: Mapping[Fingerprint, AlertRecord], inhibitions: Inhibitions, *,
             group_above: int, digest: bool, notify_on: Severity) -> list[Outgoing]:
    """Every message to send, target by target (in the order targets first appear in ``plans``)."""
    targets: dict[str, tuple[TargetPlan, dict[Fingerprint, Action]]] = {}
    for plan in plans:
        if plan.action.sends:
            targets.setdefault(plan.target, (plan, {}))[1][plan.fingerprint] = plan.action
    out = []
    for target, (first, due) in targets.items():
        entries = entries_for(due, book, inhibitions)
        name = first.receiver.name
        batches = [entries] if digest or len(due) > group_above else [[item] for item in entries]
        for batch in batches:
            message = Message(name, tuple(entry for entry, _ in batch), notify_on)
            alerts = tuple(fingerprint for _, carried in batch for fingerprint in carried)
            notices = () if first.channel in DEFAULT_CHANNELS else tuple(
                notice_of(book[fingerprint], repeat=due[fingerprint] is Action.SEND_REPEAT) for fingerprint in alerts)
            out.append(Outgoing(receiver=first.receiver, target=target, channel=first.channel, message=message,
                                alerts=alerts, notices=notices))
    return out
