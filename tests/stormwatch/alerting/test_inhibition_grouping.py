"""Inhibition (job-level OOM / missing ranks, suspect devices) and grouping into messages, as tables."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stormwatch.alerting.alert_file import AlertBook
from stormwatch.alerting.alert_records import AlertStatus
from stormwatch.alerting.decisions import Action, TargetPlan
from stormwatch.alerting.grouping import entries_for, outgoing
from stormwatch.alerting.inhibition import inhibit
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import ChannelName, ChannelStatus
from stormwatch.alerting.messages import EntryState
from stormwatch.alerting.observations import Fingerprint
from stormwatch.alerting.routes import Receiver
from stormwatch.alerting.secret_names import SecretName
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import book_of, make_fact, make_finding, make_regression, make_suspect

WARN = make_fact("earliest", severity=Severity.WARNING, signal="alert:warning")
CRIT = make_fact("most_severe")


def fp(name: str, kind: AlertKind, signal: str = "alert:critical") -> Fingerprint:
    return Fingerprint(name, kind, signal)


INHIBITION = [
    ("an OOM mutes its job's per-rank findings",
     [make_finding("vit-1", WARN, CRIT, oom_rank=0)],
     {fp("vit", AlertKind.EARLIEST, "alert:warning"): fp("vit", AlertKind.OOM, "oom"),
      fp("vit", AlertKind.MOST_SEVERE): fp("vit", AlertKind.OOM, "oom")}),
    ("missing ranks mute them too",
     [make_finding("t5-1", CRIT, missing=(3,))],
     {fp("t5", AlertKind.MOST_SEVERE): fp("t5", AlertKind.MISSING_RANKS, "missing_ranks")}),
    ("an OOM before missing ranks",
     [make_finding("t5-1", CRIT, missing=(3,), oom_rank=1)],
     {fp("t5", AlertKind.MOST_SEVERE): fp("t5", AlertKind.OOM, "oom")}),
    ("another job's OOM mutes nothing there",
     [make_finding("vit-1", oom_rank=0), make_finding("bert-1", CRIT)],
     {fp("vit", AlertKind.MOST_SEVERE): fp("vit", AlertKind.OOM, "oom")}),
    ("a suspect device mutes the findings on its ranks only",
     [make_suspect("node-7", 1), make_finding("resnet-1", make_fact(rank=1), hosts=("node-0", "node-7")),
      make_finding("t5-1", make_fact(rank=0), hosts=("node-0", "node-7"))],
     {fp("resnet", AlertKind.MOST_SEVERE): Fingerprint("", AlertKind.SUSPECT_HOST, "suspect_host", "node-7", 1)}),
    ("the same host, another device: nothing",
     [make_suspect("node-7", 2), make_finding("resnet-1", make_fact(rank=1), hosts=("node-0", "node-7"))],
     {}),
    ("a regression mutes nothing", [make_regression("bert-2", job_name="bert"), make_finding("bert-2", CRIT)], {}),
]


@pytest.mark.parametrize(("case", "findings", "expected"), INHIBITION, ids=[c[0] for c in INHIBITION])
def test_inhibition(case: str, findings: list, expected: dict) -> None:
    assert dict(inhibit(book_of(*findings).records).by) == expected


def test_a_source_takes_the_worst_severity_of_what_it_mutes_and_resolved_alerts_do_not_inhibit() -> None:
    book = book_of(make_finding("t5-1", CRIT, missing=(3,)))
    missing = fp("t5", AlertKind.MISSING_RANKS, "missing_ranks")
    assert book.records[missing].severity is Severity.WARNING
    assert inhibit(book.records).severity == {missing: Severity.CRITICAL}
    resolved = {**book.records, missing: replace(book.records[missing], status=AlertStatus.RESOLVED)}
    assert inhibit(resolved).by == {}


TEAM = Receiver(name="team", slack_webhook=SecretName(env="TEAM_HOOK"))


def plans(book: AlertBook, action: Action = Action.SEND_NEW) -> list[TargetPlan]:
    return [TargetPlan(key, TEAM, "team/slack", ChannelName.SLACK, action, ChannelStatus.SENT)
            for key in sorted(book.records, key=Fingerprint.sort_key)]


def test_entries_one_per_job_with_its_oom_and_what_it_mutes() -> None:
    book = book_of(make_finding("vit-1", WARN, CRIT, oom_rank=0), make_finding("bert-1", CRIT),
                   make_suspect("node-7", 1), make_finding("resnet-1", make_fact(rank=1), hosts=("n", "node-7")))
    inhibitions = inhibit(book.records)
    due = {key: Action.SEND_NEW for key in book.records if key not in inhibitions.by}
    entries = entries_for(due, book.records, inhibitions)
    assert [(entry.job.job_id, entry.alerts) for entry, _ in entries] == [
        ("bert-1", 1), ("vit-1", 1), ("host node-7 device 1", 1)]
    vit, device = entries[1][0], entries[2][0]
    assert [fact.kind for fact in vit.extra] == ["oom"]
    assert vit.inhibited == ("this job's earliest (alert:warning), most severe (alert:critical): symptoms of the "
                             "above, not sent on their own",)
    assert device.inhibited == ("job resnet-1: Most severe alert:critical on rank 1 (critical)",)


@pytest.mark.parametrize(("jobs", "group_above", "digest", "messages"), [
    (3, 3, False, [1, 1, 1]),  # three alerts, not more than 3: one message each
    (4, 3, False, [4]),  # more than 3: one message listing them
    (2, 0, False, [2]),
    (1, 3, True, [1]),  # --digest: always one message
    (2, 3, True, [2]),
])
def test_grouping_by_count(jobs: int, group_above: int, digest: bool, messages: list[int]) -> None:
    book = book_of(*(make_finding(f"job{n}-1") for n in range(jobs)))
    sent = outgoing(plans(book), book.records, inhibit(book.records), group_above=group_above, digest=digest,
                    notify_on=Severity.CRITICAL)
    assert [len(item.message.entries) for item in sent] == messages
    assert sorted((key for item in sent for key in item.alerts), key=Fingerprint.sort_key) == sorted(
        book.records, key=Fingerprint.sort_key)


def test_a_group_counts_alerts_and_mixes_states() -> None:
    book = book_of(*(make_finding(f"job{n}-1") for n in range(3)), make_regression("bert-2", job_name="bert"))
    keys = sorted(book.records, key=Fingerprint.sort_key)
    mixed = [replace(plan, action=action) for plan, action in
             zip(plans(book), [Action.SEND_NEW, Action.SEND_REPEAT, Action.SEND_RESOLVED, Action.SEND_NEW],
                 strict=True)]
    (message,) = outgoing(mixed, book.records, inhibit(book.records), group_above=3, digest=False,
                          notify_on=Severity.CRITICAL)
    states = [entry.state for entry in message.message.entries]
    assert states.count(EntryState.NEW) == 2 and EntryState.STILL_FIRING in states and EntryState.RESOLVED in states
    assert message.alerts and set(message.alerts) == set(keys)
