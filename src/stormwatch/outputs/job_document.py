"""Building job documents (:class:`~stormwatch.outputs.document.JobDocument`): a session's from what
the engine found (:func:`session_document`), and a job's from its sessions' (:func:`job_document`).

A job diagnosed session by session is the default session's document (``model``, ``sessions``,
``fleet``... exactly as a one-session diagnosis writes them, so tools reading model.json see what
they always saw) with:

- ``verdict``: the job's, the worst verdict of its sessions (:func:`job_verdict`); its summary
  names the attempt it comes from when the job has more than one;
- ``attempts``: one :class:`~stormwatch.outputs.document_attempts.AttemptEntry` per session, in
  time order, each with ``ranks``: its rank rows and facts (what fleet.parquet holds of it);
- ``session_count`` (every session group, diagnosed or not), ``sessions_diagnosed``,
  ``worst_session`` (the session id the verdict comes from);
- ``options``: the job's (``all_sessions``, ``max_sessions``), and the job's ``warnings`` (sessions
  over the cap, sessions that could not be diagnosed or written) after the loader's and after the
  sentences naming files that end mid-record; those files' ``cut_short`` member is the default
  session's unchanged: it lists every session's (:mod:`stormwatch.outputs.cut_short`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.load.loader import LoadResult
from stormwatch.outputs.attempts import Attempt, worst_attempt
from stormwatch.outputs.cut_short import CutShortEntry, cut_short_warnings
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.document_attempts import AttemptEntry, SessionRankRow
from stormwatch.outputs.document_fleet import FleetMember
from stormwatch.outputs.model_json import json_safe
from stormwatch.outputs.recorded_options import OptionValue, RecordedOptions
from stormwatch.outputs.verdict import Verdict, exit_code_for
from stormwatch.peers.job_facts import FleetFacts
from stormwatch.severity import FailOn


def session_document(
    loaded: LoadResult,
    model: DiagnosticsModel,
    verdict: Verdict,
    *,
    job_id: str,
    source: str,
    fingerprint: str,
    engine_version: str,
    options: Mapping[str, OptionValue],
    fleet: FleetFacts | None,
    generated_at: datetime | None = None,
) -> JobDocument:
    """The document of the session ``loaded`` holds, as ``model`` diagnosed it (``generated_at``:
    now unless given), made JSON-safe (:func:`~stormwatch.outputs.model_json.json_safe`).

    ``options`` records how the job was diagnosed (rank filter, session, preset): an audit
    re-diagnoses a job whose inputs are unchanged when these differ. ``fleet``: the session's fleet
    facts, written beside ``model`` (its ``regression`` is the audit's to fill; None: no member).
    """
    selected = loaded.selected_session_id
    found = JobDocument(
        job_id=job_id, source=source, generated_at=generated_at or datetime.now(UTC), engine_version=engine_version,
        input_fingerprint=fingerprint, options=RecordedOptions(options), selected_session_id=selected,
        sessions=loaded.sessions, sources_loaded=loaded.sources_loaded,
        warnings=(*loaded.warnings, *cut_short_warnings(loaded.cut_short, selected_session_id=selected)),
        cut_short=tuple(CutShortEntry.of(file) for file in loaded.cut_short), oom_dumps=loaded.oom_dumps,
        verdict=verdict, model=model,
        fleet=None if fleet is None else FleetMember(facts=fleet),
    )
    # telemetry's own strings, integers and nesting reach the document unchecked: what it holds is what
    # its model.json holds, so it is read back from its JSON-safe data (arrays are not copied)
    return JobDocument.from_data(json_safe(found.as_data()), name=f"the model.json of job {job_id}")


def job_verdict(attempts: Sequence[Attempt], verdicts: Mapping[str, Verdict], *, fail_on: FailOn) -> Verdict | None:
    """The job's verdict: that of its worst attempt (``verdicts``: by session id), exit code under
    ``fail_on``. One diagnosed attempt gives its verdict unchanged; with several the summary says
    which attempt it is (``critical: from attempt 1 of 2, interrupted, OOM on rank 3 (session s-1);
    4/4 ranks present; ...``). None when no attempt was diagnosed."""
    worst = worst_attempt(attempts)
    if worst is None or worst.verdict is None:
        return None
    own = verdicts[worst.session_id]
    if sum(attempt.diagnosed for attempt in attempts) == 1:
        return own
    _, _, rest = own.summary.partition(": ")
    summary = f"{worst.verdict.value}: from {worst.describe()} (session {worst.session_id}); {rest or own.summary}"
    return Verdict(worst.verdict, exit_code_for(worst.verdict, fail_on), summary)


def job_document(
    base: JobDocument,
    *,
    attempts: Sequence[Attempt],
    ranks: Mapping[str, Sequence[SessionRankRow]],
    verdict: Verdict,
    options: Mapping[str, OptionValue],
    warnings: Sequence[str],
    session_count: int,
) -> JobDocument:
    """The job document from ``base`` (the default session's document); ``ranks``: each diagnosed
    attempt's rank rows by session id (:func:`~stormwatch.outputs.document_attempts.session_rank_rows`)."""
    worst = worst_attempt(attempts)
    entries = [AttemptEntry(attempt=attempt, ranks=tuple(ranks.get(attempt.session_id, ()))) for attempt in attempts]
    return base.for_job(options=options, warnings=warnings, verdict=verdict, attempts=entries,
                        session_count=session_count, worst_session=None if worst is None else worst.session_id)
