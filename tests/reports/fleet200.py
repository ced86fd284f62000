"""Fleets for the attention tests (issue 28): the demo's, audited for real, and one of 200 jobs.

The 200-job fleet is built as ``bench/index_bench.py`` builds its fleets: ``FleetRow``s with the
bench's mix (about 80 % diagnosed, 10 % skipped, 6 % failed, 4 % refused; verdicts from clean to
critical and empty; hostile job ids), through the real ``fleet_document`` and the bench's
``with_fleet_intelligence`` (30 nights of trends, regressions, suspect hosts, coverage), rendered with
the real ``render_index``. Seven of its rows are the demo's real ones (read back from the demo's
fleet.json) with their real job pages copied beside the index; the synthetic rows are moved in time
so that they end after the demo's audit, so the most severe job is not simply a demo job.

"Most severe" is computed here from fleet.json, independently of the pages: verdict critical
before warning; among equals the newest ``diagnosed_at``, then the job id.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from stormwatch.outputs.fleet import FleetRow, JobStatus, fleet_document
from stormwatch.reports import render_index

REPO = Path(__file__).resolve().parents[2]
#: The demo's jobs and verdicts (tests/flows/test_demo.py pins them).
DEMO_JOBS = ("broken-artifact", "collective-spike", "drifting-rank", "legacy", "missing-ranks", "oom", "restarted")
FLEET_SIZE = 200
SEED = 28
#: The bench's synthetic rows end this long after the demo's audit.
SYNTHETIC_LEAD = timedelta(days=5)
#: Verdicts that need attention, most severe first.
ATTENTION_VERDICTS = ("critical", "warning")


def index_bench() -> ModuleType:
    """bench/index_bench.py as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("stormwatch_index_bench", REPO / "bench" / "index_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_demo(root: Path, *, prefect_api: str) -> Path:
    """``stormwatch demo root`` in a subprocess (Prefect's sync calls must not run under Playwright's
    event loop); returns ``root/reports``."""
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    done = subprocess.run([sys.executable, "-m", "stormwatch.flows.cli", "demo", str(root)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return root / "reports"


def read_fleet(reports: Path) -> dict[str, Any]:
    document: dict[str, Any] = orjson.loads((reports / "fleet.json").read_bytes())
    return document


def _moved(row: FleetRow, delta: timedelta) -> FleetRow:
    if row.diagnosed_at is None:
        return row
    return dataclasses.replace(row, diagnosed_at=(datetime.fromisoformat(row.diagnosed_at) + delta).isoformat())


def build_fleet200(demo_reports: Path, out: Path, *, size: int = FLEET_SIZE, seed: int = SEED) -> Path:
    """``out/reports/index.html`` and fleet.json of ``size`` jobs: the demo's rows and pages, the rest the
    bench's rows; returns the index's path."""
    bench = index_bench()
    demo = read_fleet(demo_reports)
    real = [FleetRow.from_json(job) for job in demo["jobs"]]
    audited = max(datetime.fromisoformat(row.diagnosed_at) for row in real if row.diagnosed_at)
    synthetic: list[FleetRow] = bench.fleet_rows(size - len(real), seed=seed)
    newest = max(datetime.fromisoformat(row.diagnosed_at) for row in synthetic if row.diagnosed_at)
    delta = audited + SYNTHETIC_LEAD - newest
    rows = real + [_moved(row, delta) for row in synthetic]
    document = bench.with_fleet_intelligence(
        fleet_document(rows, generated_at=audited + SYNTHETIC_LEAD + timedelta(hours=1),
                       storage="s3://fleet-telemetry/stormwatch"), seed=seed)
    reports = out / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    for row in real:
        shutil.copytree(demo_reports / row.job_id, reports / row.job_id, dirs_exist_ok=True)
    (reports / "fleet.json").write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    index = reports / "index.html"
    index.write_text(render_index(document), encoding="utf-8")
    return index


def build_calm_fleet(demo_reports: Path, out: Path) -> Path:
    """An index of the demo's clean jobs only: nothing needs attention."""
    rows = [FleetRow.from_json(job) for job in read_fleet(demo_reports)["jobs"] if job["verdict"] == "clean"]
    assert rows, "the demo has clean jobs"
    reports = out / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    document = fleet_document(rows, generated_at=datetime.now(UTC), storage=str(demo_reports.parent))
    index = reports / "index.html"
    index.write_text(render_index(document), encoding="utf-8")
    return index


def _newest_first(job: Mapping[str, Any]) -> float:
    return -datetime.fromisoformat(job["diagnosed_at"]).timestamp() if job.get("diagnosed_at") else float("inf")


def severity_order(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Job ids of the jobs whose verdict needs attention, most severe first."""
    chosen = [job for job in jobs if job.get("verdict") in ATTENTION_VERDICTS]
    chosen.sort(key=lambda job: (ATTENTION_VERDICTS.index(job["verdict"]), _newest_first(job), job["job_id"]))
    return [job["job_id"] for job in chosen]


def most_severe(fleet: Mapping[str, Any]) -> dict[str, Any]:
    """fleet.json's most severe job (its row)."""
    order = severity_order(fleet["jobs"])
    assert order, "the fleet has a job needing attention"
    return next(job for job in fleet["jobs"] if job["job_id"] == order[0])


def needing_attention(fleet: Mapping[str, Any]) -> int:
    """How many jobs need attention: a critical or warning verdict, or a failed run."""
    return sum(job.get("verdict") in ATTENTION_VERDICTS or job.get("status") == JobStatus.FAILED.value
               for job in fleet["jobs"])
