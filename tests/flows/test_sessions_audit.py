"""The nightly audit and post-job diagnose every session of a job (issue 18), on a local folder and an
S3 prefix (moto, over HTTP): a job whose first attempt ran out of memory before a clean restart comes
out critical, with the attempt named in fleet.json, its ranks in fleet.parquet and the history."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pandas as pd
import pyarrow.parquet as pq
import pytest

from stormwatch.flows.parameters import AuditParameters
from tests import builders as b
from tests.flows.run_flows import run_audit, run_post_job
from tests.tasks.storage.backends import Backend

pytestmark = pytest.mark.usefixtures("prefect_api")


def params(backend: Backend, **options: object) -> AuditParameters:
    return AuditParameters(storage=backend.settings.uri, endpoint_url=backend.settings.endpoint_url, **options)


def fleet_rows(backend: Backend) -> dict[str, dict]:
    fleet = orjson.loads(backend.get("reports/fleet.json") or b"{}")
    return {job["job_id"]: job for job in fleet["jobs"]}


def rank_rows(backend: Backend) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(backend.get("reports/fleet.parquet") or b""))


def test_the_audit_and_post_job_judge_a_job_by_its_worst_session(backend: Backend, tmp_path: Path) -> None:
    b.write_restarted_job(tmp_path / "train-7b")
    b.write_multi_rank_job(tmp_path / "clean-job", world_size=2)
    for job in ("train-7b", "clean-job"):
        backend.upload(tmp_path / job, f"jobs/{job}")

    result = run_audit(params(backend, fail_on="critical"))
    assert result["exit_code"] == 3 and result["critical"] == ["train-7b"]
    rows = fleet_rows(backend)
    job = orjson.loads(backend.get("reports/train-7b/model.json") or b"")
    first, second = job["attempts"]
    assert (rows["train-7b"]["verdict"], rows["train-7b"]["session_count"]) == ("critical", 2)
    assert rows["train-7b"]["worst_session"] == first["session_id"]
    assert rows["train-7b"]["worst_attempt"] == first["description"] and rows["clean-job"]["worst_attempt"] is None
    assert rows["train-7b"]["most_severe"]["signal"] == "alert:error"
    assert (rows["clean-job"]["verdict"], rows["clean-job"]["session_count"]) == ("clean", 1)
    for attempt in (first, second):
        assert backend.get(f"reports/train-7b/sessions/{attempt['session_id']}/report.html") is not None
    table = rank_rows(backend)
    per_job = table.groupby(["job_id", "session_id"]).size().to_dict()
    assert per_job == {("clean-job", rows["clean-job"]["worst_session"]): 2, ("train-7b", first["session_id"]): 4,
                       ("train-7b", second["session_id"]): 4}
    history_keys = [key for key in backend.stored_keys() if key.startswith("reports/history/")]
    history = pq.read_table(io.BytesIO(backend.get(history_keys[0]) or b"")).to_pandas()
    mine = history[history["job_id"] == "train-7b"]
    assert len(mine) == 8 and set(mine["session_id"]) == {first["session_id"], second["session_id"]}
    assert set(mine["verdict"]) == {"critical"}

    again = run_audit(params(backend))  # unchanged: skipped, every session's ranks carried over
    assert again["summary"]["skipped"] == 2 and len(rank_rows(backend)) == len(table)
    assert fleet_rows(backend)["train-7b"]["worst_session"] == first["session_id"]

    done = run_post_job("train-7b", params(backend, force=True, fail_on="critical"))
    assert done["exit_code"] == 3 and done["job"]["worst_session"] == first["session_id"]
    assert len(rank_rows(backend)) == len(table)

    capped = run_post_job("train-7b", params(backend, force=True, fail_on="critical", max_sessions=1))
    assert capped["exit_code"] == 0 and capped["job"]["verdict"] == "clean"  # only the restart diagnosed
    assert "1 of 2 sessions not diagnosed" in " ".join(
        orjson.loads(backend.get("reports/train-7b/model.json") or b"")["warnings"])
