"""The fleet index's "Needs attention" list: one plain line per thing a person should look at.

What needs attention (from fleet.json; an older fleet.json without ``attention`` gets it worked out
from its rows): a job whose verdict is critical or warning (fleet.json's ``attention`` member
names them: a job name's newest run), a job that failed to be diagnosed, a job whose ranks leak
(its row's ``leaks`` and ``leak``), a job name nearing its device's capacity over its runs
(``capacity``), a regression against a job's earlier runs and a suspect device or host. A
regression whose value came from a suspect device (``explained_by_suspect``) says so ("explained
by suspect device node-bad/2") and is information, not a warning of the job's, as is one a leaking
rank set (``explained_by_leak``: "explained by the leak on rank 3"); any other names the
rank, host and device that carried it. Each line says what happened (the signal's title,
its code beside it, its meaning on hover; :mod:`stormwatch.signals`), on which rank, host and device,
how long into the job and in which phase, from the row's placed first causes
(:mod:`stormwatch.reports.fleetcause`).

Order: critical before warning before info (failed jobs, leaks, capacity warnings, regressions and
suspects are warnings), newest
first within a severity (a row's ``diagnosed_at``, a regression its job's; failed runs and
suspects have no time and come last), then by kind and job id. Only the first :data:`MAX_SHOWN`
lines are built; the rest are counted. Every string is telemetry: plain text, escaped by the template.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from stormwatch.outputs.fleet import JobStatus
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.reports.capacity import capacity_text
from stormwatch.reports.fields import as_int, as_list, as_mapping
from stormwatch.reports.fleetcause import device_text, missing_text, verdict_causes
from stormwatch.reports.fleetintel import METRIC_LABELS, format_percent, regression_owner
from stormwatch.reports.formatting import format_bytes, format_count, short_id
from stormwatch.reports.jobgrowth import format_hours, format_rate
from stormwatch.severity import Severity
from stormwatch.signals import SignalText, describe

MAX_SHOWN = 10  # lines on the page; the rest are counted and found in the job table
SUSPECTS_HREF = "#suspects"
TABLE_HREF = "#job-list"  # the job table's section


class AttentionKind(StrEnum):
    JOB = "job"  # a critical or warning verdict
    FAILED = "failed"  # not diagnosed: its error says why
    LEAK = "leak"  # a rank of the job's newest run leaks (issue 30)
    CAPACITY = "capacity"  # a job name's peak nears its device's capacity over its runs (issue 30)
    REGRESSION = "regression"
    SUSPECT = "suspect"  # a suspect device (or host)


_KIND_ORDER = {kind: position for position, kind in enumerate(AttentionKind)}
_VERDICT_SEVERITY = {VerdictStatus.CRITICAL.value: Severity.CRITICAL, VerdictStatus.WARNING.value: Severity.WARNING}
#: How the hidden lines are counted: (singular, plural) per kind; a job's is its severity.
_COUNTED: dict[str, tuple[str, str]] = {
    Severity.CRITICAL.value: ("critical", "critical"), Severity.WARNING.value: ("warning", "warning"),
    AttentionKind.FAILED.value: ("failed job", "failed jobs"),
    AttentionKind.LEAK.value: ("leak", "leaks"),
    AttentionKind.CAPACITY.value: ("capacity warning", "capacity warnings"),
    AttentionKind.REGRESSION.value: ("regression", "regressions"),
    AttentionKind.SUSPECT.value: ("suspect device", "suspect devices"),
}


@dataclass(frozen=True)
class AttentionEntry:
    """One line: ``link_text`` (linked to ``href`` when there is one), the signal, then ``text``;
    ``session``: the full id of the session the line is about (shown shortened), None for none."""

    kind: AttentionKind
    severity: Severity
    job_id: str | None
    href: str | None
    link_text: str
    signal: SignalText | None
    text: str
    session: str | None = None
    host: str | None = None  # a suspect's host (``data-host``)
    filter: str | None = None  # what the job table is filtered by when the link is followed (index.js)

    @property
    def session_short(self) -> str:
        return "" if self.session is None else short_id(self.session)


@dataclass(frozen=True)
class Attention:
    entries: tuple[AttentionEntry, ...]  # the lines shown, in order
    more: int  # lines not shown
    more_counts: str  # what they are: "3,380 critical, 80 warning, 5 failed jobs"
    job_ids: frozenset[str]  # every job needing attention, leaking ones too (the table's "needs attention" filter)
    mentions_hidden_gap: bool  # a shown line speaks of hidden memory: explain the words there


@dataclass(frozen=True)
class _Candidate:
    kind: AttentionKind
    severity: Severity
    when: str  # ISO 8601, "" when unknown (sorts last)
    name: str
    item: Mapping[str, Any]


def _ordered(candidates: Iterable[_Candidate]) -> list[_Candidate]:
    """Critical first; newest first within a severity (no time: last); then kind, then name."""
    ordered = sorted(candidates, key=lambda item: (_KIND_ORDER[item.kind], item.name))
    ordered.sort(key=lambda item: item.when, reverse=True)  # stable: ties keep kind and name order
    ordered.sort(key=lambda item: -item.severity.level)
    return ordered


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _job_candidate(job: Mapping[str, Any]) -> _Candidate | None:
    job_id = _text(job.get("job_id"))
    diagnosed = job.get("diagnosed_at")
    when = diagnosed if isinstance(diagnosed, str) else ""
    if job.get("status") == JobStatus.FAILED.value:
        return _Candidate(AttentionKind.FAILED, Severity.WARNING, "", job_id, job)
    verdict = job.get("verdict")
    severity = _VERDICT_SEVERITY.get(verdict) if isinstance(verdict, str) else None
    return None if severity is None else _Candidate(AttentionKind.JOB, severity, when, job_id, job)


def _attempt(value: Any) -> str:
    """``attempt 1 of 2, interrupted`` of a row's ``worst_attempt`` (``attempt 1 of 2, interrupted,
    OOM on rank 3``: the line already says what it found)."""
    parts = _text(value).split(", ")
    return ", ".join(parts[:2]) if len(parts) > 2 else ", ".join(parts)


def _missing(job: Mapping[str, Any]) -> str:
    missing = [int(rank) for rank in as_list(job.get("missing_ranks")) if as_int(rank) is not None]
    return missing_text(missing, as_int(job.get("ranks_expected")))


def _job_entry(candidate: _Candidate, href: Callable[[str], str | None]) -> AttentionEntry:
    job = candidate.item

    def entry(signal: SignalText | None, text: str, session: str | None = None) -> AttentionEntry:
        return AttentionEntry(kind=candidate.kind, severity=candidate.severity, job_id=candidate.name,
                              href=href(candidate.name), link_text=candidate.name, signal=signal, text=text,
                              session=session)

    if candidate.kind is AttentionKind.FAILED:  # no report: its link finds its row (and error) in the table
        return replace(entry(None, f"could not be diagnosed: {_text(job.get('error'))}"), href=TABLE_HREF,
                       filter=candidate.name)
    shown, _ = verdict_causes(job)
    missing, attempt = _missing(job), _attempt(job.get("worst_attempt"))
    session = job.get("worst_session") if attempt and isinstance(job.get("worst_session"), str) else None
    if shown is None:
        if missing:
            return entry(describe("missing_ranks"), f": {missing}")
        return entry(None, _text(job.get("summary")) or candidate.severity.value)
    extras = [part for part in (shown.dump, missing, attempt and f"in {attempt}") if part]
    tail = shown.tail()
    return entry(shown.signal, (f" {tail}" if tail else "") + "".join(f"; {part}" for part in extras), session)


def explained(item: Mapping[str, Any]) -> bool:
    """Whether a regression's value came from a suspect device (the device's problem, not the job's) or
    from a rank that leaked in that run (the leak's own line says it)."""
    return item.get("explained_by_suspect") is True or item.get("explained_by_leak") is True


def _regression_entry(item: Mapping[str, Any], href: Callable[[str], str | None]) -> AttentionEntry:
    job_id = _text(item.get("job_id"))
    metric = item.get("metric")
    label = METRIC_LABELS.get(metric, _text(metric)) if isinstance(metric, str) else "memory"
    value, baseline = format_bytes(as_int(item.get("value_bytes"))), format_bytes(as_int(item.get("baseline_bytes")))
    runs, name = as_int(item.get("baseline_runs")), _text(item.get("job_name"))
    earlier = f" ({format_count(runs)} earlier runs{f' of {name}' if name else ''})" if runs is not None else ""
    text = (f": {label.lower()} {value}, {format_percent(item.get('change_pct'), signed=True)} over its baseline "
            f"of {baseline}{earlier}")
    owner = regression_owner(item)
    if item.get("explained_by_leak") is True:  # the leak's line is the warning
        text += f"; {owner}"
    elif explained(item):  # the device's problem: said so, and never as the job's own
        text += f"; {owner}, not by the job"
    elif owner:
        text += f"; carried by {owner}"
    return AttentionEntry(kind=AttentionKind.REGRESSION, severity=_regression_severity(item), job_id=job_id,
                          href=href(job_id), link_text=job_id, signal=describe("regression"), text=text)


def _regression_severity(item: Mapping[str, Any]) -> Severity:
    """A regression a suspect device explains is information about the job (the device's own line is the
    warning); any other is a warning."""
    return Severity.INFO if explained(item) else Severity.WARNING


def _leak_entry(job: Mapping[str, Any], href: Callable[[str], str | None]) -> AttentionEntry:
    """``job-7 Memory leak on rank 3 (gpu-node-01, GPU 3): grows 1.2 GiB/h; at this rate it would run
    out of the 80 GiB device 3.4 h after start`` (and how many other ranks leak)."""
    job_id, leak = _text(job.get("job_id")), as_mapping(job.get("leak"))
    rank, device = as_int(leak.get("rank")), as_int(leak.get("device_id"))
    place = ", ".join(part for part in (_text(leak.get("host")), device_text(device)) if part)
    where = ("" if rank is None else f" on rank {rank}") + (f" ({place})" if place else "")
    rate, total = leak.get("bytes_per_hour"), as_int(leak.get("device_total_bytes"))
    after = leak.get("capacity_after_start_s")
    grows = f"grows {format_rate(rate)}" if isinstance(rate, int | float) and not isinstance(rate, bool) else "grows"
    run_out = (f"; at this rate it would run out of the {capacity_text(total).removeprefix('capacity ')} device "
               f"{format_hours(after)} after start"
               if total is not None and isinstance(after, int | float) and not isinstance(after, bool) else "")
    others = (as_int(job.get("leaks")) or 1) - 1
    more = f"; {format_count(others)} more leaking rank{'s' if others != 1 else ''}" if others > 0 else ""
    return AttentionEntry(kind=AttentionKind.LEAK, severity=Severity.WARNING, job_id=job_id, href=href(job_id),
                          link_text=job_id, signal=describe("leak"), text=f"{where}: {grows}{run_out}{more}")


def _capacity_entry(item: Mapping[str, Any], href: Callable[[str], str | None]) -> AttentionEntry:
    """A capacity warning: its own sentence (``llama-7b: peak up 6 % a run over 5 runs; at this trend it
    needs more than 80 GiB within 3 runs``), linked to the job name's newest run."""
    job_id, name = _text(item.get("job_id")), _text(item.get("job_name"))
    sentence = _text(item.get("sentence") or item.get("text") or item.get("message"))
    if name and sentence.startswith(f"{name}: "):
        sentence = sentence[len(name) + 2:]  # the link already names the job
    if not sentence:
        runs, pct = as_int(item.get("runs_to_capacity")), item.get("growth_pct_per_run")
        sentence = (f"peak up {format_percent(pct)} a run" if isinstance(pct, int | float) else "peak rising")
        sentence += f"; at this trend it outgrows its device within {format_count(runs)} runs" if runs else ""
    return AttentionEntry(kind=AttentionKind.CAPACITY, severity=Severity.WARNING, job_id=job_id or None,
                          href=href(job_id) if job_id else None, link_text=name or job_id or "a job name",
                          signal=describe("capacity"), text=f": {sentence}")


def _suspect_entry(item: Mapping[str, Any]) -> AttentionEntry:
    host = _text(item.get("host"))
    device = as_int(item.get("device_id"))
    place = ", ".join(part for part in (host, device_text(device)) if part) or "a device"
    jobs, anomalous = as_int(item.get("jobs")), as_int(item.get("anomalous_jobs"))
    rate, fleet_rate = item.get("rate"), item.get("fleet_rate")
    share = f" ({format_percent(rate, fraction=True)})" if isinstance(rate, int | float) else ""
    counted = (f"{format_count(anomalous)} of {format_count(jobs)} jobs placed there had findings{share}"
               if anomalous is not None and jobs is not None else "its jobs had findings more often than elsewhere")
    fleet = (f", against {format_percent(fleet_rate, fraction=True)} across the fleet"
             if isinstance(fleet_rate, int | float) and not isinstance(fleet_rate, bool) else "")
    return AttentionEntry(kind=AttentionKind.SUSPECT, severity=Severity.WARNING, job_id=None, href=SUSPECTS_HREF,
                          link_text=place, signal=describe("suspect_device" if device is not None else "suspect_host"),
                          text=f": {counted}{fleet}", host=host or None)


def _listed(fleet: Mapping[str, Any]) -> frozenset[str] | None:
    """The job ids fleet.json's ``attention`` member names; None when it has none (version 1)."""
    if not isinstance(fleet.get("attention"), list | tuple):
        return None
    return frozenset(_text(item.get("job_id")) for item in as_list(fleet.get("attention")) if isinstance(item, Mapping))


def _job_candidates(fleet: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]]) -> list[_Candidate]:
    """A candidate per job needing attention: each row of ``jobs`` the ``attention`` member names
    (fleet.json's own entry when no row has its id), else each critical, warning or failed row."""
    listed = _listed(fleet)
    chosen: dict[str, _Candidate] = {}
    rows: Iterable[Mapping[str, Any]] = jobs
    if listed is not None:
        entries = [item for item in as_list(fleet.get("attention")) if isinstance(item, Mapping)]
        rows = [*(job for job in jobs if _text(job.get("job_id")) in listed), *entries]
    for job in rows:
        candidate = _job_candidate(job)
        if candidate is not None and candidate.name not in chosen:
            chosen[candidate.name] = candidate
    return list(chosen.values())


def _leak_candidates(fleet: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]],
                     times: Mapping[str, str]) -> list[_Candidate]:
    """A candidate per job (a table row, else an ``attention`` entry) whose ranks leak."""
    chosen: dict[str, _Candidate] = {}
    entries = [item for item in as_list(fleet.get("attention")) if isinstance(item, Mapping)]
    for job in [*jobs, *entries]:
        job_id = _text(job.get("job_id"))
        if (as_int(job.get("leaks")) or 0) > 0 and job_id not in chosen:
            chosen[job_id] = _Candidate(AttentionKind.LEAK, Severity.WARNING, times.get(job_id, ""), job_id, job)
    return list(chosen.values())


def _fleet_candidates(fleet: Mapping[str, Any], times: Mapping[str, str]) -> list[_Candidate]:
    found = []
    for item in as_list(fleet.get("regressions")):
        if isinstance(item, Mapping):
            job_id = _text(item.get("job_id"))
            found.append(_Candidate(AttentionKind.REGRESSION, _regression_severity(item), times.get(job_id, ""),
                                    job_id, item))
    for item in as_list(fleet.get("capacity")):
        if isinstance(item, Mapping):
            job_id = _text(item.get("job_id"))
            found.append(_Candidate(AttentionKind.CAPACITY, Severity.WARNING, times.get(job_id, ""),
                                    _text(item.get("job_name")) or job_id, item))
    for item in as_list(fleet.get("suspect_hosts")):
        if isinstance(item, Mapping):
            name = f"{_text(item.get('host'))} {_text(item.get('device_id'))}"
            found.append(_Candidate(AttentionKind.SUSPECT, Severity.WARNING, "", name, item))
    return found


def _counted(candidates: Iterable[_Candidate]) -> str:
    counts = Counter(candidate.severity.value if candidate.kind is AttentionKind.JOB else candidate.kind.value
                     for candidate in candidates)
    return ", ".join(f"{format_count(counts[key])} {words[0] if counts[key] == 1 else words[1]}"
                     for key, words in _COUNTED.items() if counts[key])


def _entry(candidate: _Candidate, href: Callable[[str], str | None]) -> AttentionEntry:
    if candidate.kind is AttentionKind.REGRESSION:
        return _regression_entry(candidate.item, href)
    if candidate.kind is AttentionKind.SUSPECT:
        return _suspect_entry(candidate.item)
    if candidate.kind is AttentionKind.LEAK:
        return _leak_entry(candidate.item, href)
    if candidate.kind is AttentionKind.CAPACITY:
        return _capacity_entry(candidate.item, href)
    return _job_entry(candidate, href)


def attention(fleet: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]], href: Callable[[str], str | None]
              ) -> Attention:
    """The list for ``fleet`` (parsed fleet.json) whose table shows ``jobs``; ``href``: a job id's report
    link (None: no link), asked only for the lines shown."""
    candidates = _job_candidates(fleet, jobs)
    times = {candidate.name: candidate.when for candidate in candidates}
    times.update({_text(job.get("job_id")): job["diagnosed_at"] for job in jobs
                  if isinstance(job.get("diagnosed_at"), str) and _text(job.get("job_id")) not in times})
    leaks = _leak_candidates(fleet, jobs, times)
    everything = _ordered([*candidates, *leaks, *_fleet_candidates(as_mapping(fleet), times)])
    shown = everything[:MAX_SHOWN]
    entries = tuple(_entry(item, href) for item in shown)
    hidden = "hidden" in " ".join(f"{entry.signal.title} {entry.signal.meaning} {entry.text}".lower()
                                  for entry in entries if entry.signal is not None)
    return Attention(entries=entries, more=len(everything) - len(shown), more_counts=_counted(everything[MAX_SHOWN:]),
                     job_ids=frozenset(candidate.name for candidate in [*candidates, *leaks]),
                     mentions_hidden_gap=hidden)
