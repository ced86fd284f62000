"""The fleet after an audit: what its pages show, what it counts, what its fold writes.

Built from the plan (every inventory job's committed run, column by column) and the rows this
audit made (diagnosed, failed, refused). Unchanged runs stay columns: only those of the shown
window, and the few the notify step must look at again, become rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pandas as pd

from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.outputs.fleet_runs import rows_of
from stormwatch.outputs.fleet_summary import COUNTED_COLUMNS, counted_frame
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.severity import FailOn
from stormwatch.tasks.plan import AuditPlan, night_of_row, skipped_row

#: Nights the index and fleet.json show by default (``--index-days``).
DEFAULT_INDEX_DAYS = 7


def window_start(audit_time: datetime, days: int) -> date:
    """The first night of the ``days``-night window ending on the audit's night."""
    return audit_time.astimezone(UTC).date() - timedelta(days=days - 1)


@dataclass(frozen=True)
class FleetView:
    """``shown``: the window's runs as published; ``counted``: one row per current run
    (:data:`~stormwatch.outputs.fleet_summary.COUNTED_COLUMNS`); ``since``: the window's first night."""

    shown: list[FleetRow]
    counted: pd.DataFrame
    since: date
    days: int

    def observed(self, stamps: Mapping[str, str]) -> FleetView:
        """This view with the shown runs a notify step observed for the first time stamped
        ``notified_at`` (``stamps``: job id -> time)."""
        shown = [dataclasses.replace(row, notified_at=stamps[row.job_id])
                 if row.job_id in stamps and row.notified_at is None else row for row in self.shown]
        return dataclasses.replace(self, shown=shown)


def _names(frame: pd.DataFrame, name_of: Callable[[str], str]) -> pd.Series:
    names = frame["job_name"].copy()
    missing = names.isna()
    if missing.any():
        names[missing] = [name_of(job_id) for job_id in frame["job_id"][missing]]
    return names


def fleet_view(plan: AuditPlan, fresh: Sequence[FleetRow], *, audit_time: datetime, days: int,
               name_of: Callable[[str], str], fail_on: FailOn, as_skipped: bool = True) -> FleetView:
    """``fresh``: the rows this audit made; every other inventory job keeps its committed run, shown
    ``skipped`` (``as_skipped``; else with its stored status: a fold without an audit)."""
    since = window_start(audit_time, days)
    made = {row.job_id for row in fresh}
    kept = plan.kept[~plan.kept["job_id"].isin(made)]
    shown_kept = kept[(kept["night"] >= since.isoformat()) & kept["row"].notna()]
    shown = [*fresh, *(skipped_row(row, fail_on) if as_skipped else row for row in rows_of(shown_kept))]
    old = kept.assign(job_name=_names(kept, name_of))
    if as_skipped:
        old = old.assign(status=JobStatus.SKIPPED.value)
    counted = pd.concat([counted_frame(fresh, name_of=name_of, night=audit_time.astimezone(UTC).date()),
                         old.reindex(columns=list(COUNTED_COLUMNS))], ignore_index=True)
    return FleetView(shown=shown, counted=counted, since=since, days=days)


def notify_candidates(plan: AuditPlan, made: Sequence[FleetRow]) -> list[FleetRow]:
    """The unchanged runs the notify step looks at: those committed but never observed by a notify step
    that ran to its end. The others were decided; what is due again for them (a retry, a repeat) is in
    the alert state, which the step reads."""
    done = {row.job_id for row in made}
    kept = plan.kept[~plan.kept["job_id"].isin(done)]
    chosen = kept[kept["committed_at"].notna() & kept["notified_at"].isna()]
    with_rows = rows_of(chosen[chosen["row"].notna()])
    # outside the window a run's row is not read; only never-notified ones come here (a kept run has a verdict)
    bare = [FleetRow(job_id=str(item.job_id), status=JobStatus.SKIPPED, verdict=VerdictStatus(item.verdict),
                     committed_at=str(item.committed_at), notified_at=None)
            for item in chosen[chosen["row"].isna()].itertuples(index=False)]
    return [*with_rows, *bare]


def rows_to_fold(plan: AuditPlan, made: Sequence[FleetRow], *, observed: Mapping[str, str] | None,
                 audit_night: date) -> list[tuple[FleetRow, date]]:
    """What a fold writes, each with its night: the runs made now (diagnosed and failed), the pending
    commits' (unless made again now), the version-1 rows being migrated, and the runs a notify step
    observed now for the first time (``observed``: job id -> stamp; None: it did not run to its end)."""
    stamp = observed or {}
    out: list[tuple[FleetRow, date]] = []
    made_ids = set()
    for row in made:
        if row.status in (JobStatus.DIAGNOSED, JobStatus.FAILED):
            made_ids.add(row.job_id)
            out.append((dataclasses.replace(row, notified_at=stamp.get(row.job_id, row.notified_at)), audit_night))
    newest: dict[str, tuple[FleetRow, date]] = {}
    for commit in plan.commits:
        for row in commit.rows:
            if row.job_id not in made_ids:
                newest[row.job_id] = (row, commit.audit_time.astimezone(UTC).date())
    for row in plan.migrated:
        if row.job_id not in made_ids and row.job_id not in newest:
            newest[row.job_id] = (row, date.fromisoformat(night_of_row(row, audit_night.isoformat())))
    kept = plan.kept
    again = kept[kept["job_id"].isin(list(stamp)) & ~kept["job_id"].isin(list(made_ids | set(newest)))
                 & kept["notified_at"].isna() & kept["row"].notna()]
    for row, night in zip(rows_of(again), again["night"], strict=True):
        newest[row.job_id] = (row, date.fromisoformat(str(night)))
    for job_id, (row, night) in newest.items():
        out.append((dataclasses.replace(row, notified_at=stamp.get(job_id, row.notified_at)), night))
    return out
