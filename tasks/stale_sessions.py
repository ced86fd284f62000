"""Session reports a job no longer has, removed once its new diagnosis is stored.

A job's sessions can change between two diagnoses: a rank group gains a member and its
synthesized id with it, new legacy files change the legacy merge, ``--max-sessions`` leaves an
old attempt undiagnosed. The job document only links the sessions written now, so the folders
of the others (``reports/<job>/sessions/<encoded id>/``) would linger as unreachable pages of an
older diagnosis. After the job's own reports are written, the report files of every listed
session folder that this diagnosis did not write are deleted. Nothing else is touched: only
``model.json`` and ``report.html`` of folders that were listed under the job's ``sessions/``.

A deletion that fails is left for the next diagnosis of the job (its listing finds the folder
again); it never fails the job, whose reports are already stored.
"""

from __future__ import annotations

from collections.abc import Iterable

from stormwatch.diagnose_sessions import JobDiagnosis
from stormwatch.tasks.storage.inventory import REPORT_FILES, SESSIONS_FOLDER, session_folders
from stormwatch.tasks.storage.protocol import Storage


def written_folders(diagnosis: JobDiagnosis) -> frozenset[str]:
    """The session folders (``sessions/<encoded id>``) whose reports this diagnosis wrote (after
    :meth:`~stormwatch.diagnose_sessions.JobDiagnosis.with_output_errors`, a session whose outputs
    could not be written has no folder)."""
    return frozenset(result.folder for result in diagnosis.sessions if result.written and result.folder is not None)


def listed_folders(storage: Storage, job_id: str) -> frozenset[str]:
    """The job's session folders holding a report, listed now (one listing of ``<job>/sessions/``)."""
    keys = [entry.key for entry in storage.list_reports(f"{job_id}/{SESSIONS_FOLDER}")]
    return session_folders(keys).get(job_id, frozenset())


def prune_sessions(storage: Storage, job_id: str, *, listed: Iterable[str], written: frozenset[str]) -> tuple[str, ...]:
    """Delete the report files of the ``listed`` session folders not in ``written``; the folders
    whose files are all gone now, sorted. Failures are skipped (see the module doc)."""
    removed = []
    for folder in sorted(set(listed) - written):
        gone = True
        for name in REPORT_FILES:
            try:
                storage.delete_report(f"{job_id}/{folder}/{name}")
            except Exception:  # never the job's failure: the next diagnosis lists the folder again
                gone = False
        if gone:
            removed.append(folder)
    return tuple(removed)
