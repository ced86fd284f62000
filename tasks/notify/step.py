"""The audit's notification step: the ledger read from storage, ``notify_jobs``, the ledger written back.

Sending never fails the audit: :func:`notify_jobs` does not raise, and the flow
treats a failure of this step (an unreadable storage) as a logged problem.
The ledger is written only when it changed, as one whole object.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from prefect import task

from stormwatch.tasks.notify.dispatch import JobFinding, NotifySettings, notify_jobs
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import NOTIFICATIONS_KEY, Storage, StorageSettings


def notify_step(
    storage: Storage, findings: Sequence[JobFinding], *, settings: NotifySettings, now: datetime
) -> dict[str, object]:
    """Decide and send for ``findings``; returns counts for the flow's summary."""
    ledger = storage.read_report(NOTIFICATIONS_KEY)
    result = notify_jobs(findings, ledger=ledger, settings=settings, now=now)
    if result.changed:
        storage.write_report(NOTIFICATIONS_KEY, result.ledger, content_type="application/x-ndjson")
    return {"sent": result.sent, "failed": result.failed, "skipped": result.skipped,
            "channels": [str(channel) for channel in settings.channels], "problems": list(result.problems)}


@task(name="notify")
def notify_task(
    storage_settings: StorageSettings, findings: Sequence[JobFinding], settings: NotifySettings, now: datetime
) -> dict[str, object]:
    return notify_step(storage_for(storage_settings), findings, settings=settings, now=now)
