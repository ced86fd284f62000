"""fleet.json, version 2: a bounded summary of the fleet, whatever it stores.

Members:

- ``summary``: counts by status and by verdict over every current run (a job id's newest row);
- ``jobs``: per job name, its newest run of the recent window (``window.days`` nights up to the
  audit's), and every run of the window that was not diagnosed (failed, refused), one row each as
  version 1 stored them (``skipped``: not diagnosed by this audit). The window's other runs are on
  the index and in the runs files, not here;
- ``latest``: per job name, its newest diagnosed run (``job_id``, ``verdict``, ``diagnosed_at``, ``night``);
- ``attention``: of those ``jobs``, the runs that need a person (a job name's newest run when it
  is critical or warning or has a leaking rank, and every failed run), critical first, then failed,
  then warning, then leaking runs of another verdict, newest
  first within each; each with what a page needs to say why (its first causes, placed, see
  :mod:`stormwatch.outputs.fleet_causes`; its worst attempt and session; its missing ranks);
- ``headroom`` (issue 30): over ``jobs``' rows, the GPU memory they left unused
  (``unused_gib_hours``: Σ over ranks of (device total − peak use) × span, in GiB·hours), the rows
  with a used percent (``jobs_counted``), and those whose fullest rank used under ``under_percent``
  (50) % of its device: ``jobs_under_half_count`` and the first :data:`MAX_UNDER_HALF_LISTED`,
  least used first, in ``jobs_under_half`` (``{job_id, used_percent, report}``). Each row carries
  its own ``used_percent``, ``unused_gib_hours``, ``leaks`` and ``leak`` (:mod:`stormwatch.outputs.fleet`);
- ``nights``: every stored night, newest first: its runs files (the partitions), run and verdict
  counts, and whether the window shows it;
- the fleet-wide sections the audit computes (trends, regressions, ...), ``folded_at``.

So its size grows with job names (and the window's failures), not with the runs kept or the
window's length; it is written without indentation. Version 1
(``jobs`` held every run) is still read (:mod:`stormwatch.tasks.plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

import pandas as pd

from stormwatch.growth.headroom import UNDER_HALF_PERCENT
from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.outputs.verdict import VerdictStatus

FLEET_SCHEMA_VERSION = 2
#: Columns of the counted runs frame: one row per current run.
COUNTED_COLUMNS = ("job_id", "job_name", "night", "status", "verdict", "diagnosed_at")
_ATTENTION_ORDER = {(JobStatus.FAILED.value, None): 1, (None, VerdictStatus.CRITICAL.value): 0,
                    (None, VerdictStatus.WARNING.value): 2}
_ATTENTION_FIELDS = ("job_id", "status", "verdict", "summary", "earliest", "most_severe", "report", "diagnosed_at",
                     "error", "worst_attempt", "worst_session", "missing_ranks", "ranks_present", "ranks_expected",
                     "leaks", "leak", "used_percent")
#: Jobs listed by id in ``headroom.jobs_under_half`` (the least used first); the rest are counted.
MAX_UNDER_HALF_LISTED = 100


def counts(counted: pd.DataFrame) -> dict[str, int]:
    """``{"jobs": n, <status>: n..., <verdict>: n...}`` over ``counted`` (one row per run)."""
    statuses = counted["status"].value_counts()
    verdicts = counted["verdict"].dropna().value_counts()
    summary = {"jobs": len(counted)}
    summary.update({status.value: int(statuses.get(status.value, 0)) for status in JobStatus})
    summary.update({verdict.value: int(verdicts.get(verdict.value, 0)) for verdict in VerdictStatus})
    return summary


def latest_by_name(counted: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per job name, its newest diagnosed run."""
    diagnosed = counted[counted["verdict"].notna()]
    if diagnosed.empty:
        return {}
    newest = diagnosed.sort_values(["diagnosed_at", "job_id"], kind="stable").drop_duplicates("job_name", keep="last")
    return {str(item.job_name): {"job_id": str(item.job_id), "verdict": str(item.verdict),
                                 "diagnosed_at": item.diagnosed_at, "night": item.night}
            for item in newest.sort_values("job_name").itertuples(index=False)}


def headroom(listed: Sequence[FleetRow]) -> dict[str, Any]:
    """fleet.json's ``headroom`` over ``listed`` (each job name's newest run, as ``jobs`` lists them):
    ``unused_gib_hours`` (Σ of the rows' GiB·hours of device memory left unused), ``jobs_counted``
    (rows with a used percent), ``jobs_under_half_count`` and ``jobs_under_half`` (the first
    :data:`MAX_UNDER_HALF_LISTED`, least used first: ``{job_id, used_percent, report}``)."""
    counted = [row for row in listed if row.used_percent is not None]
    under = sorted((row for row in counted if (row.used_percent or 0.0) < UNDER_HALF_PERCENT),
                   key=lambda row: (row.used_percent, row.job_id))
    return {
        "unused_gib_hours": round(sum(row.unused_gib_hours or 0.0 for row in listed), 3),
        "jobs_counted": len(counted),
        "under_percent": UNDER_HALF_PERCENT,
        "jobs_under_half_count": len(under),
        "jobs_under_half": [{"job_id": row.job_id, "used_percent": row.used_percent, "report": row.report}
                            for row in under[:MAX_UNDER_HALF_LISTED]],
    }


def _attention_rank(row: FleetRow) -> int | None:
    if row.status is JobStatus.FAILED:
        return _ATTENTION_ORDER[(JobStatus.FAILED.value, None)]
    return _ATTENTION_ORDER.get((None, None if row.verdict is None else row.verdict.value))


def attention(shown: Sequence[FleetRow]) -> list[dict[str, Any]]:
    """The shown runs needing a person: critical, failed, warning, then a run whose ranks leak
    whatever its verdict; newest first within each."""
    chosen = [(rank, row) for row in shown if (rank := _attention_rank(row)) is not None or row.leaks]
    chosen.sort(key=lambda item: (item[1].diagnosed_at or ""), reverse=True)
    chosen.sort(key=lambda item: len(_ATTENTION_ORDER) if item[0] is None else item[0])
    return [_entry(row) for _, row in chosen]


def _entry(row: FleetRow) -> dict[str, Any]:
    data = row.as_json()
    return {name: data[name] for name in _ATTENTION_FIELDS if data.get(name) is not None}


def nights(counted: pd.DataFrame, files: Mapping[str, Sequence[str]], *, since: date) -> list[dict[str, Any]]:
    """Every night with runs files, newest first: its files, counts, and whether the window shows it."""
    by_night = {str(night): group for night, group in counted.groupby("night", sort=False)} if len(counted) else {}
    out = []
    for night in sorted(set(files) | set(by_night), reverse=True):
        group = by_night.get(night)
        verdicts = group["verdict"].dropna().value_counts() if group is not None else pd.Series(dtype=int)
        out.append({
            "night": night, "files": list(files.get(night, ())), "runs": 0 if group is None else len(group),
            **{verdict.value: int(verdicts.get(verdict.value, 0)) for verdict in
               (VerdictStatus.CRITICAL, VerdictStatus.WARNING, VerdictStatus.CLEAN)},
            "shown": night >= since.isoformat(),
        })
    return out


def _newest_first_key(row: FleetRow) -> tuple[str, str]:
    return (row.diagnosed_at or row.committed_at or "", row.job_id)


def latest_rows(shown: Sequence[FleetRow], *, name_of: Callable[[str], str]) -> list[FleetRow]:
    """Per job name, its newest shown run; and every shown run not diagnosed (failed or refused:
    no committed run of theirs says why). Sorted by job id."""
    newest: dict[str, FleetRow] = {}
    unsettled: list[FleetRow] = []
    for row in sorted(shown, key=_newest_first_key):
        if row.status in (JobStatus.FAILED, JobStatus.REFUSED):
            unsettled.append(row)
        newest[name_of(row.job_id)] = row
    chosen = {row.job_id: row for row in [*newest.values(), *unsettled]}
    return [chosen[job_id] for job_id in sorted(chosen)]


def summary_document(
    shown: Sequence[FleetRow],
    *,
    name_of: Callable[[str], str],
    counted: pd.DataFrame,
    files: Mapping[str, Sequence[str]],
    generated_at: datetime,
    storage: str,
    window_days: int,
    since: date,
) -> dict[str, Any]:
    """fleet.json (version 2) without the fleet-wide sections; ``shown``: the window's runs."""
    listed = latest_rows(shown, name_of=name_of)
    return {
        "schema_version": FLEET_SCHEMA_VERSION,
        "generated_at": generated_at.isoformat(),
        "storage": storage,
        "window": {"days": window_days, "since": since.isoformat(), "runs": len(shown)},
        "summary": counts(counted),
        "attention": attention(listed),
        "headroom": headroom(listed),
        "latest": latest_by_name(counted),
        "nights": nights(counted, files, since=since),
        "jobs": [row.as_json() for row in listed],
    }


def counted_frame(rows: Sequence[FleetRow], *, name_of: Any, night: date) -> pd.DataFrame:
    """:data:`COUNTED_COLUMNS` of ``rows`` (this audit's), all of night ``night``."""
    return pd.DataFrame({
        "job_id": [row.job_id for row in rows], "job_name": [name_of(row.job_id) for row in rows],
        "night": [night.isoformat()] * len(rows), "status": [row.status.value for row in rows],
        "verdict": [None if row.verdict is None else row.verdict.value for row in rows],
        "diagnosed_at": [row.diagnosed_at for row in rows],
    }, columns=list(COUNTED_COLUMNS))
