"""One job of an audit: fetch its inputs, diagnose them, store model.json and report.html.

With ``diagnose.all_sessions`` (the audits' default) every session of the job is diagnosed and
gets ``<job>/sessions/<encoded id>/model.json`` and ``report.html`` beside the job's own; a session
whose outputs cannot be written (refused key, a storage error that is not transient) is recorded
with its error in the job's ``attempts`` and the others are written.

Plain functions, no Prefect: they run in the flow's threads, in the engine's worker
processes (:mod:`stormwatch.tasks.engine_pool`) or on Dask workers, so everything they
take and return pickles. :func:`run_job` never raises for a job: a storage or network
failure is retried with back-off (:data:`~stormwatch.tasks.retry.DIAGNOSE_JOB_RETRY`,
:func:`~stormwatch.tasks.retry.is_transient`), and whatever still fails, or fails at once
(bad input the engine refuses, a job over its byte cap), becomes that job's failed row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import quote

import pandas as pd
import pyarrow as pa

from stormwatch.alerting.findings import JobFinding
from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import JobDiagnosis, diagnose_job
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.job_regression import regression_summary
from stormwatch.history.regressions import RegressionThresholds
from stormwatch.history.rows import history_rows
from stormwatch.outputs.document import DocumentError, JobDocument
from stormwatch.outputs.fleet import FleetRow, JobStatus, failed_row, row_from_document
from stormwatch.outputs.media_types import MediaType
from stormwatch.outputs.model_json import input_fingerprint
from stormwatch.outputs.verdict import exit_code_for
from stormwatch.reports.jobattempts import PageNav
from stormwatch.reports.jobdetail import detail_document
from stormwatch.reports.render import render_job
from stormwatch.tasks.commits import committed_row
from stormwatch.tasks.retry import DIAGNOSE_JOB_RETRY, RetryPolicy, is_transient
from stormwatch.tasks.stale_sessions import listed_folders, prune_sessions, written_folders
from stormwatch.tasks.storage.inventory import MODEL_JSON, REPORT_HTML, SESSIONS_FOLDER, JobInputs
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import (
    Storage,
    StorageSettings,
    model_json_key,
    report_html_key,
)


@dataclass(frozen=True)
class AuditOptions:
    """How each job of an audit is handled; ``max_bytes`` caps a job's total input size
    (the per-artifact and event caps are ``diagnose.limits``).

    ``report_base_url``: where ``reports/`` is served over http(s), for links in
    notifications (else links are the storage's own ``s3://`` or ``file://`` URIs).
    ``job_retry``: attempts and waits for a job whose storage or network step failed transiently.
    ``session_workers``: threads building one job's sessions (None: the engine's default, one; 0: one
    per core); it changes no output.
    """

    diagnose: DiagnoseOptions = DiagnoseOptions()
    force: bool = False
    max_bytes: int | None = None
    report_base_url: str | None = None
    job_retry: RetryPolicy = DIAGNOSE_JOB_RETRY
    audit_time: datetime | None = None
    job_names: JobNamePattern = JobNamePattern()
    regression: RegressionThresholds = RegressionThresholds()
    session_workers: int | None = None

    def acting_at(self) -> datetime:
        """The audit's time (``--as-of``), else now: model.json's ``generated_at`` and the history's."""
        return self.audit_time or datetime.now(UTC)

    def report_link(self, storage: Storage, key: str) -> str:
        """The report's address: under ``report_base_url`` (each key segment percent-encoded, as
        a job id may hold ``[``, ``(`` or ``#``), else the storage's own URI."""
        return report_link(storage, key, base_url=self.report_base_url)


def report_link(storage: Storage, key: str, *, base_url: str | None) -> str:
    """See :meth:`AuditOptions.report_link`."""
    if base_url:
        path = "/".join(quote(part, safe="") for part in key.split("/"))
        return f"{base_url.rstrip('/')}/{path}"
    return storage.report_uri(key)


@dataclass(frozen=True)
class JobOutcome:
    """A job's fleet row and, when it has a model, what notifications need of it and its history
    rows (one per rank, :mod:`stormwatch.history.schema`)."""

    row: FleetRow
    finding: JobFinding | None = None
    history: pa.Table | None = None
    #: repairs made on the way, one line each (a killed write's temporary file removed)
    repaired: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobWork:
    """A job to diagnose and the earlier runs of its job name (one row per run, in run order, see
    :func:`stormwatch.history.frame.job_runs`; None: none kept). ``repair_of``: for a job diagnosed
    only to rewrite its outputs, the history file already holding its diagnosis's rows."""

    job: JobInputs
    earlier: pd.DataFrame | None = None
    repair_of: str | None = None



def _previous(storage: Storage, job_id: str) -> JobDocument | DocumentError | None:
    """The job's stored model.json: None when there is none, a DocumentError when it does not read
    (damaged: the job is diagnosed again, as if there were none)."""
    data = storage.read_report(model_json_key(job_id))
    if data is None:
        return None
    try:
        return JobDocument.from_json(data, name=f"{job_id}/model.json")
    except DocumentError as exc:
        return exc


def _unchanged(previous: JobDocument, fingerprint: str, options: DiagnoseOptions) -> bool:
    return previous.input_fingerprint == fingerprint and previous.options == options.recorded()


def _output_sizes(storage: Storage, job_id: str) -> dict[str, int]:
    """The sizes of the job's model.json and report.html, by report key (those that exist)."""
    wanted = (model_json_key(job_id), report_html_key(job_id))
    return {entry.key: entry.size_bytes for entry in storage.list_reports(job_id) if entry.key in wanted}


def _finding(document: JobDocument, link: str) -> JobFinding | None:
    try:
        return JobFinding.from_document(document.parsed(), report_url=link)
    except ValueError:
        return None  # nothing to notify about


def audit_one(
    storage: Storage, job_id: str, *, options: AuditOptions, earlier: pd.DataFrame | None = None
) -> JobOutcome:
    """Diagnose one job unless its inputs and options are those of its stored model.json and of its
    committed fleet row (a model.json alone, from an audit killed before its commit, is not enough);
    ``earlier``: the earlier runs of its job name (see :class:`JobWork`)."""
    entries = storage.job_entries(job_id)
    fingerprint = input_fingerprint(entries)
    previous = None if options.force else _previous(storage, job_id)
    report = report_html_key(job_id)
    link = options.report_link(storage, report)
    sizes = _output_sizes(storage, job_id)
    # a job with no outputs yet (a post-job's usual case) was never committed: no commit is read
    committed = None if options.force or not sizes else committed_row(storage, job_id)
    if (isinstance(previous, JobDocument) and _unchanged(previous, fingerprint, options.diagnose)
            and committed is not None and committed.input_fingerprint == fingerprint
            and len(sizes) == 2 and not committed.damaged_outputs(sizes)):
        row = row_from_document(previous, status=JobStatus.SKIPPED, report=report,
                                exit_code=exit_code_for(previous.verdict.status, options.diagnose.fail_on))
        return JobOutcome(row, _finding(previous, link))
    repair = None if committed is None else committed.repair_of(fingerprint, options.diagnose.recorded())
    return diagnose_inputs(storage, JobInputs(job_id, tuple(entries)), options=options, earlier=earlier,
                           listed_sessions=listed_folders(storage, job_id), repair_of=repair)


def write_sessions(storage: Storage, diagnosis: JobDiagnosis, *, generated_at: datetime) -> JobDiagnosis:
    """Each diagnosed session's model.json and report.html under ``<job>/sessions/<encoded id>/``; a session
    whose outputs cannot be written (a refused key, a storage error that is not transient) is recorded
    in the returned diagnosis, the others are written. Transient errors propagate (the job is retried)."""
    errors: dict[str, str] = {}
    labels = {attempt.session_id: attempt.describe() for attempt in diagnosis.attempts}
    for result in diagnosis.sessions:
        if not result.written or result.diagnosis is None or result.folder is None:
            continue
        document = result.diagnosis.document.with_generated_at(generated_at)
        folder = f"{diagnosis.job_id}/{result.folder}"
        nav = PageNav.for_session(depth=result.folder.count("/") + 1, attempt=labels.get(result.session_id))
        try:
            storage.write_report(f"{folder}/model.json", document.to_json(), content_type=MediaType.JSON)
            storage.write_report(f"{folder}/report.html", render_job(document, nav=nav).encode("utf-8"),
                                 content_type=MediaType.HTML)
        except Exception as exc:
            if is_transient(exc):
                raise
            errors[result.session_id] = f"its outputs were not written: {type(exc).__name__}: {exc}"
    return diagnosis.with_output_errors(errors)


def diagnose_inputs(
    storage: Storage, job: JobInputs, *, options: AuditOptions, earlier: pd.DataFrame | None = None,
    listed_sessions: frozenset[str] | None = None, repair_of: str | None = None,
) -> JobOutcome:
    """Diagnose a job from its listed inputs (no skip check here), compare it with ``earlier``
    runs of its job name (model.json's ``fleet.regression``) and store its reports (and, session by
    session, those of its sessions); its history rows are one per (session, rank). The session
    folders it no longer has (``listed_sessions``, else the inventory's ``job.session_folders``, else
    listed now, after sweeping the temporary files of writes killed there: a write that died in a
    session folder belongs to a diagnosis never committed, so its job is diagnosed again) lose their
    reports (:mod:`stormwatch.tasks.stale_sessions`). ``repair_of``: the history file that
    already holds this diagnosis's rows (its inputs and options are those committed; only its outputs
    were missing or damaged): the outcome then brings no history rows, and its row names that file."""
    listed = job.session_folders if listed_sessions is None else listed_sessions
    swept: list[str] = []
    if listed is None:  # a local inventory did not look into sessions/: killed writes' files are swept now
        swept = storage.sweep_temporaries_under(f"{job.job_id}/{SESSIONS_FOLDER}")
        listed = listed_folders(storage, job.job_id)
    repaired = tuple(f"{key}: a killed write's temporary file; removed" for key in swept)
    tree = storage.fetch_job(job.job_id, max_bytes=options.max_bytes,
                             max_artifact_bytes=options.diagnose.limits.max_artifact_bytes, entries=job.entries)
    acting_at = options.acting_at()
    diagnosis = diagnose_job(tree, job_id=job.job_id, source_name=storage.job_source(job.job_id),
                             options=options.diagnose, entries=job.entries, workers=options.session_workers)
    diagnosis = write_sessions(storage, diagnosis, generated_at=acting_at)
    history = history_rows(diagnosis.session_documents, job_names=options.job_names, audit_time=acting_at)
    regression = regression_summary(job.job_id, history, earlier, thresholds=options.regression)
    document = diagnosis.document.with_generated_at(acting_at).with_regression(regression)
    report = report_html_key(job.job_id)
    # the page details the attempt the verdict comes from (its own document, when not the default session's)
    model_json, page = document.to_json(), render_job(document, detail=detail_document(diagnosis)).encode("utf-8")
    storage.write_report(model_json_key(job.job_id), model_json, content_type=MediaType.JSON)
    storage.write_report(report, page, content_type=MediaType.HTML)
    prune_sessions(storage, job.job_id, listed=listed, written=written_folders(diagnosis))
    row = row_from_document(document, status=JobStatus.DIAGNOSED, report=report)
    # the sizes written, so that a later audit can tell a report file cut short (tasks/plan.py)
    row = replace(row, output_bytes={MODEL_JSON: len(model_json), REPORT_HTML: len(page)})
    finding = _finding(document, options.report_link(storage, report))
    if repair_of is not None:  # a repair: the history has this run already
        return JobOutcome(replace(row, history_key=repair_of), finding, repaired=repaired)
    return JobOutcome(row, finding, history, repaired)


def failed_outcome(job_id: str, error: BaseException | str) -> JobOutcome:
    """A job that could not be diagnosed: its row carries the error, ``Type: message``."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return JobOutcome(failed_row(job_id, status=JobStatus.FAILED, error=text))


def run_job(work: JobWork, settings: StorageSettings, options: AuditOptions) -> JobOutcome:
    """:func:`diagnose_inputs` on this process's storage for ``settings``, retried while it fails
    transiently (``options.job_retry``); never raises for the job (its failure is its row)."""
    outcome: list[JobOutcome] = []
    attempted = options.job_retry.run(lambda: outcome.append(
        diagnose_inputs(storage_for(settings), work.job, options=options, earlier=work.earlier,
                        repair_of=work.repair_of)))
    if attempted.error is not None:
        return failed_outcome(work.job.job_id, attempted.error)
    return outcome[0]
