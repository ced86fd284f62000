"""``reports/alerts.json``: the alert state as bytes (version 2), and version 1 read and upgraded.

Version 2, one finding or alert a line (diffable, greppable)::

    {"version": 2, "runs": {"llama-8r": {"job_id": "llama-8r-0142", "started_at_ns": 1700000000000000000}},
    "findings": {
    "llama-8r-0142": {"job_id": "llama-8r-0142", "verdict": "critical", "indicators": [{...}, {...}], ...}
    },
    "alerts": [
    {"alert": "llama-8r|most_severe|alert:critical", "job_name": "llama-8r", "kind": "most_severe",
     "signal": "alert:critical", "status": "firing", "severity": "critical", "started_at": "...",
     "job": "llama-8r-0142", "fact": 1, "targets": {"default/slack": {"status": "sent", ...}}}
    ]}

Each distinct finding the records hold (:func:`~.alert_records.kept_finding` of a run's finding) is
stored once, under its job id (``#2``, ``#3``... for other findings of that job id, such as a
resolved alert still holding an earlier diagnosis of the run), with the placements of every rank its
alerts are on. An alert names its finding (``job``) and its fact by its index among the finding's
indicators, or holds the fact itself (an OOM, missing ranks). Members at their default are left out:
an alert's ``last_seen_at`` equal to ``started_at``, ``key`` equal to its fact's own (job id, kind,
rank, signal, time), ``placements`` equal to its finding's on the fact's rank, null ``host``,
``device``, ``resolved_at``, ``silenced_by``, ``inhibited_by``, empty ``targets``; a finding's empty
summary and lists, zero ``expected_ranks`` and null members; a fact's null phase and offset, empty
details.

Version 1 (whole finding and fact in every alert) is read and upgraded: the next write is version 2.
A record that cannot be read, or whose finding cannot, is skipped with a problem noted; a document
that cannot be read at all is an empty book with one problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import orjson

from stormwatch.alerting import collector
from stormwatch.alerting.alert_records import AlertRecord, AlertStatus, TargetState, kept_finding
from stormwatch.alerting.findings import (
    IndicatorFact,
    JobFinding,
    fact_from_json,
    fact_to_json,
    finding_from_json,
    finding_to_json,
)
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import FindingKey
from stormwatch.alerting.observations import Fingerprint, RunMark, finding_key
from stormwatch.severity import Severity

VERSION = 2
READABLE_VERSIONS = (1, 2)
Placement = tuple[int, str, int | None]
_FINDING_DEFAULTS: dict[str, Any] = {"summary": "", "indicators": [], "missing_ranks": [], "expected_ranks": 0,
                                     "started_at_ns": None, "report_url": None, "oom": None, "placements": [],
                                     "host": None, "attempt": None}
_FACT_DEFAULTS: dict[str, Any] = {"phase_path": None, "details": "", "since_start_ns": None}
_OPTIONAL_TEXT = ("resolved_at", "silenced_by", "inhibited_by")
_SHARED = tuple(item.name for item in fields(JobFinding) if item.name != "placements")
_UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, IndexError)


@dataclass(frozen=True)
class AlertBook:
    """Every alert's record and the run last evaluated per job name; ``problems``: records that could
    not be read (skipped)."""

    records: Mapping[Fingerprint, AlertRecord] = field(default_factory=dict)
    runs: Mapping[str, RunMark] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def to_bytes(self) -> bytes:
        """The version-2 document (module docstring); :func:`read_book` reads it back equal."""
        runs = orjson.dumps({name: {"job_id": run.job_id, "started_at_ns": run.started_at_ns}
                             for name, run in sorted(self.runs.items())})
        ordered = [self.records[key] for key in sorted(self.records, key=Fingerprint.sort_key)]
        store = _FindingStore()
        shared = [store.add(record.job) for record in ordered]
        findings = b",\n".join(orjson.dumps(item.key) + b": " + orjson.dumps(_finding_json(item.stored_job()))
                               for item in store.items)
        alerts = b",\n".join(orjson.dumps(_alert_json(record, item))
                             for record, item in zip(ordered, shared, strict=True))
        return b'{"version": %d, "runs": %s,\n"findings": {\n%s\n},\n"alerts": [\n%s\n]}\n' % (
            VERSION, runs, findings, alerts)


def _without_defaults(item: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in item.items() if name not in defaults or value != defaults[name]}


def _fact_json(fact: IndicatorFact) -> dict[str, Any]:
    return _without_defaults(fact_to_json(fact), _FACT_DEFAULTS)


def _finding_json(job: JobFinding) -> dict[str, Any]:
    out = _without_defaults(finding_to_json(job), _FINDING_DEFAULTS)
    if job.indicators:
        out["indicators"] = [_fact_json(item) for item in job.indicators]
    if job.oom is not None:
        out["oom"] = _fact_json(job.oom)
    return out


def _on_rank(placements: Iterable[Placement], rank: int) -> tuple[Placement, ...]:
    return tuple(item for item in placements if item[0] == rank)


@dataclass
class _Shared:
    """One stored finding: its key, the first record's finding, every placement its records hold."""

    key: str
    job: JobFinding
    placements: dict[Placement, None] = field(default_factory=dict)  # insertion-ordered set

    def stored_job(self) -> JobFinding:
        return replace(self.job, placements=tuple(self.placements))


class _FindingStore:
    """The distinct findings of the records being written (equal but for placements: one finding)."""

    def __init__(self) -> None:
        self.items: list[_Shared] = []
        self._of_job: dict[str, list[_Shared]] = {}
        self._keys: set[str] = set()

    def add(self, job: JobFinding) -> _Shared:
        found = self._of_job.setdefault(job.job_id, [])
        shared = next((item for item in found if item.job is job or all(
            getattr(item.job, name) == getattr(job, name) for name in _SHARED)), None)
        if shared is None:
            key, number = job.job_id, 1
            while key in self._keys:
                number += 1
                key = f"{job.job_id}#{number}"
            self._keys.add(key)
            shared = _Shared(key, job)
            found.append(shared)
            self.items.append(shared)
        shared.placements.update(dict.fromkeys(job.placements))
        return shared


def _alert_json(record: AlertRecord, shared: _Shared) -> dict[str, Any]:
    """Enums go to orjson as they are (it writes their values, with no ``.value`` call per member)."""
    fingerprint, fact, job, key = record.fingerprint, record.fact, record.job, record.key
    out: dict[str, Any] = {"alert": fingerprint.text, "job_name": fingerprint.job_name, "kind": fingerprint.kind,
                           "signal": fingerprint.signal}
    if fingerprint.host is not None:
        out["host"] = fingerprint.host
    if fingerprint.device is not None:
        out["device"] = fingerprint.device
    out.update(status=record.status, severity=record.severity, started_at=record.started_at)
    if record.last_seen_at != record.started_at:
        out["last_seen_at"] = record.last_seen_at
    for name in _OPTIONAL_TEXT:
        if getattr(record, name) is not None:
            out[name] = getattr(record, name)
    out["job"] = shared.key
    try:
        out["fact"] = job.indicators.index(fact)
    except ValueError:
        out["fact"] = _fact_json(fact)
    if (key.job_id, key.kind, key.rank, key.signal, key.timestamp_ns) != (
            job.job_id, fact.kind, fact.rank, fact.signal, fact.timestamp_ns):  # not the fact's own (finding_key)
        out["key"] = [key.job_id, key.kind, key.rank, key.signal, key.timestamp_ns]
    if job.placements != _on_rank(shared.placements, fact.rank):
        out["placements"] = [list(item) for item in job.placements]
    if record.targets:
        out["targets"] = {name: target.to_json() for name, target in sorted(record.targets.items())}
    return out


def _fingerprint(item: Mapping[str, Any]) -> Fingerprint:
    device = item.get("device")
    return Fingerprint(job_name=str(item["job_name"]), kind=AlertKind(item["kind"]), signal=str(item["signal"]),
                       host=None if item.get("host") is None else str(item["host"]),
                       device=None if device is None else int(device))


def _key(raw: Any) -> FindingKey:
    job_id, kind, rank, signal, stamp = raw
    return FindingKey(job_id=str(job_id), kind=str(kind), rank=int(rank), signal=str(signal), timestamp_ns=int(stamp))


def _optional(item: Mapping[str, Any]) -> dict[str, str | None]:
    return {name: None if item.get(name) is None else str(item[name]) for name in _OPTIONAL_TEXT}


def _targets(item: Mapping[str, Any]) -> dict[str, TargetState]:
    return {str(name): TargetState.from_json(raw) for name, raw in item.get("targets", {}).items()}


def _record_v1(item: Mapping[str, Any]) -> AlertRecord:
    """A version-1 alert (its whole finding and fact inline), its finding kept as version 2 keeps it."""
    fact = fact_from_json(item["fact"])
    return AlertRecord(fingerprint=_fingerprint(item), status=AlertStatus(item["status"]),
                       severity=Severity(item["severity"]), started_at=str(item["started_at"]),
                       last_seen_at=str(item["last_seen_at"]), key=_key(item["key"]), fact=fact,
                       job=kept_finding(finding_from_json(item["job"]), rank=fact.rank), targets=_targets(item),
                       **_optional(item))


class _FindingReader:
    """A version-2 document's findings, each parsed once, and shared by records on the same ranks."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self._raw = raw
        self._parsed: dict[str, JobFinding] = {}
        self._placed: dict[tuple[str, tuple[Placement, ...]], JobFinding] = {}

    def record(self, item: Mapping[str, Any]) -> AlertRecord:
        name = item["job"]
        if not isinstance(name, str):
            raise TypeError("an alert's finding is named by a string")
        base = self._parsed.get(name)
        if base is None:
            base = self._parsed[name] = finding_from_json(self._raw[name])
        raw_fact = item["fact"]
        if isinstance(raw_fact, bool) or (isinstance(raw_fact, int) and raw_fact < 0):
            raise ValueError("an alert's fact is an indicator's index or a fact")
        fact = base.indicators[raw_fact] if isinstance(raw_fact, int) else fact_from_json(raw_fact)
        raw_places = item.get("placements")
        places = _on_rank(base.placements, fact.rank) if raw_places is None else tuple(
            (int(rank), str(host), None if device is None else int(device)) for rank, host, device in raw_places)
        job = self._placed.get((name, places))
        if job is None:
            job = self._placed[name, places] = base if places == base.placements else replace(base, placements=places)
        started = str(item["started_at"])
        return AlertRecord(fingerprint=_fingerprint(item), status=AlertStatus(item["status"]),
                           severity=Severity(item["severity"]), started_at=started,
                           last_seen_at=str(item.get("last_seen_at", started)),
                           key=finding_key(job, fact) if item.get("key") is None else _key(item["key"]), fact=fact,
                           job=job, targets=_targets(item), **_optional(item))


def read_book(data: bytes | None) -> AlertBook:
    """The alert state from ``alerts.json`` bytes (None: no state yet), version 1 or 2."""
    if not data:
        return AlertBook()
    with collector.paused():  # many small acyclic objects: see collector (bench/README.md, alerts_bench.py)
        return _read(data)


def unusable(data: bytes | None, book: AlertBook) -> bool:
    """Whether ``data`` is an alert state that holds nothing usable: empty, or unreadable as a whole
    (a write cut short, garbage). None (no file) is not unusable: it is no state yet."""
    if data is None:
        return False
    return not data.strip() or (bool(book.problems) and not book.records and not book.runs)


def rebuild_note(data: bytes | None, book: AlertBook, *, has_ledger: bool) -> str | None:
    """The line saying the alert state is rebuilt from the ledger (what it shows sent stays told),
    None when the state read is usable, or when there is neither a state nor a ledger (a first audit)."""
    if unusable(data, book):
        what = "empty" if data is not None and not data.strip() else "unreadable"
        return f"alerts.json {what}: the alert state is rebuilt from notifications.jsonl"
    if data is None and has_ledger:
        return "alerts.json missing: the alert state is rebuilt from notifications.jsonl"
    return None


def _read(data: bytes) -> AlertBook:
    try:
        document = orjson.loads(data)
        if not isinstance(document, dict) or document.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"not an alert state document of version {' or '.join(map(str, READABLE_VERSIONS))}")
        runs = {str(name): RunMark(int(run["started_at_ns"]), str(run["job_id"]))
                for name, run in document.get("runs", {}).items()}
        items = document.get("alerts", [])
        findings = document.get("findings", {})
        if not isinstance(findings, dict):
            raise TypeError("findings is not an object")
    except (orjson.JSONDecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return AlertBook(problems=(f"alerts.json unreadable ({type(exc).__name__})",))
    read = _record_v1 if document["version"] == 1 else _FindingReader(findings).record
    records: dict[Fingerprint, AlertRecord] = {}
    problems = []
    for number, item in enumerate(items, start=1):
        try:
            record = read(item)
        except _UNREADABLE as exc:
            problems.append(f"alerts.json alert {number}: unreadable ({type(exc).__name__}); skipped")
            continue
        records[record.fingerprint] = record
    return AlertBook(records, runs, tuple(problems))
