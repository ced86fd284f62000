"""Damaged files moved aside, and the temporary files of killed writes swept, by the audit lease's holder.

A damaged report object (a history file or commit cut short, an alert state or ledger that does
not read) is never read again where it is: its bytes are kept as ``reports/damaged/<key>.<UTC
stamp>`` for people to look at, and the original is removed or rewritten by its owner. Each move
is one line for the audit's summary, naming both paths.
"""

from __future__ import annotations

from datetime import datetime

from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.retry import FLEET_IO_RETRY, is_transient
from stormwatch.tasks.storage.inventory import Inventory
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import Storage, StorageSettings, damaged_key
from stormwatch.tasks.timeouts import FLEET_IO_TASK_TIMEOUT_S


def quarantine(storage: Storage, key: str, *, now: datetime) -> str:
    """Move report object ``key`` to ``damaged/<key>.<stamp>``; the line saying so (nothing moved
    when it is already gone)."""
    data = storage.read_report(key)
    if data is None:
        return f"{key}: damaged, and gone since"
    kept = damaged_key(key, now)
    storage.write_report(kept, data, content_type=MediaType.OCTETS)
    storage.delete_report(key)
    return f"{key}: damaged; moved to {kept}"


@task(name="sweep-temporaries", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def sweep_temporaries_task(settings: StorageSettings, inventory: Inventory) -> list[str]:
    """One line per temporary file a killed write left in the reports, removed; those in the report
    folders of the ``inventory``'s jobs are the ones its scan found."""
    removed = storage_for(settings).sweep_temporaries(looked=inventory.job_ids, found=inventory.temporaries)
    return [f"{name}: a killed write's temporary file; removed" for name in removed]
