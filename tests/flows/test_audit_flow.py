"""The nightly-audit and post-job flows against a local folder and an S3 prefix (moto, over HTTP)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import orjson
import pandas as pd
import pytest

from stormwatch.flows.parameters import AuditParameters
from stormwatch.tasks.compact import compact
from tests import builders as b
from tests.flows.run_flows import run_audit, run_post_job
from tests.tasks.storage.backends import Backend

pytestmark = pytest.mark.usefixtures("prefect_api")


def write_fleet(tmp: Path, backend: Backend) -> None:
    """critical-job (alerts incl. OOM), clean-job, broken-job (garbage only), a refused id."""
    b.write_multi_rank_job(tmp / "critical-job", world_size=2, alerts=b.DEFAULT_ALERTS, phases=b.DEFAULT_PHASES)
    b.write_multi_rank_job(tmp / "clean-job", world_size=2, samples=12)
    (tmp / "broken-job").mkdir()
    (tmp / "broken-job" / "events.jsonl").write_bytes(b"not json at all\n")
    (tmp / "bad%2fid").mkdir()
    (tmp / "bad%2fid" / "events.jsonl").write_bytes(b"{}\n")
    for folder in ("critical-job", "clean-job", "broken-job", "bad%2fid"):
        backend.upload(tmp / folder, f"jobs/{folder}")


def input_hashes(backend: Backend) -> dict[str, str]:
    return {key: hashlib.sha256(backend.get(key) or b"").hexdigest()
            for key in sorted(backend.stored_keys()) if key.startswith("jobs/")}


def fleet(backend: Backend) -> dict:
    return orjson.loads(backend.get("reports/fleet.json") or b"{}")


def statuses(backend: Backend) -> dict[str, tuple[str, str | None]]:
    return {job["job_id"]: (job["status"], job["verdict"]) for job in fleet(backend)["jobs"]}


def run(backend: Backend, **options: object) -> dict:
    return run_audit(AuditParameters(storage=backend.settings.uri, endpoint_url=backend.settings.endpoint_url,
                                         **options))


def test_audit_diagnoses_skips_unchanged_and_never_touches_inputs(backend: Backend, tmp_path: Path) -> None:
    write_fleet(tmp_path, backend)
    before = input_hashes(backend)

    result = run(backend, fail_on="critical")
    assert result["exit_code"] == 3 and result["critical"] == ["critical-job"]
    assert result["refused"] == ["bad%2fid"] and result["failed"] == []
    assert statuses(backend) == {
        "bad%2fid": ("refused", None),
        "broken-job": ("diagnosed", "empty"),
        "clean-job": ("diagnosed", "clean"),
        "critical-job": ("diagnosed", "critical"),
    }
    keys = backend.stored_keys()
    assert {"reports/critical-job/model.json", "reports/clean-job/model.json", "reports/fleet.json",
            "reports/fleet.parquet", "reports/index.html", "reports/critical-job/report.html",
            "reports/clean-job/report.html"} <= keys
    index = (backend.get("reports/index.html") or b"").decode()
    assert 'href="critical-job/report.html"' in index and "bad%2fid" in index
    assert not any("bad" in key for key in keys if key.startswith("reports/"))  # nothing for a refused id
    model = orjson.loads(backend.get("reports/critical-job/model.json") or b"")
    assert model["verdict"]["status"] == "critical" and model["model"]["present_ranks"] == [0, 1]
    table = pd.read_parquet(io.BytesIO(backend.get("reports/fleet.parquet") or b""))
    assert sorted(zip(table["job_id"], table["rank"], strict=True)) == [
        ("clean-job", 0), ("clean-job", 1), ("critical-job", 0), ("critical-job", 1)]
    assert table.loc[table["job_id"] == "critical-job", "has_anomaly"].all()

    again = run(backend)  # nothing changed: every job skipped, verdicts kept
    assert again["summary"]["skipped"] == 3 and again["summary"]["diagnosed"] == 0
    assert statuses(backend)["critical-job"] == ("skipped", "critical")
    assert again["exit_code"] == 0  # fail_on never this time

    changed = tmp_path / "clean-job" / "rank_1" / "events.jsonl"
    backend.put("jobs/clean-job/rank_1/events.jsonl", changed.read_bytes() + b"\n")
    before["jobs/clean-job/rank_1/events.jsonl"] = hashlib.sha256(changed.read_bytes() + b"\n").hexdigest()
    third = run(backend)
    assert (third["summary"]["diagnosed"], third["summary"]["skipped"]) == (1, 2)
    assert statuses(backend)["clean-job"] == ("diagnosed", "clean")

    forced = run(backend, force=True)
    assert forced["summary"]["diagnosed"] == 3
    assert input_hashes(backend) == before  # inputs are never modified


def test_a_failing_job_is_recorded_and_the_others_complete(backend: Backend, tmp_path: Path) -> None:
    b.write_multi_rank_job(tmp_path / "big-job", world_size=2, samples=400)
    b.write_multi_rank_job(tmp_path / "small-job", world_size=1, samples=5)
    backend.upload(tmp_path / "big-job", "jobs/big-job")
    backend.upload(tmp_path / "small-job", "jobs/small-job")
    small = sum(len(backend.get(k) or b"") for k in backend.stored_keys() if k.startswith("jobs/small-job/"))

    result = run(backend, max_job_bytes=small + 1)
    assert result["failed"] == ["big-job"]
    jobs = {job["job_id"]: job for job in fleet(backend)["jobs"]}
    assert jobs["big-job"]["status"] == "failed" and "JobTooLargeError" in jobs["big-job"]["error"]
    assert jobs["small-job"]["status"] == "diagnosed"
    assert backend.get("reports/big-job/model.json") is None


def test_post_job_commits_one_job_and_a_fold_publishes_it(backend: Backend, tmp_path: Path) -> None:
    write_fleet(tmp_path, backend)
    run(backend)
    first = {job["job_id"]: job for job in fleet(backend)["jobs"]}
    fleet_files = {key: backend.get(key) for key in ("reports/fleet.json", "reports/fleet.parquet",
                                                     "reports/index.html")}

    result = run_post_job(job_id="critical-job", params=AuditParameters(storage=backend.settings.uri,
                      endpoint_url=backend.settings.endpoint_url, force=True, fail_on="warning"))
    assert result["exit_code"] == 3 and result["job"]["verdict"] == "critical"
    assert {key: backend.get(key) for key in fleet_files} == fleet_files  # nothing fleet-wide rewritten
    assert [key for key in backend.stored_keys() if "/.commits/" in key]  # one delta, pending

    done = compact(backend.storage, storage_uri=backend.settings.uri)
    assert len(done.folded) == 1 and done.jobs == 1
    assert not [key for key in backend.stored_keys() if "/.commits/" in key]
    after = {job["job_id"]: job for job in fleet(backend)["jobs"]}
    assert {"trends", "regressions", "suspect_hosts", "coverage", "folded_at"} <= set(fleet(backend))
    assert set(after) == set(first)
    assert after["critical-job"]["diagnosed_at"] > first["critical-job"]["diagnosed_at"]
    assert after["clean-job"] == first["clean-job"]
    table = pd.read_parquet(io.BytesIO(backend.get("reports/fleet.parquet") or b""))
    assert (table["job_id"] == "critical-job").sum() == 2  # ranks replaced, not duplicated
    assert (table["job_id"] == "clean-job").sum() == 2  # carried over
    history = sorted(key for key in backend.stored_keys() if key.startswith("reports/history/"))
    assert len(history) == 2  # the audit's file, and post-job's for the job it diagnosed again
    rows = pd.read_parquet(io.BytesIO(backend.get(history[-1]) or b""))
    assert set(rows["job_id"]) == {"critical-job"} and len(rows) == 2
    assert b"post-job results folded in " in (backend.get("reports/index.html") or b"")
    assert compact(backend.storage, storage_uri=backend.settings.uri).folded == ()  # folded once

    keys = backend.stored_keys()
    refused = run_post_job(job_id="../escape",
                       params=AuditParameters(storage=backend.settings.uri, endpoint_url=backend.settings.endpoint_url))
    assert refused["exit_code"] == 2 and refused["job"]["status"] == "refused"
    assert backend.stored_keys() == keys  # nothing written for a refused id


def test_an_audit_makes_two_artifacts_whatever_the_number_of_jobs(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    from stormwatch.flows.audit import REPORTS_ARTIFACT

    root = tmp_path / "fleet"
    b.write_multi_rank_job(root / "jobs" / "Train_42", world_size=2, alerts=b.DEFAULT_ALERTS)
    b.write_multi_rank_job(root / "jobs" / "clean_[x](y)", world_size=1)
    result = run_audit(AuditParameters(storage=str(root), report_base_url="https://reports.example.com/r"))
    assert result["index"] == "https://reports.example.com/r/index.html"
    with get_client(sync_client=True) as client:
        found = [client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
                                       sort=ArtifactSort.CREATED_DESC, limit=1)[0]
                 for key in (REPORTS_ARTIFACT, "stormwatch-fleet-index")]  # this audit's: the newest of each key
    latest = {artifact.key: artifact for artifact in found}
    assert latest["stormwatch-fleet-index"].type == "markdown"  # Prefect stores a link artifact as markdown
    listing = str(latest[REPORTS_ARTIFACT].data)
    assert listing.startswith("2 reports published")
    critical = listing.index("critical: [Train42](https://reports.example.com/r/Train_42/report.html)")
    assert critical < listing.index("clean: [cleanxy](https://reports.example.com/r/clean_%5Bx%5D%28y%29/report.html)")
