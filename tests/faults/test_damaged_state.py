"""Damage found by the next plain audit is repaired and said by name: a history file cut short and a
commit object cut short move under reports/damaged/, a killed write's temp file is swept, a truncated
model.json makes its job be diagnosed again; each is a ``repaired`` line, once."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.post_job import post_job
from tests.faults.conftest import FLEET_JOBS, upload_fleet
from tests.tasks.storage.backends import Backend, local_backend

pytestmark = pytest.mark.usefixtures("prefect_api")


def audit(backend: Backend) -> dict[str, Any]:
    return nightly_audit(AuditParameters(storage=backend.settings.uri))


@pytest.fixture
def audited(tmp_path: Path, fleet_files: Path) -> Backend:
    backend = local_backend(tmp_path / "fleet")
    upload_fleet(backend, fleet_files)
    assert audit(backend)["summary"]["diagnosed"] == len(FLEET_JOBS)
    return backend


def damaged_keys(backend: Backend) -> list[str]:
    return sorted(key for key in backend.stored_keys() if key.startswith("reports/damaged/"))


def test_a_history_file_cut_short_is_moved_aside_once(audited: Backend) -> None:
    (key,) = [key for key in audited.stored_keys() if key.startswith("reports/history/")]
    audited.put(key, b"")
    result = audit(audited)
    (line,) = result["repaired"]
    assert line.startswith(f"{key.removeprefix('reports/')}: damaged; moved to damaged/history/")
    assert audited.get(key) is None and len(damaged_keys(audited)) == 1
    assert audit(audited)["repaired"] == []  # repaired: said once


@pytest.mark.parametrize("key", [".fleet.json.k3j2h1.tmp", "critical-job/.model.json.k3j2h1.tmp",
                                 "history/date=2026-11-30/.b.parquet.k3j2h1.tmp", "gone-job/.report.html.k3j2h1.tmp"],
                         ids=["fleet-wide", "a job's folder (seen by the inventory)", "history", "a job since gone"])
def test_a_stale_temp_file_is_swept(audited: Backend, key: str) -> None:
    audited.put(f"reports/{key}", b'{"jobs": [')
    result = audit(audited)
    assert result["repaired"] == [f"{key}: a killed write's temporary file; removed"]
    assert audited.get(f"reports/{key}") is None
    assert audit(audited)["repaired"] == []


def test_a_temp_file_in_a_session_folder_is_swept_by_its_jobs_next_diagnosis(audited: Backend) -> None:
    # a write killed there belongs to a diagnosis never committed: the job is diagnosed again (here its
    # model.json is cut short), and that diagnosis sweeps the folder the inventory does not look into
    (session,) = sorted({key.rsplit("/", 1)[0] for key in audited.stored_keys()
                         if key.startswith("reports/critical-job/sessions/")})
    temporary = f"{session}/.report.html.k3j2h1.tmp"
    audited.put(temporary, b"<html>")
    whole = audited.get("reports/critical-job/model.json") or b""
    audited.put("reports/critical-job/model.json", whole[:10])
    result = audit(audited)
    assert f"{temporary.removeprefix('reports/')}: a killed write's temporary file; removed" in result["repaired"]
    assert audited.get(temporary) is None
    assert audit(audited)["repaired"] == []


def test_a_truncated_model_json_is_rewritten_by_a_plain_audit(audited: Backend) -> None:
    whole = audited.get("reports/critical-job/model.json") or b""
    audited.put("reports/critical-job/model.json", whole[: len(whole) // 2])
    result = audit(audited)
    assert result["summary"]["diagnosed"] == 1 and result["summary"]["skipped"] == len(FLEET_JOBS) - 1
    assert result["repaired"] == [f"critical-job/model.json: {len(whole) // 2} bytes where {len(whole)} were "
                                  "written; damaged, so the job is diagnosed again"]
    assert orjson.loads(audited.get("reports/critical-job/model.json") or b"")["job_id"] == "critical-job"


def history(backend: Backend) -> pd.DataFrame:
    frames = [pd.read_parquet(io.BytesIO(backend.get(key) or b""))
              for key in sorted(backend.stored_keys()) if key.startswith("reports/history/")]
    return pd.concat(frames, ignore_index=True)


def fleet_row(backend: Backend, job_id: str) -> dict[str, Any]:
    rows = orjson.loads(backend.get("reports/fleet.json") or b"")["jobs"]
    return next(row for row in rows if row["job_id"] == job_id)


def cut(key: str) -> Callable[[Backend], None]:
    return lambda backend: backend.put(key, (backend.get(key) or b"")[:100])


def gone(key: str) -> Callable[[Backend], None]:
    return lambda backend: backend.storage.delete_report(key.removeprefix("reports/"))


@pytest.mark.parametrize("damage", [cut("reports/critical-job/model.json"), gone("reports/critical-job/model.json"),
                                    gone("reports/critical-job/report.html")],
                         ids=["model.json cut short", "model.json deleted", "report.html deleted"])
@pytest.mark.parametrize("by", ["audit", "post-job"])
def test_rewriting_damaged_outputs_records_no_second_run(audited: Backend, damage: Callable[[Backend], None],
                                                         by: str) -> None:
    """The job's inputs did not change: its one run stays its one run, in the file that holds it."""
    before, row = history(audited), fleet_row(audited, "critical-job")
    damage(audited)
    params = AuditParameters(storage=audited.settings.uri)
    if by == "audit":
        assert audit(audited)["summary"]["diagnosed"] == 1
    else:
        assert post_job(job_id="critical-job", params=params)["job"]["status"] == "diagnosed"
    pd.testing.assert_frame_equal(history(audited), before)
    assert fleet_row(audited, "critical-job")["history_key"] == row["history_key"]
    assert orjson.loads(audited.get("reports/critical-job/model.json") or b"")["job_id"] == "critical-job"
    assert audited.get("reports/critical-job/report.html")
    assert audit(audited)["summary"]["diagnosed"] == 0  # repaired: nothing left to do


def test_a_commit_cut_short_is_moved_aside_and_its_jobs_diagnosed_again(tmp_path: Path, fleet_files: Path) -> None:
    backend = local_backend(tmp_path / "fleet")
    upload_fleet(backend, fleet_files)
    backend.put("reports/.commits/audit-20261001T020000Z-0123abcd-b00000000.parquet", b"PAR1 cut")
    result = audit(backend)
    (line,) = result["repaired"]
    assert line.startswith(".commits/audit-20261001T020000Z-0123abcd-b00000000.parquet: not a readable commit")
    assert line.endswith("moved to damaged/.commits/audit-20261001T020000Z-0123abcd-b00000000.parquet."
                         + line.rsplit(".", 1)[-1])
    assert result["summary"]["diagnosed"] == len(FLEET_JOBS)
    assert not [key for key in backend.stored_keys() if key.startswith("reports/.commits/")]
