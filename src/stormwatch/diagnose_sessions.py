"""Diagnose every session of a job: one parse, then each session group as ``--session ID`` would.

:func:`diagnose_job` loads the job once (:func:`~stormwatch.load.loader.load_sessions`), splits it
into its session groups (stormlog's distributed rank groups, its legacy merge, and every session
outside a group), diagnoses each of them (:func:`~stormwatch.diagnose.diagnose_loaded`
over the session's own events: its model equals stormlog 0.3.5's for that session id), and
assembles the job document (:mod:`stormwatch.outputs.job_document`). Sessions are built on a thread
pool of ``workers`` threads; one by default (:data:`DEFAULT_SESSION_THREADS` says why).

Limits: at most ``options.max_sessions`` groups are diagnosed, the default session and the most
recent others; the rest are listed (attempts without a verdict) and counted, with a warning. A
session whose diagnosis raises is recorded with its error (``Type: message``) and the others still
are; a session whose id cannot name a folder (:mod:`stormwatch.outputs.session_paths`) is diagnosed
and counted, but gets no outputs of its own. Writing the outputs is the caller's: one that fails for
a session is recorded with :meth:`JobDiagnosis.with_output_errors`.

Without ``options.all_sessions`` the job is the one session ``options.session_id`` (else the
default) names, as :func:`~stormwatch.diagnose.diagnose` has it, and its document has no ``attempts``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stormwatch.analysis.rank_filter import RankFilterError
from stormwatch.diagnose import DiagnoseOptions, Diagnosis, check_rank_selection, diagnose_loaded, source_entries
from stormwatch.events.sessions import SessionPart, select_default
from stormwatch.load.loader import JobLoad, load_sessions
from stormwatch.load.tree import ArtifactTree, Entry
from stormwatch.outputs.attempts import Attempt, attempt_status, first_causes, oom_ranks
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.document_attempts import session_rank_rows
from stormwatch.outputs.job_document import job_document, job_verdict
from stormwatch.outputs.model_json import input_fingerprint
from stormwatch.outputs.session_paths import UnsafeSessionIdError, folder_href, session_folder
from stormwatch.outputs.verdict import Verdict


@dataclass(frozen=True, eq=False)
class SessionResult:
    """One session group of a job: its diagnosis, or why there is none (``error``), and the folder
    of its own outputs (None: its id cannot name one, ``folder_error`` says why)."""

    part: SessionPart = field(repr=False)
    diagnosis: Diagnosis | None = None
    error: str | None = None
    folder: str | None = None
    folder_error: str | None = None

    @property
    def session_id(self) -> str:
        return self.part.summary.session_id

    @property
    def written(self) -> bool:
        """Whether this session gets a model.json and report.html of its own."""
        return self.diagnosis is not None and self.folder is not None


@dataclass(frozen=True, eq=False)
class JobDiagnosis:
    """A job's diagnosis: ``main`` the session its document shows (the default one), ``sessions``
    every session group diagnosed (none without ``all_sessions``), ``attempts`` every group in time
    order, ``verdict`` and ``document`` the job's. ``session_documents``: the per-session documents
    (the history keeps a job per session), else the job's document alone. ``group_count``: the
    session groups the job holds, whether or not each was diagnosed."""

    job_id: str
    main: Diagnosis
    sessions: tuple[SessionResult, ...] = ()
    attempts: tuple[Attempt, ...] = ()
    verdict: Verdict | None = None
    document: JobDocument = field(kw_only=True, repr=False)
    inputs: _JobInputs | None = field(default=None, repr=False)
    group_count: int = 1

    @property
    def session_documents(self) -> tuple[JobDocument, ...]:
        if not self.sessions:
            return (self.document,)
        return tuple(result.diagnosis.document for result in self.sessions if result.diagnosis is not None)

    def with_output_errors(self, errors: Mapping[str, str]) -> JobDiagnosis:
        """The job once some sessions' outputs could not be written (``errors``: message by session id):
        their attempts lose their links and carry the error; the job's warnings say so."""
        if not errors or self.inputs is None:
            return self
        sessions = tuple(replace(result, folder=None, folder_error=errors[result.session_id])
                         if result.session_id in errors else result for result in self.sessions)
        return _assemble(self.inputs, sessions)


@dataclass(frozen=True, eq=False)
class _JobInputs:
    """What assembling the job document needs besides the sessions' results."""

    job_id: str
    load: JobLoad = field(repr=False)
    groups: tuple[SessionPart, ...] = field(repr=False)
    options: DiagnoseOptions
    main_id: str | None
    skipped: int


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _chosen(groups: Sequence[SessionPart], default_id: str | None, cap: int) -> list[SessionPart]:
    """The groups diagnosed under ``cap``: the default one and the most recent others."""
    if len(groups) <= cap:
        return list(groups)
    recent = sorted(groups, key=lambda part: (-part.summary.started_at_ns, part.summary.session_id))
    default = [part for part in groups if part.summary.session_id == default_id]
    others = [part for part in recent if part.summary.session_id != default_id]
    return [*default, *others][:cap]


def _diagnose_one(part: SessionPart, job: JobLoad, *, job_id: str, source_name: str, options: DiagnoseOptions,
                  fingerprint: str) -> SessionResult:
    session_id = part.summary.session_id
    try:
        folder, folder_error = session_folder(session_id), None
    except UnsafeSessionIdError as exc:
        folder, folder_error = None, str(exc)
    try:
        diagnosis = diagnose_loaded(job.result_for(session_id), job_id=job_id, source_name=source_name,
                                    options=options.for_session(session_id), fingerprint=fingerprint)
    except RankFilterError:
        raise  # a usage error: the job's, not this session's
    except Exception as exc:  # one session that cannot be diagnosed never stops the others
        return SessionResult(part=part, error=_error(exc), folder=folder, folder_error=folder_error)
    return SessionResult(part=part, diagnosis=diagnosis, folder=folder, folder_error=folder_error)


def _ended_ns(part: SessionPart, job: JobLoad) -> int | None:
    """When the attempt ended: its session's end, else the latest end of its members (a rank group
    ends only when all of them completed), else its last event; None without any of them."""
    if part.summary.ended_at_ns is not None:
        return part.summary.ended_at_ns
    members = set(part.members)
    ends = [other.summary.ended_at_ns for other in job.parts
            if other.summary.session_id in members and other.summary.ended_at_ns is not None]
    if ends:
        return max(ends)
    return int(part.events["timestamp_ns"].max()) if len(part.events) else None


def _attempts(inputs: _JobInputs, results: Mapping[str, SessionResult]) -> list[Attempt]:
    statuses = {part.summary.session_id: part.summary.status for part in inputs.load.parts}
    ordered = sorted(inputs.groups, key=lambda part: (part.summary.started_at_ns, part.summary.session_id))
    latest_start = max((part.summary.started_at_ns for part in ordered), default=0)
    attempts = []
    for number, part in enumerate(ordered, start=1):
        summary, result = part.summary, results.get(part.summary.session_id)
        own = [statuses[member] for member in part.members if member in statuses] or [summary.status]
        ended = _ended_ns(part, inputs.load)
        restarted = latest_start > (summary.started_at_ns if ended is None else ended)  # a later attempt followed
        attempt = Attempt(number=number, of=len(ordered), session_id=summary.session_id,
                          status=attempt_status(own, restarted=restarted), session_status=summary.status,
                          started_at_ns=summary.started_at_ns, ended_at_ns=ended,
                          default=summary.session_id == inputs.main_id)
        if result is None:
            attempt = replace(attempt, error=f"not diagnosed: over --max-sessions {inputs.options.max_sessions}")
        elif result.diagnosis is None:
            attempt = replace(attempt, error=result.error)
        else:
            model, verdict = result.diagnosis.model, result.diagnosis.verdict
            earliest, most_severe = first_causes(model)
            folder = result.folder
            attempt = replace(attempt, ranks_present=len(model.present_ranks), ranks_expected=len(model.expected_ranks),
                              verdict=verdict.status, summary=verdict.summary, earliest=earliest,
                              most_severe=most_severe, oom_ranks=oom_ranks(model), error=result.folder_error,
                              report=None if folder is None else folder_href(folder, "report.html"),
                              model=None if folder is None else folder_href(folder, "model.json"))
        attempts.append(attempt)
    return attempts


def _warnings(inputs: _JobInputs, attempts: Sequence[Attempt]) -> list[str]:
    out = []
    if inputs.skipped:
        out.append(f"{inputs.skipped} of {len(inputs.groups)} sessions not diagnosed (over --max-sessions "
                   f"{inputs.options.max_sessions}): only the default session and the most recent ones are")
    for attempt in attempts:
        if attempt.error is not None and not attempt.error.startswith("not diagnosed: over"):
            state = "diagnosed, not written" if attempt.diagnosed else "not diagnosed"
            out.append(f"session {attempt.session_id} ({state}): {attempt.error}")
    return out


def _assemble(inputs: _JobInputs, sessions: tuple[SessionResult, ...]) -> JobDiagnosis:
    results = {result.session_id: result for result in sessions}
    diagnosed = [result.diagnosis for result in sessions if result.diagnosis is not None]
    if not diagnosed:
        failed = next((result for result in sessions if result.error is not None), None)
        raise RuntimeError(f"no session of job {inputs.job_id} could be diagnosed"
                           + (f" (session {failed.session_id}: {failed.error})" if failed else ""))
    main = results[inputs.main_id].diagnosis if inputs.main_id in results else None
    if main is None:  # the default session failed: the next session stormlog would prefer stands in
        fallback = select_default([result.part for result in sessions if result.diagnosis is not None])
        main = results[fallback.summary.session_id].diagnosis if fallback is not None else diagnosed[0]
    assert main is not None
    attempts = _attempts(replace(inputs, main_id=main.loaded.selected_session_id), results)
    verdicts = {result.session_id: result.diagnosis.verdict for result in sessions if result.diagnosis is not None}
    verdict = job_verdict(attempts, verdicts, fail_on=inputs.options.fail_on)
    assert verdict is not None  # some session was diagnosed
    ranks = {result.session_id: session_rank_rows(result.diagnosis.document.model, result.diagnosis.document.fleet)
             for result in sessions if result.diagnosis is not None}
    document = job_document(main.document, attempts=attempts, ranks=ranks, verdict=verdict,
                            options=inputs.options.recorded(), warnings=_warnings(inputs, attempts),
                            session_count=len(inputs.groups))
    return JobDiagnosis(job_id=inputs.job_id, main=main, sessions=sessions, attempts=tuple(attempts), verdict=verdict,
                        document=document, inputs=inputs, group_count=len(inputs.groups))


#: Threads building a job's sessions by default: one, since a session's work (markers, model, facts,
#: the JSON-safe document) holds the GIL nearly all the time, so a second thread only adds switching
#: (see bench/README.md, sessions_bench.py). ``workers`` (or :func:`session_workers` with ``threads``)
#: asks for more where the work releases the GIL.
DEFAULT_SESSION_THREADS = 1


def session_workers(sessions: int, *, threads: int | None = None) -> int:
    """Threads building ``sessions`` sessions: ``threads`` (None: :data:`DEFAULT_SESSION_THREADS`;
    0: one per core), at most one per session, at least one."""
    wanted = DEFAULT_SESSION_THREADS if threads is None else threads or (os.cpu_count() or 1)
    return max(1, min(sessions, wanted))


def diagnose_job(
    source: Sequence[str | Path] | ArtifactTree,
    *,
    job_id: str,
    source_name: str,
    options: DiagnoseOptions | None = None,
    entries: Sequence[Entry] | None = None,
    workers: int | None = None,
) -> JobDiagnosis:
    """Diagnose the job in ``source``: every session group with ``options.all_sessions`` (on
    ``workers`` threads, default :func:`session_workers`; 0: one per core), else one session.

    Raises as :func:`~stormwatch.diagnose.diagnose` does (a malformed rank filter or one selecting
    none of the job's ranks, a job over its
    event cap, an unknown ``options.session_id``), and RuntimeError when no session could be diagnosed.
    """
    options = options or DiagnoseOptions()
    fingerprint = input_fingerprint(source_entries(source) if entries is None else entries)
    job = load_sessions(source, limits=options.limits)
    groups = job.groups()
    if not options.all_sessions or not groups:
        loaded = job.result_for(options.session_id)
        check_rank_selection(options.ranks, [loaded.events])
        main = diagnose_loaded(loaded, job_id=job_id, source_name=source_name, options=options,
                               fingerprint=fingerprint)
        return JobDiagnosis(job_id=job_id, main=main, verdict=main.verdict, document=main.document,
                            group_count=max(1, len(groups)))
    check_rank_selection(options.ranks, [part.events for part in groups])  # the job's ranks, once
    chosen = _chosen(groups, job.default_session_id, options.max_sessions)
    count = session_workers(len(chosen), threads=workers)
    common: dict[str, Any] = {"job": job, "job_id": job_id, "source_name": source_name, "options": options,
                              "fingerprint": fingerprint}
    if count == 1 or len(chosen) == 1:
        sessions = tuple(_diagnose_one(part, **common) for part in chosen)
    else:
        with ThreadPoolExecutor(max_workers=count, thread_name_prefix="session") as pool:
            sessions = tuple(pool.map(lambda part: _diagnose_one(part, **common), chosen))
    inputs = _JobInputs(job_id=job_id, load=job, groups=groups, options=options, main_id=job.default_session_id,
                        skipped=len(groups) - len(chosen))
    return _assemble(inputs, sessions)
