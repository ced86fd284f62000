"""The audit's notification step: the ledger read from storage, ``notify_jobs``, the ledger written back.

Sending never fails the audit: :func:`notify_jobs` does not raise, and the flow
treats a failure of this step (an unreadable storage) as a logged problem.
The ledger is written only when it changed, as one whole object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import orjson
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.outputs.fleet import FleetRow
from stormwatch.tasks.notify.dispatch import JobFinding, NotifySettings, notify_jobs
from stormwatch.tasks.notify.ledger import LedgerState, read_ledger, undecided
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import NOTIFICATIONS_KEY, Storage, StorageSettings, model_json_key


@dataclass(frozen=True)
class UnchangedJob:
    """A job the audit did not diagnose again: its carried fleet row and its report's link."""

    row: FleetRow
    report_url: str | None


def unchanged_findings(
    storage: Storage, jobs: Sequence[UnchangedJob], ledger: LedgerState, *, settings: NotifySettings
) -> list[JobFinding]:
    """The findings of unchanged jobs that still need a decision (:func:`undecided`), read from
    their model.json; the others cost no read. A missing or damaged model.json gives none."""
    findings: list[JobFinding] = []
    for job in jobs:
        row = job.row
        indicators = {"earliest": row.earliest, "most_severe": row.most_severe}
        if not undecided(ledger, row.job_id, indicators, channels=settings.channels, notify_on=settings.notify_on):
            continue
        data = storage.read_report(model_json_key(row.job_id))
        try:
            document = orjson.loads(data) if data else None
            if isinstance(document, dict):
                findings.append(JobFinding.from_document(document, report_url=job.report_url))
        except (orjson.JSONDecodeError, ValueError):
            continue
    return findings


def notify_step(
    storage: Storage,
    findings: Sequence[JobFinding],
    *,
    settings: NotifySettings,
    now: datetime,
    unchanged: Sequence[UnchangedJob] = (),
) -> dict[str, object]:
    """Decide and send for ``findings`` and for those of ``unchanged`` jobs that need it; returns
    counts for the flow's summary."""
    ledger = storage.read_report(NOTIFICATIONS_KEY)
    if unchanged:
        findings = [*findings, *unchanged_findings(storage, unchanged, read_ledger(ledger), settings=settings)]
    result = notify_jobs(findings, ledger=ledger, settings=settings, now=now)
    if result.changed:
        storage.write_report(NOTIFICATIONS_KEY, result.ledger, content_type="application/x-ndjson")
    return {"sent": result.sent, "failed": result.failed, "skipped": result.skipped,
            "channels": [str(channel) for channel in settings.channels], "problems": list(result.problems)}


@task(name="notify", cache_policy=NO_CACHE)
def notify_task(
    storage_settings: StorageSettings,
    findings: Sequence[JobFinding],
    settings: NotifySettings,
    now: datetime,
    unchanged: Sequence[UnchangedJob] = (),
) -> dict[str, object]:
    return notify_step(storage_for(storage_settings), findings, settings=settings, now=now, unchanged=unchanged)
