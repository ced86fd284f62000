"""The alert state's transitions: an audit's observations applied, a ledger's sends seeded, outcomes merged.

``reports/alerts.json`` holds an :class:`~.alert_file.AlertBook`: one
:class:`~.alert_records.AlertRecord` per fingerprint and, per job name, the run last evaluated
(:mod:`.alert_file` says how it is stored).

:func:`advance` applies an audit's observations: new alerts fire, observed ones are still firing,
firing ones in the audit's scope that were not observed resolve. Resolved records older than
:data:`KEEP_RESOLVED` with nothing left to send are dropped. Times are ISO 8601 UTC strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from stormwatch.alerting.alert_file import AlertBook, read_book
from stormwatch.alerting.alert_records import AlertRecord, AlertStatus, TargetState, Transition, kept_finding
from stormwatch.alerting.findings import IndicatorFact, JobFinding
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import ChannelStatus, Decision, FindingKey
from stormwatch.alerting.observations import Fingerprint, Observed, fingerprint_of_key
from stormwatch.history.job_names import JobNamePattern

KEEP_RESOLVED = timedelta(days=30)
_TOLD = frozenset({ChannelStatus.SENT, ChannelStatus.STILL_FIRING})  # a target's line once it was told


def _pending(record: AlertRecord) -> bool:
    """A resolved record with a resolution still to retry."""
    return any(target.status is ChannelStatus.FAILED and target.notified_at and not target.resolved_at
               for target in record.targets.values())


def advance(book: AlertBook, observed: Observed, *, now: datetime) -> tuple[AlertBook, dict[Fingerprint, Transition]]:
    """The book after an audit's observations, and what happened to each record."""
    stamp = now.isoformat()
    records = dict(book.records)
    transitions = {fingerprint: Transition.NONE for fingerprint in records}
    seen = set()
    kept: dict[tuple[int, int], JobFinding] = {}  # one kept finding per job and rank, shared by its alerts
    for item in observed.observations:
        seen.add(item.fingerprint)
        previous = records.get(item.fingerprint)
        job = kept.get((id(item.job), item.fact.rank))
        if job is None:
            job = kept[id(item.job), item.fact.rank] = kept_finding(item.job, rank=item.fact.rank)
        if previous is None or previous.status is AlertStatus.RESOLVED:
            records[item.fingerprint] = AlertRecord(fingerprint=item.fingerprint, status=AlertStatus.FIRING,
                                                    severity=item.severity, started_at=stamp, last_seen_at=stamp,
                                                    key=item.key, fact=item.fact, job=job)
            transitions[item.fingerprint] = Transition.NEW
        else:
            records[item.fingerprint] = replace(previous, severity=item.severity, last_seen_at=stamp, key=item.key,
                                                fact=item.fact, job=job)
            transitions[item.fingerprint] = Transition.STILL_FIRING
    for fingerprint, record in list(records.items()):
        if fingerprint in seen or not observed.scope.covers(fingerprint) or record.status is not AlertStatus.FIRING:
            continue
        records[fingerprint] = replace(record, status=AlertStatus.RESOLVED, resolved_at=stamp)
        transitions[fingerprint] = Transition.RESOLVED
    horizon = (now - KEEP_RESOLVED).isoformat()
    for fingerprint, record in list(records.items()):
        if (record.status is AlertStatus.RESOLVED and (record.resolved_at or "") < horizon
                and not _pending(record)):
            del records[fingerprint]
            del transitions[fingerprint]
    runs = {**book.runs, **observed.runs}
    return AlertBook(records, runs, book.problems), transitions


def seeded(book: AlertBook, transitions: Mapping[Fingerprint, Transition], latest: Mapping[FindingKey, Decision],
           names: JobNamePattern) -> AlertBook:
    """The book with new alerts marked as already told wherever the ledger (written before the alert
    state existed) shows a finding of theirs sent: upgrading never sends an alert again."""
    sent_at: dict[Fingerprint, dict[str, str]] = {}
    for key, decision in latest.items():
        fingerprint = fingerprint_of_key(key, names)
        if fingerprint is None:
            continue
        for target, outcome in decision.channels.items():
            if outcome.status in _TOLD:
                told = sent_at.setdefault(fingerprint, {})
                told[target] = max(told.get(target, ""), decision.decided_at)
    records = dict(book.records)
    for fingerprint, record in book.records.items():
        if transitions.get(fingerprint) is Transition.NEW and fingerprint in sent_at:
            targets = {target: TargetState(status=ChannelStatus.SENT, notified_at=at)
                       for target, at in sent_at[fingerprint].items()}
            records[fingerprint] = replace(record, targets=targets)
    return AlertBook(records, book.runs, book.problems)


def recalled(book: AlertBook, latest: Mapping[FindingKey, Decision], names: JobNamePattern) -> AlertBook:
    """The book with every alert the ledger knows that it lacks, re-created from the alert's newest line:
    a state rebuilt from the ledger keeps alerts whose run is not observed now (unchanged, or diagnosed
    again and overwritten), so they still resolve, and the resolved ones (dropped after
    :data:`KEEP_RESOLVED` as ever). Targets are as that line left them: told ones ``sent`` at its
    time, a failed resolution still due. Only lines the alerting layer wrote (with a ``state``)
    count; :func:`seeded` covers older ledgers. A re-created record holds what the line names (kind,
    rank, signal, time, severity); an observation now replaces it with the run's finding."""
    newest: dict[Fingerprint, Decision] = {}
    for key, decision in latest.items():
        fingerprint = fingerprint_of_key(key, names)
        if fingerprint is None or decision.state is None:
            continue
        known = newest.get(fingerprint)
        if known is None or known.decided_at <= decision.decided_at:
            newest[fingerprint] = decision
    records = dict(book.records)
    for fingerprint, decision in newest.items():
        if fingerprint not in records:
            records[fingerprint] = _from_line(fingerprint, decision)
    return AlertBook(records, book.runs, book.problems)


def _target_from_line(outcome: ChannelStatus, at: str, *, resolved: bool) -> TargetState:
    if outcome in _TOLD:
        return TargetState(status=ChannelStatus.SENT, notified_at=at, resolved_at=at if resolved else None)
    if resolved and outcome is ChannelStatus.FAILED:  # the resolution failed: it was told it fired
        return TargetState(status=outcome, notified_at=at)
    return TargetState(status=outcome)


def _from_line(fingerprint: Fingerprint, decision: Decision) -> AlertRecord:
    key, at = decision.key, decision.decided_at
    resolved = decision.state == Transition.RESOLVED.value
    fact = IndicatorFact(kind=key.kind, rank=key.rank, severity=decision.severity, signal=key.signal,
                         timestamp_ns=key.timestamp_ns, phase_path=None, details="", since_start_ns=None)
    device = fingerprint.kind is AlertKind.SUSPECT_HOST
    job = JobFinding(job_id=key.job_id, verdict=decision.severity.value, summary="", indicators=(fact,),
                     missing_ranks=(), expected_ranks=0, started_at_ns=None,
                     host=fingerprint.host if device else None)
    targets = {target: _target_from_line(outcome.status, at, resolved=resolved)
               for target, outcome in decision.channels.items()}
    return AlertRecord(fingerprint=fingerprint, status=AlertStatus.RESOLVED if resolved else AlertStatus.FIRING,
                       severity=decision.severity, started_at=at, last_seen_at=at, key=key, fact=fact, job=job,
                       resolved_at=at if resolved else None, silenced_by=decision.silenced_by,
                       inhibited_by=decision.inhibited_by, targets=targets)


def merged(data: bytes | None, token: str, settled: Mapping[tuple[Fingerprint, str], TargetState]) -> bytes | None:
    """``data`` (an alert state another audit wrote after this one claimed its sends) with this one's
    outcomes applied to the targets still holding its claim ``token``; None when ``data`` is unreadable."""
    book = read_book(data)
    if book.problems and not book.records:
        return None
    records = dict(book.records)
    for (fingerprint, target), outcome in settled.items():
        record = records.get(fingerprint)
        current = None if record is None else record.targets.get(target)
        if record is not None and current is not None and current.claim == token:
            records[fingerprint] = replace(record, targets={**record.targets, target: outcome})
    return AlertBook(records, book.runs).to_bytes()
