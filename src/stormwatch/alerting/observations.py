"""What an audit observed, as alerts see it: each finding's fingerprint, labels and ledger key.

An alert is identified by its :class:`Fingerprint`: the job *name* (not the run's job id, so the
next night's run of the same job is the same alert), the kind and the signal, plus host and
device for a suspect device; :mod:`.kinds` says what each kind (:class:`~.kinds.AlertKind`) is.

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

from stormwatch.alerting.findings import IndicatorFact, JobFinding
from stormwatch.alerting.kinds import FLEET_KINDS, AlertKind
from stormwatch.alerting.ledger import FindingKey
from stormwatch.history.job_names import JobNamePattern
from stormwatch.severity import Severity


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
        return Labels(job_id=job_id, job_name=fingerprint.job_name, kind=fingerprint.kind, severity=self.severity,
                      signal=fingerprint.signal, host=fingerprint.host)


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


def finding_key(job: JobFinding, fact: IndicatorFact) -> FindingKey:
    """The ledger key of ``fact`` observed in ``job``: (job id, kind, rank, signal, time)."""
    return FindingKey(job_id=job.job_id, kind=fact.kind, rank=fact.rank, signal=fact.signal,
                      timestamp_ns=fact.timestamp_ns)


def _observed(fingerprint: Fingerprint, job: JobFinding, fact: IndicatorFact) -> Observation:
    return Observation(fingerprint=fingerprint, key=finding_key(job, fact), severity=fact.severity, fact=fact, job=job)


def _job_observations(name: str, job: JobFinding) -> list[Observation]:
    out = []
    for fact in job.indicators:
        if fact.kind in (AlertKind.EARLIEST, AlertKind.MOST_SEVERE):
            fingerprint = Fingerprint(job_name=name, kind=AlertKind(fact.kind), signal=fact.signal)
            out.append(_observed(fingerprint, job, fact))
    if job.oom is not None:
        oom = job.oom
        key = FindingKey(job_id=job.job_id, kind=AlertKind.OOM.value, rank=oom.rank, signal=oom.signal,
                         timestamp_ns=oom.timestamp_ns)
        out.append(Observation(fingerprint=Fingerprint(job_name=name, kind=AlertKind.OOM, signal=oom.signal), key=key,
                               severity=oom.severity, fact=oom, job=job))
    if job.missing_ranks:
        fact = IndicatorFact(kind=AlertKind.MISSING_RANKS.value, rank=job.missing_ranks[0], severity=Severity.WARNING,
                             signal=AlertKind.MISSING_RANKS.value, timestamp_ns=0, phase_path=None,
                             details=f"ranks {job.missing_text} of {job.expected_ranks} missing", since_start_ns=None)
        out.append(_observed(Fingerprint(job_name=name, kind=AlertKind.MISSING_RANKS, signal=fact.signal), job, fact))
    for fact in job.leaks:  # one alert per leaking rank (its signal names the rank)
        out.append(_observed(Fingerprint(job_name=name, kind=AlertKind.LEAK, signal=fact.signal), job, fact))
    return out


def _fleet_observations(job: JobFinding, names: JobNamePattern) -> list[Observation]:
    out = []
    for fact in job.indicators:
        if fact.kind == AlertKind.SUSPECT_HOST:
            fingerprint = Fingerprint(job_name="", kind=AlertKind.SUSPECT_HOST, signal=fact.signal, host=job.host or "",
                                      device=fact.rank)
        elif fact.kind in (AlertKind.REGRESSION, AlertKind.CAPACITY):
            fingerprint = Fingerprint(job_name=names.name_of(job.job_id), kind=AlertKind(fact.kind), signal=fact.signal)
        else:
            continue
        out.append(_observed(fingerprint, job, fact))
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
        return None if found is None else Fingerprint(job_name="", kind=kind, signal=key.signal, host=found.group(1),
                                                      device=int(found.group(2)))
    return Fingerprint(job_name=names.name_of(key.job_id), kind=kind, signal=key.signal)


def is_fleet_finding(job: JobFinding) -> bool:
    """A regression, suspect-device or capacity finding (:mod:`.fleet_findings`), not a job's own."""
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
