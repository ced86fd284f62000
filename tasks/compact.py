"""Folding post-job commits into the fleet files: what ``stormwatch compact`` and every audit do.

A post-job writes its job's outputs and one commit object (:mod:`stormwatch.tasks.commits`) and
nothing fleet-wide, so it costs one job whatever the fleet's size. Its result joins fleet.json,
fleet.parquet and the index when they are next published: by the nightly audit, which lays every
pending commit over the rows it read, or by :func:`compact`, which does only that. fleet.json's
``folded_at`` says when the last fold happened. Run under the audit lease: commit objects are
read, applied to the history again (idempotent) and cleared only by its holder.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from stormwatch.tasks.commits import clear, newest_rows, pending_commits
from stormwatch.tasks.plan import PreviousFleet
from stormwatch.tasks.publish import publish_fleet
from stormwatch.tasks.storage.protocol import FLEET_JSON_KEY, FLEET_PARQUET_KEY, Storage

#: fleet.json members written from the rows; the others (the last audit's fleet-wide sections) are kept.
_FROM_ROWS = frozenset({"schema_version", "generated_at", "storage", "summary", "jobs"})


@dataclass(frozen=True)
class Compacted:
    """What a fold did: the commits folded (their keys, cleared), the jobs they carried, and one line
    per commit object that did not read (moved under ``reports/damaged/``; its job is diagnosed again)."""

    folded: tuple[str, ...] = ()
    jobs: int = 0
    repaired: tuple[str, ...] = ()


def compact(storage: Storage, *, storage_uri: str, now: datetime | None = None) -> Compacted:
    """Publish fleet.json, fleet.parquet and index.html with every pending commit folded in, then clear
    those commits; fleet-wide sections stay the last audit's until the next one computes them.
    Nothing is written when no commit is pending."""
    at = now or datetime.now(UTC)
    pending = pending_commits(storage, now=at)
    if not pending.commits:
        return Compacted(repaired=pending.damaged)
    fleet_json = storage.read_report(FLEET_JSON_KEY)
    previous = PreviousFleet.from_bytes(fleet_json, storage.read_report(FLEET_PARQUET_KEY))
    rows = newest_rows(dict(previous.rows), pending.commits)
    fresh = {row.job_id for commit in pending.commits for row in commit.rows if rows.get(row.job_id) is row}
    carried = None if previous.ranks is None else previous.ranks[~previous.ranks["job_id"].isin(fresh)]
    try:
        document = orjson.loads(fleet_json) if fleet_json else {}
    except orjson.JSONDecodeError:
        document = {}
    sections = {name: value for name, value in document.items() if name not in _FROM_ROWS} if isinstance(
        document, dict) else {}
    sections.update(folded_at=at.isoformat(), repaired=list(pending.damaged))
    publish_fleet(storage, list(rows.values()), generated_at=at, storage_uri=storage_uri, carried_ranks=carried,
                  sections=sections)
    clear(storage, pending.keys)
    return Compacted(folded=pending.keys, jobs=len(fresh), repaired=pending.damaged)

