"""``nightly-audit``: diagnose every changed job under a storage root, then publish the fleet.

Steps: list jobs (refused ids are recorded, never touched); one ``diagnose-job``
task per job (model.json and report.html), in parallel on the flow's task
runner (threads by default, a Dask cluster when asked); fleet.json,
fleet.parquet and index.html; a link artifact per published report;
notifications for critical first causes. The whole run holds the storage's
audit lease (:mod:`stormwatch.tasks.storage.lease`): a second audit started meanwhile returns at
once, so outputs are never written, nor notifications sent, twice.
A job that fails is recorded as failed with its error; the others go on.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact
from prefect.futures import PrefectFuture, as_completed
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.flows.parameters import AuditParameters
from stormwatch.outputs.fleet import FleetRow, JobStatus, failed_row, fleet_document
from stormwatch.outputs.verdict import ExitCode, VerdictStatus
from stormwatch.tasks.diagnose import AuditOptions, JobOutcome, diagnose_job
from stormwatch.tasks.notify.dispatch import NotifySettings
from stormwatch.tasks.notify.step import notify_task
from stormwatch.tasks.publish import publish_fleet_task
from stormwatch.tasks.retry import FLEET_IO_RETRY
from stormwatch.tasks.storage.lease import AUDIT_LEASE, acquire, default_owner, holder
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import INDEX_HTML_KEY, JobListing, StorageSettings

PROGRESS_MIN_JOBS = 4


@task(name="list-jobs", **FLEET_IO_RETRY.task_options())
def list_jobs(settings: StorageSettings) -> JobListing:
    return storage_for(settings).list_jobs()


class JobProgress:
    """A rich progress bar on stderr for the jobs of an audit, as a context manager.

    Shown only when asked, when stderr is a terminal and when at least :data:`PROGRESS_MIN_JOBS`
    jobs run; otherwise nothing is written. ``step`` counts one finished job (``done`` never
    exceeds ``total``) and shows its id (first 40 characters, as plain text: a job id is never
    read as rich markup). Leaving the block stops the bar, keeping its last line.
    """

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total, self.done = total, 0
        self.enabled = enabled and total >= PROGRESS_MIN_JOBS and sys.stderr.isatty()
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> JobProgress:
        if self.enabled:
            label = TextColumn("{task.description}", markup=False,
                               table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"))  # the rest of a line
            self._bar = Progress(BarColumn(bar_width=30), TextColumn("{task.completed:.0f}/{task.total:.0f} jobs"),
                                 TimeElapsedColumn(), label, expand=True,
                                 console=Console(file=sys.stderr, force_terminal=True))
            self._task = self._bar.add_task("", total=self.total)
            self._bar.start()
        return self

    def step(self, label: str) -> None:
        self.done = min(self.done + 1, self.total)
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done, description=label[:40], refresh=True)

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _outcome(future: PrefectFuture[JobOutcome], job_id: str) -> JobOutcome:
    """The task's outcome, or a failed row carrying its error (the local result, not the API's state)."""
    try:
        result: Any = future.result(raise_on_failure=False)
    except Exception as exc:  # a crashed run raises even without raise_on_failure
        result = exc
    if isinstance(result, JobOutcome):
        return result
    error = f"{type(result).__name__}: {result}" if isinstance(result, BaseException) else repr(result)
    return JobOutcome(failed_row(job_id, status=JobStatus.FAILED, error=error))


def run_jobs(
    settings: StorageSettings, job_ids: Sequence[str], options: AuditOptions, *, progress: bool = False
) -> list[JobOutcome]:
    """Submit one task per job and collect an outcome per job, failed ones included."""
    futures = {diagnose_job.submit(settings, job_id, options): job_id for job_id in job_ids}
    outcomes: list[JobOutcome] = []
    with JobProgress(len(futures), enabled=progress) as bar:
        for future in as_completed(list(futures)):
            job_id = futures[future]
            outcomes.append(_outcome(future, job_id))
            bar.step(job_id)
    return outcomes


def audit_options(params: AuditParameters) -> AuditOptions:
    """The per-job options from the flow parameters (ValueError names a bad one)."""
    diagnose = DiagnoseOptions.parse(fail_on=params.fail_on.value, preset=params.preset.value,
                                     max_artifact_bytes=params.max_artifact_bytes, max_events=params.max_events)
    return AuditOptions(diagnose, force=params.force, max_bytes=params.max_job_bytes,
                        report_base_url=params.report_base_url)


def notify_settings(params: AuditParameters, *, digest: bool) -> NotifySettings:
    """Channels from this run's environment (STORMWATCH_SLACK_WEBHOOK, STORMWATCH_SMTP_URL, ...) or the
    Prefect Secret blocks the parameters name, resolved once here: flow parameters never carry a secret
    (Prefect stores parameters). Parameter values win over the environment."""
    return NotifySettings.from_sources(flags=params.notify_flags(digest=digest), environ=os.environ,
                                       blocks=params.secret_blocks())


def notify_outcomes(
    settings: StorageSettings, outcomes: Sequence[JobOutcome], notify: NotifySettings
) -> dict[str, Any]:
    """Run the notify step; its failure is logged, never the audit's."""
    findings = [outcome.finding for outcome in outcomes if outcome.finding is not None]
    future = notify_task.submit(settings, findings, notify, datetime.now(UTC))
    result: Any = future.result(raise_on_failure=False)
    if isinstance(result, BaseException):
        get_run_logger().error("notifications not processed: %s", type(result).__name__)
        return {"error": type(result).__name__}
    return dict(result)


def artifact_key(job_id: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")[:60] or "job"
    digest = hashlib.sha1(job_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"report-{cleaned}-{digest}"


def link_reports(settings: StorageSettings, rows: Sequence[FleetRow], options: AuditOptions) -> int:
    """A Prefect link artifact for the index and each report published in this run."""
    storage = storage_for(settings)
    create_link_artifact(link=options.report_link(storage, INDEX_HTML_KEY), link_text="fleet index",
                         key="stormwatch-fleet-index", description="stormwatch fleet index")
    published = [row for row in rows if row.status is JobStatus.DIAGNOSED and row.report]
    for row in published:
        text = re.sub(r"[\[\]()<>`*_]", "", row.job_id)[:120] or "report"
        create_link_artifact(link=options.report_link(storage, str(row.report)), link_text=text,
                             key=artifact_key(row.job_id), description=f"{row.verdict} - stormwatch report")
    return len(published)


def summarise(rows: Sequence[FleetRow], fleet: dict[str, Any]) -> dict[str, Any]:
    """What the flow returns: fleet counts, the worst exit code, jobs needing attention."""
    counted = (ExitCode.CLEAN, ExitCode.FINDINGS)
    exit_code = int(max((row.exit_code or ExitCode.CLEAN for row in rows if row.exit_code in counted),
                        default=ExitCode.CLEAN))
    return {
        "summary": fleet["summary"],
        "exit_code": exit_code,
        "failed": sorted(row.job_id for row in rows if row.status is JobStatus.FAILED),
        "refused": sorted(row.job_id for row in rows if row.status is JobStatus.REFUSED),
        "critical": sorted(row.job_id for row in rows if row.verdict is VerdictStatus.CRITICAL),
    }


@flow(name="nightly-audit", log_prints=False)
def nightly_audit(params: AuditParameters, progress: bool = False) -> dict[str, Any]:
    """Audit every job under ``params.storage`` (a folder or ``s3://bucket/prefix``); ``progress``: a
    progress bar on a terminal (the command line asks for it)."""
    logger = get_run_logger()
    settings = params.storage_settings()
    options = audit_options(params)
    notify = notify_settings(params, digest=params.digest)
    lease = acquire(storage_for(settings), name=AUDIT_LEASE, owner=default_owner("nightly-audit"))
    if lease is None:  # another audit is at work on this storage: do nothing, never wait
        busy = holder(storage_for(settings), name=AUDIT_LEASE)
        message = f"another audit holds the lease {busy.describe() if busy else '(released just now)'}"
        logger.warning("not auditing: %s", message)
        result = summarise([], fleet_document([], generated_at=datetime.now(UTC), storage=params.storage))
        return {**result, "lease": message}
    try:
        with lease.kept_alive():
            listing = list_jobs(settings)
            logger.info("%d jobs to audit, %d refused ids", len(listing.job_ids), len(listing.refused))
            outcomes = run_jobs(settings, listing.job_ids, options, progress=progress)
            rows = [outcome.row for outcome in outcomes]
            rows += [failed_row(item.raw_id, status=JobStatus.REFUSED, error=item.reason) for item in listing.refused]
            lease.renew()  # still ours before writing fleet-wide outputs (raises LeaseLostError if not)
            fleet = publish_fleet_task(settings, rows, datetime.now(UTC))
            link_reports(settings, rows, options)
            result = summarise(rows, fleet)
            result["index"] = options.report_link(storage_for(settings), INDEX_HTML_KEY)
            lease.renew()  # and before notifying: a lost lease must never send twice
            result["notifications"] = notify_outcomes(settings, outcomes, notify)
    finally:
        lease.release()
    logger.info("audit done: %s", result["summary"])
    return result
