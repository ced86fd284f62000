"""The fleet comparisons an audit may take from the last fleet.json instead of computing them again.

fleet.json's ``trends``, ``regressions``, ``suspect_hosts`` and ``capacity`` are a function of the history files
in the audit's window (by key, size and version), the audit time, the thresholds and the engine.
fleet.json records that input as ``history.basis`` (a digest, :func:`comparison_basis`); an audit
that diagnoses nothing and whose own basis is the same (no history file added, removed or
rewritten since, the same ``--as-of`` and thresholds) takes those four members as they are,
without reading the history (bench/README.md, "Unchanged audit"). Any difference, or a fleet.json
without a basis, damaged or of another version, means they are computed again: the reuse can
only ever give what the computation would.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.history.capacity_trend import CapacityThresholds
from stormwatch.history.regressions import RegressionThresholds
from stormwatch.history.schema import HISTORY_FOLDER, as_utc, partition_date
from stormwatch.history.suspects import SuspectThresholds
from stormwatch.load.tree import Entry
from stormwatch.outputs.fleet_summary import FLEET_SCHEMA_VERSION
from stormwatch.tasks.retry import FLEET_IO_RETRY, is_transient
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import FLEET_JSON_KEY, Storage, StorageSettings
from stormwatch.tasks.timeouts import FLEET_IO_TASK_TIMEOUT_S
from stormwatch.version import ENGINE_VERSION

#: The members a matching basis lets an audit reuse.
REUSED_SECTIONS = ("trends", "regressions", "suspect_hosts", "capacity")
#: Bumped whenever what the basis covers changes, so an older fleet.json's basis never matches
#: (2: the capacity trend and its thresholds; regressions name the rank that set them).
BASIS_VERSION = 2


def window_entries(storage: Storage, *, since: datetime, until: datetime,
                   keys: Collection[str] | None = None) -> list[Entry]:
    """The history files in the partitions from ``since`` to ``until`` (of ``keys`` only, when
    given), with their sizes and versions (mtime or ETag), sorted by key: one listing."""
    first, last = as_utc(since).date(), as_utc(until).date()
    chosen = None if keys is None else set(keys)
    found = []
    for entry in storage.list_reports(HISTORY_FOLDER):
        day = partition_date(entry.key)
        if day is not None and first <= day <= last and (chosen is None or entry.key in chosen):
            found.append(entry)
    return sorted(found, key=lambda entry: entry.key)


def comparison_basis(files: Collection[Entry], *, as_of: datetime, history_days: int,
                     regression: RegressionThresholds, suspects: SuspectThresholds,
                     capacity: CapacityThresholds | None = None) -> str:
    """A digest of everything the fleet comparisons are computed from: ``files`` (the history files
    compared, by key, size and version), the audit time, the window, the thresholds (``capacity``
    None: the defaults :func:`~stormwatch.history.sections.compare_fleet` uses) and the engine."""
    document = {
        "version": BASIS_VERSION,
        "engine": ENGINE_VERSION,
        "files": sorted([entry.key, entry.size_bytes, entry.version] for entry in files),
        "as_of": as_utc(as_of).isoformat(),
        "history_days": history_days,
        "regression": dataclasses.asdict(regression),
        "suspects": dataclasses.asdict(suspects),
        "capacity": dataclasses.asdict(capacity or CapacityThresholds()),
    }
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class Reusable:
    """The last fleet.json's comparisons (:data:`REUSED_SECTIONS`) and the basis they were computed from."""

    basis: str
    sections: Mapping[str, Any]


def published_comparisons(storage: Storage, basis: str) -> dict[str, Any] | None:
    """The reusable members of the stored fleet.json when it was computed from ``basis``; else None."""
    data = storage.read_report(FLEET_JSON_KEY)
    if not data:
        return None
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None  # the audit repairs it; the comparisons are computed again
    if not isinstance(document, dict) or document.get("schema_version") != FLEET_SCHEMA_VERSION:
        return None
    history = document.get("history")
    if not isinstance(history, Mapping) or history.get("basis") != basis:
        return None
    if not all(name in document for name in REUSED_SECTIONS):
        return None
    return {name: document[name] for name in REUSED_SECTIONS}


@task(name="published-comparisons", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def published_comparisons_task(settings: StorageSettings, since: datetime, until: datetime, *, history_days: int,
                               regression: RegressionThresholds, suspects: SuspectThresholds,
                               capacity: CapacityThresholds | None = None) -> Reusable | None:
    """The last fleet.json's comparisons when nothing they depend on changed since (see the module);
    ``until`` is the audit time."""
    storage = storage_for(settings)
    basis = comparison_basis(window_entries(storage, since=since, until=until), as_of=until,
                             history_days=history_days, regression=regression, suspects=suspects,
                             capacity=capacity)
    found = published_comparisons(storage, basis)
    return None if found is None else Reusable(basis, found)


@task(name="comparison-basis", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options(retry_if=is_transient))
def comparison_basis_task(settings: StorageSettings, since: datetime, until: datetime, keys: Collection[str], *,
                          history_days: int, regression: RegressionThresholds, suspects: SuspectThresholds,
                          capacity: CapacityThresholds | None = None) -> str:
    """The basis of comparisons computed from the history files ``keys`` (those read, and those this
    audit wrote), listed now for their sizes and versions; a file another writer added meanwhile is
    not among ``keys``, so the next audit, which lists it, computes the comparisons again."""
    files = window_entries(storage_for(settings), since=since, until=until, keys=keys)
    return comparison_basis(files, as_of=until, history_days=history_days, regression=regression, suspects=suspects,
                            capacity=capacity)
