"""The runs' table artifacts: what a person opening a flow run in the Prefect UI needs first.

The nightly audit leaves three tables (a bounded number of API requests, whatever the fleet's
size), each under a fixed key so the Artifacts page keeps their history:

- ``stormwatch-audit-verdicts``: jobs by verdict (worst first), then by status;
- ``stormwatch-audit-attention``: fleet.json's ``attention`` list (job, verdict, summary), at most
  :data:`TABLE_ROWS` rows;
- ``stormwatch-audit-failed``: the jobs this run could not diagnose or refused (job, status, error).

post-job leaves one, ``stormwatch-post-job``: its job, status, verdict, summary or error, report.
They hold job ids, verdicts, summaries and errors, as fleet.json does: never a secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prefect.artifacts import create_table_artifact

from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.outputs.verdict import VerdictStatus

TABLE_ROWS = 200
VERDICTS_KEY = "stormwatch-audit-verdicts"
ATTENTION_KEY = "stormwatch-audit-attention"
FAILED_KEY = "stormwatch-audit-failed"
POST_JOB_KEY = "stormwatch-post-job"


def verdict_rows(summary: Mapping[str, int]) -> list[dict[str, Any]]:
    """Jobs by verdict, worst first, then by status (fleet.json's ``summary``)."""
    worst_first = sorted(VerdictStatus, key=lambda status: status.rank, reverse=True)
    return ([{"count of": f"verdict {status.value}", "jobs": int(summary.get(status.value, 0))}
             for status in worst_first]
            + [{"count of": f"status {status.value}", "jobs": int(summary.get(status.value, 0))}
               for status in JobStatus])


def attention_rows(attention: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """fleet.json's ``attention`` entries as (job, verdict, summary); a failed run's verdict is its status."""
    return [{"job": str(entry.get("job_id")), "verdict": str(entry.get("verdict") or entry.get("status")),
             "summary": str(entry.get("summary") or entry.get("error") or "")}
            for entry in attention[:TABLE_ROWS]]


def failed_rows(rows: Sequence[FleetRow]) -> list[dict[str, Any]]:
    """The runs not diagnosed (failed, refused), by job id."""
    chosen = sorted((row for row in rows if row.status in (JobStatus.FAILED, JobStatus.REFUSED)),
                    key=lambda row: row.job_id)
    return [{"job": row.job_id, "status": row.status.value, "error": row.error or ""} for row in chosen[:TABLE_ROWS]]


def _table(rows: list[dict[str, Any]], columns: Sequence[str]) -> dict[str, list[Any]]:
    """Columns of values (an empty table keeps its headers)."""
    return {column: [row[column] for row in rows] for column in columns}


def audit_tables(fleet: Mapping[str, Any], fresh: Sequence[FleetRow]) -> None:
    """The audit's three table artifacts, from the fleet.json just published and this run's rows."""
    create_table_artifact(_table(verdict_rows(fleet["summary"]), ("count of", "jobs")), key=VERDICTS_KEY,
                          description="jobs by verdict and status")
    attention = list(fleet.get("attention") or ())
    create_table_artifact(_table(attention_rows(attention), ("job", "verdict", "summary")), key=ATTENTION_KEY,
                          description=f"jobs needing attention ({len(attention)}; the first {TABLE_ROWS} here)")
    create_table_artifact(_table(failed_rows(fresh), ("job", "status", "error")), key=FAILED_KEY,
                          description="jobs this audit could not diagnose, or refused")


def post_job_table(row: Mapping[str, Any], *, report: str | None) -> None:
    """post-job's table: one row, its job."""
    create_table_artifact([{"job": row.get("job_id"), "status": row.get("status"), "verdict": row.get("verdict") or "",
                            "summary": row.get("summary") or row.get("error") or "", "report": report or ""}],
                          key=POST_JOB_KEY, description=f"post-job {row.get('job_id')}")
