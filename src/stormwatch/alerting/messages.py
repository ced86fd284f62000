"""What one notification message holds, whatever the channel: entries about jobs (or fleet findings).

An :class:`Entry` is one job's due alerts (new, or still firing and due again), one fleet finding
(a regression, a suspect device with the jobs it inhibits), or one alert that resolved. A
:class:`Message` is one entry, or every due entry of a receiver when it has more than
``group_above`` due alerts (or ``--digest``). Renderers (``stormwatch.tasks.notify.slack``, ``.email``) escape
every telemetry string; the texts built here take an ``esc`` function for that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from stormwatch.alerting.findings import IndicatorFact, JobFinding
from stormwatch.severity import Severity

Escape = Callable[[object, int], str]


class EntryState(StrEnum):
    NEW = "new"
    STILL_FIRING = "still firing"
    RESOLVED = "resolved"


@dataclass(frozen=True)
class Entry:
    """``job``: the job (or fleet finding) in its latest observed run; ``extra``: facts of the entry's
    alerts that are not among the job's indicators (its OOM; for a resolved entry, the alerts that
    resolved); ``since``: when the oldest alert of it started firing (ISO 8601); ``inhibited``:
    one-line descriptions of the alerts folded into this one; ``alerts``: how many alerts it carries."""

    state: EntryState
    job: JobFinding
    job_name: str
    extra: tuple[IndicatorFact, ...] = ()
    since: str | None = None
    inhibited: tuple[str, ...] = ()
    alerts: int = 1


@dataclass(frozen=True)
class Message:
    receiver: str
    entries: tuple[Entry, ...]
    notify_on: Severity

    @property
    def alerts(self) -> int:
        return sum(entry.alerts for entry in self.entries)


def new_jobs(jobs: Sequence[JobFinding], *, notify_on: Severity, receiver: str = "default") -> Message:
    """A message announcing ``jobs`` as new findings (one job, or a digest of several)."""
    entries = tuple(Entry(state=EntryState.NEW, job=job, job_name=job.job_id) for job in jobs)
    return Message(receiver, entries, notify_on)


def day(stamp: str | None) -> str:
    """``2026-10-03`` of an ISO 8601 time ("?" when unknown)."""
    return stamp[:10] if stamp else "?"


def headline(entry: Entry, esc: Escape) -> str:
    """One line naming the entry: ``job x is critical: alert:critical on rank 0``; ``still firing since
    2026-10-03: job x ...``; ``resolved: alert:critical of llama-8r``."""
    if entry.state is EntryState.RESOLVED:
        signals = ", ".join(esc(fact.signal, 100) for fact in entry.extra) or "finding"
        subject = f"{esc(entry.job.host, 100)} device {entry.extra[0].rank}" if entry.job.host and entry.extra \
            else esc(entry.job_name or entry.job.job_id, 150)
        return f"resolved: {signals} of {subject}"
    job = entry.job
    facts = (*entry.extra, *job.indicators)
    worst = max(facts, key=lambda item: item.severity.level, default=None)
    cause = "" if worst is None else f": {esc(worst.signal, 100)} on {worst.where}"
    attempt = "" if job.attempt is None else f" ({esc(job.attempt.short, 100)})"
    line = f"job {esc(job.job_id, 150)} is {esc(job.verdict, 20)}{cause}{attempt}"
    return f"still firing since {day(entry.since)}: {line}" if entry.state is EntryState.STILL_FIRING else line


def resolved_text(entry: Entry, esc: Escape) -> str:
    """The resolution in words: what is no longer seen, where it was last seen, since when it fired."""
    kinds = "; ".join(f"{fact.label} {esc(fact.signal, 100)} ({fact.severity.value})" for fact in entry.extra)
    return (f"{kinds} of {esc(entry.job_name or entry.job.job_id, 150)} is no longer seen; last seen in "
            f"{esc(entry.job.job_id, 150)}; firing since {day(entry.since)}")


def title(message: Message) -> str:
    """The message's heading (a Slack header, an email's first line)."""
    entries = message.entries
    if len(entries) == 1:
        state = entries[0].state
        if state is EntryState.RESOLVED:
            return "Stormwatch: resolved GPU-memory finding"
        prefix = "still firing: " if state is EntryState.STILL_FIRING else ""
        return f"Stormwatch: {prefix}{message.notify_on.value} GPU-memory finding"
    counts = {state: sum(1 for entry in entries if entry.state is state) for state in EntryState}
    if counts[EntryState.NEW] == len(entries):
        return f"Stormwatch: {len(entries)} jobs with {message.notify_on.value} GPU-memory findings"
    listed = ", ".join(f"{count} {state.value}" for state, count in counts.items() if count)
    return f"Stormwatch: {len(entries)} alerts ({listed})"
