"""Which attempt a job's page details: the one its verdict comes from (issue 28).

A job diagnosed session by session has one document per session and a job document that is the
default session's (the one stormlog selects: usually the latest) with the job's verdict, which comes
from its worst attempt. When the worst attempt is not the default one (an OOM, then a clean restart),
the page must tell the worst attempt's story, so it is rendered with that session's own document
beside the job's (:func:`stormwatch.reports.render.render_job`'s ``detail``):

- the pipeline has it in memory: :func:`detail_document` picks it out of a
  :class:`~stormwatch.diagnose_sessions.JobDiagnosis`;
- a page rendered again from stored files reads it from :func:`detail_model_path`, the worst
  attempt's ``sessions/<encoded id>/model.json`` relative to the job's report folder.

Without it (not written, or not read) the page details the default session and says where the
verdict comes from, linked.
"""

from __future__ import annotations

from stormwatch.diagnose_sessions import JobDiagnosis
from stormwatch.outputs.document import JobDocument


def _needs_detail(document: JobDocument) -> bool:
    worst = document.worst_session
    return worst is not None and worst != document.selected_session_id


def detail_document(diagnosis: JobDiagnosis) -> JobDocument | None:
    """The worst attempt's own document when the job's page should detail it (it is not the default
    session), None otherwise or when that session was not diagnosed."""
    document = diagnosis.document
    if not _needs_detail(document):
        return None
    for result in diagnosis.sessions:
        if result.session_id == document.worst_session and result.diagnosis is not None:
            return result.diagnosis.document.with_generated_at(document.generated_at)
    return None


def detail_model_path(document: JobDocument) -> str | None:
    """Where the worst attempt's model.json is (relative to the job's report folder) when the page
    should detail it; None when the default session is the worst or its outputs were not written."""
    if not _needs_detail(document):
        return None
    for entry in document.attempts or ():
        if entry.attempt.session_id == document.worst_session:
            return entry.attempt.model
    return None


def detailed(document: JobDocument, detail: JobDocument | None) -> JobDocument:
    """The document whose session the page details: ``detail`` when it is the worst attempt's of
    ``document``'s job, else ``document`` itself (a stray document is never shown as the job's)."""
    if detail is None or not _needs_detail(document) or detail.selected_session_id != document.worst_session:
        return document
    return detail
