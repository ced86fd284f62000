"""Publishing the fleet summary: fleet.json, fleet.parquet (a row per rank) and index.html.

Each file is written whole (S3 PUT, or temp file + rename locally), so a
reader sees either the previous version or the new one. Retried with back-off
(:data:`~stormwatch.tasks.retry.FLEET_IO_RETRY`): writes are the IO here.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from datetime import datetime

import orjson
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.outputs.fleet import FleetRow, fleet_document, merge_rank_tables, with_carried_ranks
from stormwatch.outputs.media_types import MediaType
from stormwatch.reports.render import render_index
from stormwatch.tasks.retry import FLEET_IO_RETRY
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import (
    FLEET_JSON_KEY,
    FLEET_PARQUET_KEY,
    INDEX_HTML_KEY,
    Storage,
    StorageSettings,
)


def parquet_bytes(table: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    return buffer.getvalue()


def publish_fleet(
    storage: Storage,
    rows: Sequence[FleetRow],
    *,
    generated_at: datetime,
    storage_uri: str,
    carried_ranks: pd.DataFrame | None = None,
    sections: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Write fleet.json, fleet.parquet and index.html; returns the fleet document.

    ``carried_ranks``: fleet.parquet rows of jobs whose rows were carried over unchanged (their
    rank rows are not in ``rows``), written with the ranks of ``rows``. ``sections``: fleet-wide
    members added to fleet.json (trends, regressions, suspect hosts, coverage, history)."""
    document = {**fleet_document(rows, generated_at=generated_at, storage=storage_uri), **(sections or {})}
    storage.write_report(FLEET_JSON_KEY, orjson.dumps(document, option=orjson.OPT_INDENT_2),
                         content_type=MediaType.JSON)
    storage.write_report(FLEET_PARQUET_KEY, parquet_bytes(with_carried_ranks(carried_ranks, rows)),
                         content_type=MediaType.PARQUET)
    storage.write_report(INDEX_HTML_KEY, render_index(document).encode("utf-8"), content_type=MediaType.HTML)
    return document


def update_fleet(storage: Storage, row: FleetRow, *, generated_at: datetime, storage_uri: str) -> dict[str, object]:
    """Replace one job's row in fleet.json and its ranks in fleet.parquet (the post-job flow); the
    fleet-wide members the last audit computed (trends, regressions, suspect hosts, coverage) are
    kept as they were until the next audit computes them again."""
    previous = storage.read_report(FLEET_JSON_KEY)
    old_document = orjson.loads(previous) if previous else {}
    jobs = old_document.get("jobs", [])
    rows = [FleetRow.from_json(job) for job in jobs if job.get("job_id") != row.job_id] + [row]
    fresh = fleet_document(rows, generated_at=generated_at, storage=storage_uri)
    document = {**{key: value for key, value in old_document.items() if key not in fresh}, **fresh}
    old_table = storage.read_report(FLEET_PARQUET_KEY)
    table = merge_rank_tables(pd.read_parquet(io.BytesIO(old_table)) if old_table else None, [row])
    storage.write_report(FLEET_JSON_KEY, orjson.dumps(document, option=orjson.OPT_INDENT_2),
                         content_type=MediaType.JSON)
    storage.write_report(FLEET_PARQUET_KEY, parquet_bytes(table), content_type=MediaType.PARQUET)
    storage.write_report(INDEX_HTML_KEY, render_index(document).encode("utf-8"), content_type=MediaType.HTML)
    return document


@task(name="update-fleet", cache_policy=NO_CACHE, **FLEET_IO_RETRY.task_options())
def update_fleet_task(settings: StorageSettings, row: FleetRow, generated_at: datetime) -> dict[str, object]:
    return update_fleet(storage_for(settings), row, generated_at=generated_at, storage_uri=settings.uri)


@task(name="publish-fleet", cache_policy=NO_CACHE, **FLEET_IO_RETRY.task_options())
def publish_fleet_task(
    settings: StorageSettings,
    rows: Sequence[FleetRow],
    generated_at: datetime,
    carried_ranks: pd.DataFrame | None = None,
    sections: Mapping[str, object] | None = None,
) -> dict[str, object]:
    return publish_fleet(storage_for(settings), rows, generated_at=generated_at, storage_uri=settings.uri,
                         carried_ranks=carried_ranks, sections=sections)
