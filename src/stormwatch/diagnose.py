"""Diagnose one session of a job end to end: load, filter ranks, build the model, decide the verdict.

:func:`diagnose` is one session (``--session``, else stormlog's default) and
:func:`diagnose_loaded` the same from a job already loaded, which
:mod:`stormwatch.diagnose_sessions` runs for every session of a job (``--all-sessions``,
the audits). Reads through the artifact tree (or local paths) and returns plain data;
writing ``model.json`` somewhere is the caller's business.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from stormwatch.analysis.collective import CollectivePreset
from stormwatch.analysis.columns import distinct_ints
from stormwatch.analysis.model import DiagnosticsModel, build_model, expected_ranks
from stormwatch.analysis.rank_filter import RankFilterError, format_ranks, parse_rank_filter
from stormwatch.growth.leak_min import DEFAULT_LEAK_MIN, LeakMin, parse_leak_min
from stormwatch.growth.rank_growth import GrowthSettings
from stormwatch.load.limits import DEFAULT_LIMITS, LoadLimits
from stormwatch.load.loader import LoadResult, load_artifacts
from stormwatch.load.tree import ArtifactTree, Entry
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.job_document import session_document
from stormwatch.outputs.model_json import input_fingerprint
from stormwatch.outputs.verdict import Verdict, decide_verdict
from stormwatch.peers.job_facts import fleet_facts
from stormwatch.severity import FailOn
from stormwatch.version import ENGINE_VERSION

#: Sessions of one job diagnosed at most (``--max-sessions``): the default one and the most recent.
DEFAULT_MAX_SESSIONS = 64


@dataclass(frozen=True)
class DiagnoseOptions:
    """How to diagnose: rank filter expression, session, failure threshold, collective preset,
    the job's load caps (see :class:`~stormwatch.load.limits.LoadLimits`), whether every
    session of the job is diagnosed (``all_sessions``, at most ``max_sessions`` of them) and the
    growth a leak must reach (``leak_min``, ``--leak-min``: :class:`~stormwatch.growth.leak_min.LeakMin`).

    Invariants: ``max_sessions >= 1``; ``session_id`` and ``all_sessions`` are not both set.
    """

    ranks: str | None = None
    session_id: str | None = None
    fail_on: FailOn = FailOn.NEVER
    preset: CollectivePreset = CollectivePreset.MEDIUM
    limits: LoadLimits = DEFAULT_LIMITS
    all_sessions: bool = False
    max_sessions: int = DEFAULT_MAX_SESSIONS
    leak_min: LeakMin = DEFAULT_LEAK_MIN

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if self.all_sessions and self.session_id is not None:
            raise ValueError("a session id and all sessions exclude each other (--session, --all-sessions)")

    def for_session(self, session_id: str) -> DiagnoseOptions:
        """These options for one session of the job, as ``--session session_id`` gives them."""
        return replace(self, session_id=session_id, all_sessions=False)

    @classmethod
    def parse(
        cls,
        *,
        ranks: str | None = None,
        session_id: str | None = None,
        fail_on: str = FailOn.NEVER.value,
        preset: str = CollectivePreset.MEDIUM.value,
        max_artifact_bytes: int | None = None,
        max_events: int | None = None,
        all_sessions: bool = False,
        max_sessions: int | None = None,
        leak_min: str | None = None,
    ) -> DiagnoseOptions:
        """From command-line or flow-parameter strings; ValueError names a bad value.
        ``None`` caps take the defaults of :class:`~stormwatch.load.limits.LoadLimits`,
        ``max_sessions`` None :data:`DEFAULT_MAX_SESSIONS`, ``leak_min`` None the default leak-min
        (else :func:`~stormwatch.growth.leak_min.parse_leak_min`'s text)."""
        caps = {"max_artifact_bytes": max_artifact_bytes, "max_events": max_events}
        limits = LoadLimits(**{name: value for name, value in caps.items() if value is not None})
        return cls(ranks=ranks, session_id=session_id, fail_on=FailOn(fail_on.strip().lower()),
                   preset=CollectivePreset(preset.strip().lower()), limits=limits, all_sessions=all_sessions,
                   max_sessions=DEFAULT_MAX_SESSIONS if max_sessions is None else max_sessions,
                   leak_min=DEFAULT_LEAK_MIN if leak_min is None else parse_leak_min(leak_min))

    def recorded(self) -> dict[str, str | int | bool | None]:
        """What changes the model (``fail_on`` does not): stored in model.json as ``options``.
        Caps and ``leak_min`` (its canonical text) appear only when they differ from the defaults, and
        ``all_sessions``/``max_sessions`` only when every session is diagnosed (older documents stay
        comparable: an audit with the defaults finds them unchanged, one with another leak-min does not)."""
        recorded: dict[str, str | int | bool | None] = {"ranks": self.ranks, "session_id": self.session_id,
                                                        "preset": self.preset.value, "engine_version": ENGINE_VERSION}
        if self.limits.max_artifact_bytes != DEFAULT_LIMITS.max_artifact_bytes:
            recorded["max_artifact_bytes"] = self.limits.max_artifact_bytes
        if self.limits.max_events != DEFAULT_LIMITS.max_events:
            recorded["max_events"] = self.limits.max_events
        if self.all_sessions:
            recorded["all_sessions"] = True
            recorded["max_sessions"] = self.max_sessions
        if not self.leak_min.is_default:
            recorded["leak_min"] = self.leak_min.text
        return recorded

    def growth_settings(self) -> GrowthSettings:
        """How growth is judged with these options (the default settings but the leak-min)."""
        return GrowthSettings(leak_min=self.leak_min)


@dataclass(frozen=True, eq=False)
class Diagnosis:
    job_id: str
    loaded: LoadResult
    model: DiagnosticsModel
    verdict: Verdict
    document: JobDocument

    def model_json(self) -> bytes:
        return self.document.to_json()

    @property
    def started_at_ns(self) -> int | None:
        """First event of the diagnosed session (ns), the origin of 'time since job start'."""
        stamps = self.loaded.events["timestamp_ns"]
        return int(stamps.min()) if len(stamps) else None


def local_entries(paths: Sequence[str | Path]) -> list[Entry]:
    """(absolute path, size, mtime) of every file under ``paths``: the local input identity."""
    entries = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            stat = file.stat()
            entries.append(Entry(str(file), stat.st_size, str(stat.st_mtime_ns)))
    return entries


def diagnose(
    source: Sequence[str | Path] | ArtifactTree,
    *,
    job_id: str,
    source_name: str,
    options: DiagnoseOptions = DiagnoseOptions(),
    entries: Sequence[Entry] | None = None,
) -> Diagnosis:
    """Load ``source`` (local paths or a tree), diagnose its session ``options.session_id`` (else the
    default one), and build its model.json document (``options.all_sessions`` is not looked at here:
    see :func:`stormwatch.diagnose_sessions.diagnose_job`).

    Raises :class:`~stormwatch.load.loader.SessionNotFoundError` for an unknown session
    :class:`~stormwatch.analysis.rank_filter.RankFilterError` for a malformed rank filter (its
    :class:`NoRanksSelectedError` for one that selects none of the session's ranks) and
    :class:`~stormwatch.load.limits.JobLimitError` for a job over ``options.limits.max_events``;
    bad or oversized artifacts never raise (they become warnings).
    """
    if entries is None:
        entries = source_entries(source)
    loaded = load_artifacts(source, session_id=options.session_id, limits=options.limits)
    check_rank_selection(options.ranks, [loaded.events])
    return diagnose_loaded(loaded, job_id=job_id, source_name=source_name, options=options,
                           fingerprint=input_fingerprint(entries))


def source_entries(source: Sequence[str | Path] | ArtifactTree) -> Sequence[Entry]:
    """The input identity of ``source``: a tree's entries, else :func:`local_entries`."""
    return source.entries() if not isinstance(source, Sequence) else local_entries(source)


class NoRanksSelectedError(RankFilterError):
    """A well-formed ``--ranks`` expression that selects none of the job's ranks (a usage error:
    diagnosing it would report a clean job of 0/0 ranks)."""


def check_rank_selection(expression: str | None, frames: Sequence[pd.DataFrame]) -> None:
    """Raise :class:`NoRanksSelectedError` (naming the ranks present and expected) when ``expression``
    selects none of the ranks that the events ``frames`` (a job's sessions) hold or expect; a job with
    no events passes (it is judged empty, not filtered). :class:`RankFilterError` when malformed."""
    if not expression:
        return
    present: set[int] = set()
    expected: set[int] = set()
    for events in frames:
        if len(events):
            present.update(distinct_ints(events["rank"].to_numpy()).tolist())
            expected.update(expected_ranks(events["rank"].to_numpy(), events["world_size"].to_numpy()))
    if not expected or parse_rank_filter(expression, expected):
        return
    extra = sorted(expected - present)
    raise NoRanksSelectedError(
        f"--ranks {expression!r} selects none of the job's ranks: present {format_ranks(present) or 'none'}"
        + (f", expected but missing {format_ranks(extra)}" if extra else ""))


def diagnose_loaded(
    loaded: LoadResult, *, job_id: str, source_name: str, options: DiagnoseOptions, fingerprint: str
) -> Diagnosis:
    """Diagnose the session ``loaded`` holds (rank filter, model, verdict, model.json document);
    raises :class:`~stormwatch.analysis.rank_filter.RankFilterError` for a malformed rank filter."""
    selected = None
    if options.ranks:
        events = loaded.events
        available = expected_ranks(events["rank"].to_numpy(), events["world_size"].to_numpy())
        selected = parse_rank_filter(options.ranks, available)
    model = build_model(loaded.events, selected, collective_preset=options.preset)
    verdict = decide_verdict(model, events=len(loaded.events), fail_on=options.fail_on, oom_dumps=loaded.oom_dumps)
    document = session_document(
        loaded,
        model,
        verdict,
        job_id=job_id,
        source=source_name,
        fingerprint=fingerprint,
        engine_version=ENGINE_VERSION,
        options=options.recorded(),
        fleet=fleet_facts(loaded, model, growth_settings=options.growth_settings()),
    )
    return Diagnosis(job_id=job_id, loaded=loaded, model=model, verdict=verdict, document=document)


def default_job_id(paths: Sequence[str | Path]) -> str:
    """A job id for local sources: the folder's name, else the first path's stem."""
    first = Path(paths[0]).expanduser().resolve()
    return first.name if len(paths) == 1 and first.is_dir() else first.stem or os.path.basename(str(first))
