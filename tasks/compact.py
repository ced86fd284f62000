"""Folding post-job commits into the fleet files: what ``stormwatch compact`` and every audit do.

A post-job writes its job's outputs and one commit object (:mod:`stormwatch.tasks.commits`) and
nothing fleet-wide, so it costs one job whatever the fleet's size. Its result joins fleet.json,
fleet.parquet and the index when they are next published: by the nightly audit, which lays every
pending commit over the rows it read, or by :func:`compact`, which does only that (and compacts the
earlier nights' history files, :mod:`stormwatch.tasks.history_compact`). fleet.json's
``folded_at`` says when the last fold happened. Run under the audit lease: commit objects are
read, applied to the history again (idempotent) and cleared only by its holder.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from stormwatch.history.job_names import JobNamePattern
from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.severity import FailOn
from stormwatch.tasks.commits import clear, pending_commits
from stormwatch.tasks.fleet_view import DEFAULT_INDEX_DAYS, fleet_view, rows_to_fold, window_start
from stormwatch.tasks.history_compact import compact_history
from stormwatch.tasks.plan import AuditPlan, PreviousFleet, read_previous_fleet
from stormwatch.tasks.publish import publish_view
from stormwatch.tasks.storage.inventory import Inventory
from stormwatch.tasks.storage.protocol import FLEET_JSON_KEY, Storage

#: fleet.json members written from the runs; the others (the last audit's fleet-wide sections) are kept.
_FROM_ROWS = frozenset({"schema_version", "generated_at", "storage", "summary", "jobs", "window", "attention",
                        "latest", "nights"})


#: Rows of the last fleet.json a fold keeps as they were: their jobs have no committed run to show.
_UNSETTLED = frozenset({JobStatus.FAILED.value, JobStatus.REFUSED.value})


@dataclass(frozen=True)
class Compacted:
    """What a fold did: the commits folded (their keys, cleared), the jobs they carried, and one line
    per commit object that did not read (moved under ``reports/damaged/``; its job is diagnosed again)."""

    folded: tuple[str, ...] = ()
    jobs: int = 0
    repaired: tuple[str, ...] = ()
    history: tuple[str, ...] = ()  # one line per earlier night whose history files were compacted


def _previous_document(storage: Storage) -> dict[str, object]:
    data = storage.read_report(FLEET_JSON_KEY)
    try:
        document = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:
        return {}
    return document if isinstance(document, dict) else {}


def compact(storage: Storage, *, storage_uri: str, now: datetime | None = None,
            job_names: JobNamePattern | None = None) -> Compacted:
    """Fold every pending commit into the runs files, publish fleet.json, fleet.parquet and index.html
    (the window the last audit chose, ending now), then clear those commits; fleet-wide sections stay
    the last audit's until the next one computes them. Nothing is written when no commit is pending."""
    at = now or datetime.now(UTC)
    names = job_names or JobNamePattern()
    pending = pending_commits(storage, now=at)
    if not pending.commits:
        return Compacted(repaired=pending.damaged, history=_compact_history(storage, at))
    document = _previous_document(storage)
    window = document.get("window")
    days = int(window.get("days", DEFAULT_INDEX_DAYS)) if isinstance(window, dict) else DEFAULT_INDEX_DAYS
    previous: PreviousFleet = read_previous_fleet(storage, Inventory(()), shown_since=window_start(at, days))
    current = previous.table.assign(unchanged=previous.table["verdict"].notna())
    plan = AuditPlan(diagnose=(), current=current, commits=previous.commits.commits, migrated=previous.migrated)
    folded = {row.job_id for commit in plan.commits for row in commit.rows}
    unsettled = [FleetRow.from_json(item) for item in document.get("jobs", ()) or ()  # type: ignore[attr-defined]
                 if isinstance(item, dict) and item.get("status") in _UNSETTLED and item.get("job_id") not in folded]
    view = fleet_view(plan, unsettled, audit_time=at, days=days, name_of=names.name_of, fail_on=FailOn.NEVER,
                      as_skipped=False)
    fold = rows_to_fold(plan, (), observed=None, audit_night=at.date())
    sections = {name: value for name, value in document.items() if name not in _FROM_ROWS}
    sections.update(folded_at=at.isoformat(), repaired=list(pending.damaged))
    publish_view(storage, view, fold=fold, files=previous.files, generated_at=at, storage_uri=storage_uri,
                 name_of=names.name_of, sections=sections)
    clear(storage, pending.keys)
    return Compacted(folded=pending.keys, jobs=len(folded), repaired=pending.damaged,
                     history=_compact_history(storage, at))


def _compact_history(storage: Storage, at: datetime) -> tuple[str, ...]:
    """The nights before ``at``'s date with several history files compacted (after the commits are
    cleared: a pending commit's file is left alone), one line each."""
    return tuple(night.line() for night in compact_history(storage, before=at.astimezone(UTC).date()))
