"""What an audit observed, as alerts see it: each finding's fingerprint, labels and ledger key.

An alert is identified by its :class:`Fingerprint`: the job *name* (not the run's job id, so the
next night's run of the same job is the same alert), the kind and the signal, plus host and
device for a suspect device. Kinds (:class:`AlertKind`): a job's first-cause indicators
(``earliest``, ``most_severe``: per-rank findings), the job-level ``oom`` (its first OOM marker)
and ``missing_ranks``, and the fleet-wide ``regression`` and ``suspect_host``.

:func:`observe` turns the findings passed to the notify step into observations and says what
they *evaluate* (:class:`Scope`): a job name is evaluated by its latest run among those
diagnosed now (latest by start time, then job id), unless the alert state already evaluated a
later run of that name (an old run re-diagnosed with ``--force`` changes nothing); fleet-wide kinds
are evaluated only when the caller computed the fleet's sections (the nightly audit, not post-job).
An alert in scope that is not observed has resolved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from stormwatch.history.job_names import JobNamePattern
from stormwatch.severity import Severity
from stormwatch.tasks.notify.findings import FLEET_KINDS, IndicatorFact, JobFinding
from stormwatch.tasks.notify.ledger import FindingKey


class AlertKind(StrEnum):
    EARLIEST = "earliest"
    MOST_SEVERE = "most_severe"
    OOM = "oom"
    MISSING_RANKS = "missing_ranks"
    REGRESSION = "regression"
    SUSPECT_HOST = "suspect_host"

    @property
    def per_rank(self) -> bool:
        """A first-cause indicator on one rank (what job-level and host alerts inhibit)."""
        return self in (AlertKind.EARLIEST, AlertKind.MOST_SEVERE)

    @property
    def fleet_wide(self) -> bool:
        """Evaluated from the fleet's sections, sent whatever ``notify_on``."""
        return self.value in FLEET_KINDS


@dataclass(frozen=True)
class Fingerprint:
    """An alert's identity. ``job_name`` is empty for a suspect device (``host``, ``device``)."""

    job_name: str
    kind: AlertKind
    signal: str
    host: str | None = None
    device: int | None = None

    def sort_key(self) -> tuple[str, str, str, str, int]:
        device = -1 if self.device is None else self.device
        return (self.job_name, self.kind.value, self.signal, self.host or "", device)

    @property
    def text(self) -> str:
        """For people, logs and the ledger's ``alert`` member: ``llama-8r|most_severe|alert:critical``,
        a device ``|suspect_host|suspect_host|node-3#1``."""
        parts = [self.job_name, self.kind.value, self.signal]
        if self.host is not None:
            parts.append(f"{self.host}#{'' if self.device is None else self.device}")
        return "|".join(parts)


@dataclass(frozen=True)
class Labels:
    """What routes and silences match on. ``job_id``: the run that showed the alert ("" for a device)."""

    job_id: str
    job_name: str
    kind: AlertKind
    severity: Severity
    signal: str
    host: str | None


_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True)
class RunMark:
    """A run of a job name; runs order by start time (ns; -1 when unknown), then job id with its numbers
    compared as numbers (``run-10`` after ``run-9``)."""

    started_at_ns: int
    job_id: str

    @classmethod
    def of(cls, job: JobFinding) -> RunMark:
        return cls(-1 if job.started_at_ns is None else job.started_at_ns, job.job_id)

    def _key(self) -> tuple[int, tuple[tuple[int, str], ...]]:
        parts = _DIGITS.split(self.job_id)
        return self.started_at_ns, tuple((int(part), "") if index % 2 else (-1, part) for index, part in
                                         enumerate(parts))

    def __lt__(self, other: RunMark) -> bool:
        return self._key() < other._key()


@dataclass(frozen=True)
class Observation:
    """One finding of this audit: its alert, its ledger key, what a message says (``fact`` of ``job``)."""

    fingerprint: Fingerprint
    key: FindingKey
    severity: Severity
    fact: IndicatorFact
    job: JobFinding

    @property
    def labels(self) -> Labels:
        fingerprint = self.fingerprint
        job_id = "" if fingerprint.kind is AlertKind.SUSPECT_HOST else self.job.job_id
        return Labels(job_id, fingerprint.job_name, fingerprint.kind, self.severity, fingerprint.signal,
                      fingerprint.host)


@dataclass(frozen=True)
class Scope:
    """What this audit evaluated: these job names' job-level kinds, and the fleet-wide kinds or not."""

    job_names: frozenset[str]
    fleet: bool

    def covers(self, fingerprint: Fingerprint) -> bool:
        if fingerprint.kind.fleet_wide:
            return self.fleet
        return fingerprint.job_name in self.job_names


@dataclass(frozen=True)
class Observed:
    observations: tuple[Observation, ...]
    scope: Scope
    runs: Mapping[str, RunMark]  # the run evaluated per job name (only names evaluated now)


def _job_observations(name: str, job: JobFinding) -> list[Observation]:
    out = []
    for fact in job.indicators:
        if fact.kind in (AlertKind.EARLIEST, AlertKind.MOST_SEVERE):
            kind = AlertKind(fact.kind)
            key = FindingKey(job.job_id, fact.kind, fact.rank, fact.signal, fact.timestamp_ns)
            out.append(Observation(Fingerprint(name, kind, fact.signal), key, fact.severity, fact, job))
    if job.oom is not None:
        oom = job.oom
        key = FindingKey(job.job_id, AlertKind.OOM.value, oom.rank, oom.signal, oom.timestamp_ns)
        out.append(Observation(Fingerprint(name, AlertKind.OOM, oom.signal), key, oom.severity, oom, job))
    if job.missing_ranks:
        first = job.missing_ranks[0]
        fact = IndicatorFact(kind=AlertKind.MISSING_RANKS.value, rank=first, severity=Severity.WARNING,
                             signal="missing_ranks", timestamp_ns=0, phase_path=None,
                             details=f"ranks {job.missing_text} of {job.expected_ranks} missing", since_start_ns=None)
        key = FindingKey(job.job_id, fact.kind, first, fact.signal, 0)
        out.append(Observation(Fingerprint(name, AlertKind.MISSING_RANKS, fact.signal), key, fact.severity, fact, job))
    return out


def _fleet_observations(job: JobFinding, names: JobNamePattern) -> list[Observation]:
    out = []
    for fact in job.indicators:
        key = FindingKey(job.job_id, fact.kind, fact.rank, fact.signal, fact.timestamp_ns)
        if fact.kind == AlertKind.SUSPECT_HOST:
            fingerprint = Fingerprint("", AlertKind.SUSPECT_HOST, fact.signal, job.host or "", fact.rank)
        elif fact.kind == AlertKind.REGRESSION:
            fingerprint = Fingerprint(names.name_of(job.job_id), AlertKind.REGRESSION, fact.signal)
        else:
            continue
        out.append(Observation(fingerprint, key, fact.severity, fact, job))
    return out


_DEVICE_ID = re.compile(r"^host (.*) device (-?\d+)$", re.DOTALL)


def fingerprint_of_key(key: FindingKey, names: JobNamePattern) -> Fingerprint | None:
    """The alert a ledger key belongs to (None for a kind this version does not know): how the
    alert state is seeded from a ledger written before it existed."""
    try:
        kind = AlertKind(key.kind)
    except ValueError:
        return None
    if kind is AlertKind.SUSPECT_HOST:
        found = _DEVICE_ID.match(key.job_id)
        return None if found is None else Fingerprint("", kind, key.signal, found.group(1), int(found.group(2)))
    return Fingerprint(names.name_of(key.job_id), kind, key.signal)


def is_fleet_finding(job: JobFinding) -> bool:
    """A regression or suspect-device finding (:mod:`.fleet_findings`), not a job's own."""
    return bool(job.indicators) and all(fact.kind in FLEET_KINDS for fact in job.indicators)


def observe(
    findings: Sequence[JobFinding],
    *,
    names: JobNamePattern,
    known_runs: Mapping[str, RunMark],
    fleet_evaluated: bool,
) -> Observed:
    """The observations of ``findings`` (jobs diagnosed now, and fleet findings) and their scope.

    ``known_runs``: the run last evaluated per job name (from the alert state). Fleet findings
    count only when ``fleet_evaluated``. The first observation of a fingerprint wins."""
    latest: dict[str, JobFinding] = {}
    fleet: list[JobFinding] = []
    for job in findings:
        if is_fleet_finding(job):
            fleet.append(job)
            continue
        name = names.name_of(job.job_id)
        known = known_runs.get(name)
        if known is not None and RunMark.of(job) < known:
            continue  # an older run than the one the state already holds for this name
        if name not in latest or RunMark.of(latest[name]) < RunMark.of(job):
            latest[name] = job
    observations: list[Observation] = []
    for name, job in sorted(latest.items()):
        observations += _job_observations(name, job)
    if fleet_evaluated:
        for job in fleet:
            observations += _fleet_observations(job, names)
    unique: dict[Fingerprint, Observation] = {}
    for item in observations:
        unique.setdefault(item.fingerprint, item)
    runs = {name: RunMark.of(job) for name, job in latest.items()}
    return Observed(tuple(unique.values()), Scope(frozenset(latest), fleet_evaluated), runs)
