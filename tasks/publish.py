"""Publishing the fleet: the fold's runs files, then fleet.json, fleet.parquet and index.html.

The runs files (:mod:`stormwatch.outputs.fleet_runs`) come first: fleet.json lists them. Then
the bounded summaries: fleet.json (version 2, :mod:`stormwatch.outputs.fleet_summary`),
fleet.parquet (a row per rank of the window's runs) and the index. Each file is written whole
(S3 PUT, or temp file + rename locally), so a reader sees either the previous version or the
new one. Retried with back-off (:data:`~stormwatch.tasks.retry.FLEET_IO_RETRY`): writes are the IO here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime

import orjson
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.history.fleet_table import fleet_rank_table
from stormwatch.outputs.fleet import FleetRow
from stormwatch.outputs.fleet_summary import counted_frame, summary_document
from stormwatch.outputs.media_types import MediaType
from stormwatch.reports.render import render_index
from stormwatch.tasks.fleet_view import DEFAULT_INDEX_DAYS, FleetView, window_start
from stormwatch.tasks.history import table_bytes
from stormwatch.tasks.retry import FLEET_IO_RETRY
from stormwatch.tasks.runs_store import write_runs
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import (
    FLEET_JSON_KEY,
    FLEET_PARQUET_KEY,
    INDEX_HTML_KEY,
    Storage,
    StorageSettings,
)
from stormwatch.tasks.timeouts import FLEET_IO_TASK_TIMEOUT_S


def fold_id(at: datetime) -> str:
    """A fold's runs-file name: unique per fold (a later fold never overwrites an earlier one's rows)."""
    return f"fold-{at.astimezone(UTC):%Y%m%dT%H%M%S%fZ}"


def publish_view(
    storage: Storage,
    view: FleetView,
    *,
    fold: Sequence[tuple[FleetRow, date]],
    files: Mapping[str, Sequence[str]],
    generated_at: datetime,
    storage_uri: str,
    name_of: Callable[[str], str],
    sections: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Write the fold's runs files, then fleet.json, fleet.parquet and index.html; returns fleet.json.

    ``files``: the runs files stored before the fold (by night); ``sections``: fleet-wide members
    added to fleet.json (trends, regressions, suspect hosts, coverage, history, alerts)."""
    nights = {row_night for _, row_night in fold}
    written: dict[str, list[str]] = {night: list(keys) for night, keys in files.items()}
    stamp = generated_at if generated_at.tzinfo else generated_at.replace(tzinfo=UTC)
    fold_name = fold_id(datetime.now(UTC))
    for night in sorted(nights):
        rows = [row for row, at in fold if at == night]
        for key in write_runs(storage, rows, night=night, folded_at=datetime.now(UTC), fold_id=fold_name,
                              name_of=name_of):
            written.setdefault(night.isoformat(), []).append(key)
    document = {**summary_document(view.shown, name_of=name_of, counted=view.counted, files=written,
                                   generated_at=stamp, storage=storage_uri, window_days=view.days,
                                   since=view.since), **(sections or {})}
    storage.write_report(FLEET_JSON_KEY, orjson.dumps(document), content_type=MediaType.JSON)
    ranks = fleet_rank_table(view.shown, name_of=name_of)  # the history's schema (stormwatch.history.schema)
    storage.write_report(FLEET_PARQUET_KEY, table_bytes(ranks, metadata=ranks.schema.metadata or {}),
                         content_type=MediaType.PARQUET)
    shown = [row.as_json() for row in sorted(view.shown, key=lambda row: row.job_id)]
    storage.write_report(INDEX_HTML_KEY, render_index(document, jobs=shown).encode("utf-8"),
                         content_type=MediaType.HTML)
    return document


def plain_view(rows: Sequence[FleetRow], *, generated_at: datetime, name_of: Callable[[str], str] = str,
               days: int = DEFAULT_INDEX_DAYS) -> FleetView:
    """A view of exactly ``rows`` (all shown, all counted, of ``generated_at``'s night)."""
    stamp = generated_at if generated_at.tzinfo else generated_at.replace(tzinfo=UTC)
    return FleetView(shown=list(rows), counted=counted_frame(rows, name_of=name_of, night=stamp.date()),
                     since=window_start(stamp, days), days=days)


def publish_fleet(storage: Storage, rows: Sequence[FleetRow], *, generated_at: datetime, storage_uri: str,
                  sections: Mapping[str, object] | None = None) -> dict[str, object]:
    """fleet.json, fleet.parquet and index.html of exactly ``rows``, with no runs files (a tool's or a
    test's fleet; an audit publishes through :func:`publish_view`)."""
    return publish_view(storage, plain_view(rows, generated_at=generated_at), fold=(), files={},
                        generated_at=generated_at, storage_uri=storage_uri, name_of=str, sections=sections)


@task(name="publish-fleet", cache_policy=NO_CACHE, timeout_seconds=FLEET_IO_TASK_TIMEOUT_S,
      **FLEET_IO_RETRY.task_options())
def publish_view_task(
    settings: StorageSettings,
    view: FleetView,
    fold: Sequence[tuple[FleetRow, date]],
    files: Mapping[str, Sequence[str]],
    generated_at: datetime,
    name_of: Callable[[str], str],
    sections: Mapping[str, object] | None = None,
) -> dict[str, object]:
    return publish_view(storage_for(settings), view, fold=fold, files=files, generated_at=generated_at,
                        storage_uri=settings.uri, name_of=name_of, sections=sections)
