"""fleet.parquet in the history's schema: one row per (job, session, rank) of the fleet's shown runs.

fleet.parquet and the history share :data:`~stormwatch.history.schema.HISTORY_SCHEMA` (names,
types, ``schema_version``), so a warehouse unions or joins them by name. A fleet row knows less
than a history row; what it does not know is null:

- ``audit_id``: from the row's ``history_key`` (the history file holding the run's rows, named
  ``<audit id>-b<8 hex>``); null for a run committed before rows named their history file;
- ``audit_time``, ``peak_allocated_bytes``, ``first_anomaly_severity``, ``job_started_ns``: null
  (join the history on ``audit_id``, ``job_id``, ``session_id``, ``rank`` for them);
- ``world_size``: the run's expected ranks (``ranks_expected``);
- ``first_cause``: the rank of fleet.json's ``earliest`` in the session the verdict comes from
  (``worst_session``; any session of a one-session job), false elsewhere, null without an earliest;
- the growth columns (:data:`~stormwatch.history.schema.GROWTH_COLUMNS`): from the rank row's
  ``growth`` (its session's ``fleet.growth`` entry), as the history's rows take them
  (:func:`~stormwatch.history.rows.growth_columns`); null without one.

Pure: builds an Arrow table, writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

import pyarrow as pa

from stormwatch.history.rows import growth_columns, with_headroom
from stormwatch.history.schema import (
    GROWTH_COLUMNS,
    HISTORY_SCHEMA,
    HISTORY_SCHEMA_VERSION,
    RENAMED,
    conform,
    file_metadata,
)
from stormwatch.outputs.document_fleet import rank_growth_from_json
from stormwatch.outputs.fleet import RANK_COLUMNS, FleetRow, rank_table
from stormwatch.outputs.json_members import Members

_AUDIT_OF_KEY = re.compile(r"/(audit-\d{8}T\d{6}Z-[0-9a-f]{8})(?:-b[0-9a-f]{8})?\.parquet$")


def audit_of_key(history_key: str | None) -> str | None:
    """The audit id a history file's key names; None for no key or a key of another shape."""
    found = None if history_key is None else _AUDIT_OF_KEY.search(history_key)
    return None if found is None else found[1]


def _first_cause(row: FleetRow, sessions: Sequence[str | None], ranks: Sequence[int]) -> list[bool | None]:
    earliest = row.earliest
    if not earliest or earliest.get("rank") is None:
        return [None] * len(ranks)
    return [rank == earliest["rank"] and (row.worst_session is None or session == row.worst_session)
            for session, rank in zip(sessions, ranks, strict=True)]


def _growth(rows: Sequence[FleetRow], jobs: Sequence[str], sessions: Sequence[str | None],
            ranks: Sequence[int]) -> dict[str, pa.Array]:
    """The growth columns of the table's rows (job, session, rank), from the fleet rows' rank rows."""
    found: dict[tuple[str, str | None, int], dict[str, object]] = {}
    for row in rows:
        for rank in row.rank_rows:
            growth = rank.get("growth")
            if growth is not None:
                parsed = rank_growth_from_json(Members.of(growth, f"{row.job_id}.growth"))
                found.setdefault((row.job_id, rank.get("session_id"), int(rank["rank"])), growth_columns(parsed))
    values = [found.get((job, session, int(rank)), {})
              for job, session, rank in zip(jobs, sessions, ranks, strict=True)]
    return {name: pa.array([value.get(name) for value in values], HISTORY_SCHEMA.field(name).type)
            for name in GROWTH_COLUMNS}


def fleet_rank_table(rows: Iterable[FleetRow], *, name_of: Callable[[str], str]) -> pa.Table:
    """fleet.parquet's rows (those of :func:`~stormwatch.outputs.fleet.rank_table`, in its order) in
    :data:`HISTORY_SCHEMA`, with fleet.parquet's footer metadata (the schema version); ``name_of``
    maps a job id to its job name."""
    kept = list(rows)
    frame = rank_table(kept)
    by_job = {row.job_id: row for row in kept}
    table = pa.Table.from_pandas(frame[list(RANK_COLUMNS)], preserve_index=False)
    table = table.rename_columns([RENAMED.get(name, name) for name in table.column_names])
    jobs = frame["job_id"].astype(object).tolist()
    sessions = frame["session_id"].astype(object).where(frame["session_id"].notna(), None).tolist()
    ranks = frame["rank"].astype(object).tolist()
    first_cause: list[bool | None] = []
    start = 0
    while start < len(jobs):  # rows of a job are adjacent (sorted by job id)
        end = start
        while end < len(jobs) and jobs[end] == jobs[start]:
            end += 1
        first_cause += _first_cause(by_job[jobs[start]], sessions[start:end], ranks[start:end])
        start = end
    extra = {
        "audit_id": pa.array([audit_of_key(by_job[job].history_key) for job in jobs], pa.string()),
        "job_name": pa.array([name_of(job) for job in jobs], pa.string()),
        "world_size": pa.array([by_job[job].ranks_expected for job in jobs], pa.int32()),
        "input_fingerprint": pa.array([by_job[job].input_fingerprint for job in jobs], pa.string()),
        "first_cause": pa.array(first_cause, pa.bool_()),
        "schema_version": pa.array([HISTORY_SCHEMA_VERSION] * len(jobs), pa.int32()),
        **_growth(kept, jobs, sessions, ranks),
    }
    for name, values in extra.items():
        table = table.append_column(name, values)
    for field in HISTORY_SCHEMA:  # what a fleet row does not know
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    typed = with_headroom(conform(table.replace_schema_metadata(file_metadata(history=False)), name="fleet.parquet"))
    return typed.replace_schema_metadata(file_metadata(history=False))
