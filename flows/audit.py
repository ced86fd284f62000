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

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.outputs.fleet import FleetRow, JobStatus, failed_row, fleet_document
from stormwatch.outputs.model_json import EXIT_FINDINGS
from stormwatch.tasks.diagnose import AuditOptions, JobOutcome, diagnose_job
from stormwatch.tasks.notify.dispatch import NotifySettings
from stormwatch.tasks.notify.step import notify_task
from stormwatch.tasks.publish import publish_fleet_task
from stormwatch.tasks.storage.lease import AUDIT_LEASE, acquire, default_owner, holder
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import INDEX_HTML_KEY, JobListing, StorageSettings

PROGRESS_MIN_JOBS = 4


@task(name="list-jobs", retries=3, retry_delay_seconds=[1, 5, 20])
def list_jobs(settings: StorageSettings) -> JobListing:
    return storage_for(settings).list_jobs()


class Progress:
    """A one-line progress bar on stderr, only when it is a terminal and enough jobs run."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total, self.done = total, 0
        self.enabled = enabled and total >= PROGRESS_MIN_JOBS and sys.stderr.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        if self.enabled:
            filled = int(30 * self.done / self.total)
            bar = "#" * filled + "-" * (30 - filled)
            sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} jobs  {label[:40]:<40}")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


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
    bar = Progress(len(futures), enabled=progress)
    outcomes: list[JobOutcome] = []
    for future in as_completed(list(futures)):
        job_id = futures[future]
        outcomes.append(_outcome(future, job_id))
        bar.step(job_id)
    return outcomes


def audit_options(
    *, fail_on: str, preset: str, force: bool, max_job_bytes: int | None, max_artifact_bytes: int | None,
    max_events: int | None, report_base_url: str | None,
) -> AuditOptions:
    """The per-job options from flow parameters (ValueError names a bad one)."""
    diagnose = DiagnoseOptions.parse(fail_on=fail_on, preset=preset, max_artifact_bytes=max_artifact_bytes,
                                     max_events=max_events)
    return AuditOptions(diagnose, force=force, max_bytes=max_job_bytes, report_base_url=report_base_url)


def notify_settings(
    *, notify_on: str, digest: bool, email_to: str | None, email_from: str | None,
    slack_webhook_block: str | None, smtp_url_block: str | None,
) -> NotifySettings:
    """Channels from the environment (STORMWATCH_SLACK_WEBHOOK, STORMWATCH_SMTP_URL, ...) or Prefect
    Secret blocks named here: flow parameters never carry a secret (Prefect stores parameters)."""
    blocks = {name: value for name, value in (("slack_webhook", slack_webhook_block),
                                              ("smtp_url", smtp_url_block)) if value}
    flags = {"notify_on": notify_on, "digest": digest, "email_to": email_to, "email_from": email_from}
    return NotifySettings.from_sources(flags=flags, environ=os.environ, blocks=blocks)


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
    exit_code = max((row.exit_code or 0 for row in rows if row.exit_code in (0, EXIT_FINDINGS)), default=0)
    return {
        "summary": fleet["summary"],
        "exit_code": exit_code,
        "failed": sorted(row.job_id for row in rows if row.status is JobStatus.FAILED),
        "refused": sorted(row.job_id for row in rows if row.status is JobStatus.REFUSED),
        "critical": sorted(row.job_id for row in rows if row.verdict == "critical"),
    }


@flow(name="nightly-audit", log_prints=False)
def nightly_audit(
    storage: str,
    endpoint_url: str | None = None,
    force: bool = False,
    fail_on: str = "never",
    preset: str = "medium",
    max_job_bytes: int | None = None,
    max_artifact_bytes: int | None = None,
    max_events: int | None = None,
    progress: bool = False,
    report_base_url: str | None = None,
    notify_on: str = "critical",
    digest: bool = False,
    email_to: str | None = None,
    email_from: str | None = None,
    slack_webhook_block: str | None = None,
    smtp_url_block: str | None = None,
) -> dict[str, Any]:
    """Audit every job under ``storage`` (a folder or ``s3://bucket/prefix``)."""
    logger = get_run_logger()
    settings = StorageSettings(uri=storage, endpoint_url=endpoint_url)
    options = audit_options(fail_on=fail_on, preset=preset, force=force, max_job_bytes=max_job_bytes,
                            max_artifact_bytes=max_artifact_bytes, max_events=max_events,
                            report_base_url=report_base_url)
    notify = notify_settings(notify_on=notify_on, digest=digest, email_to=email_to, email_from=email_from,
                             slack_webhook_block=slack_webhook_block, smtp_url_block=smtp_url_block)
    lease = acquire(storage_for(settings), name=AUDIT_LEASE, owner=default_owner("nightly-audit"))
    if lease is None:  # another audit is at work on this storage: do nothing, never wait
        busy = holder(storage_for(settings), name=AUDIT_LEASE)
        message = f"another audit holds the lease {busy.describe() if busy else '(released just now)'}"
        logger.warning("not auditing: %s", message)
        result = summarise([], fleet_document([], generated_at=datetime.now(UTC), storage=storage))
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
