"""Per-job caps through ``stormwatch diagnose``, ``stormwatch audit`` and the audit flow:
an oversized artifact is skipped with a warning, a job over ``--max-events`` fails alone."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.cli import main
from stormwatch.flows.parameters import AuditParameters
from tests import builders as b
from tests.tasks.storage.backends import Backend

MAX_EVENTS = 30  # busy-job holds 84 events, big-job 28, small-job 6


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 ranks (28 events) and a sparse 2 GiB ``rank_9/events.jsonl`` next to them."""
    root = tmp_path_factory.mktemp("limits") / "big-job"
    b.write_multi_rank_job(root, world_size=2, samples=12)
    big = root / "rank_9" / "events.jsonl"
    big.parent.mkdir()
    with big.open("wb") as stream:
        os.truncate(stream.fileno(), 2 * b.GIB)
    return root


@pytest.mark.parametrize(
    ("extra", "code", "stderr"),
    [
        ([], 0, ""),
        (["--max-events", "28"], 0, ""),
        (["--max-events", "27"], 1, "error: job big-job not diagnosed: job holds more than max_events=27 events"),
        (["--max-events", "0"], 2, "max_events must be a positive integer"),
        (["--max-artifact-bytes", "-1"], 2, "max_artifact_bytes must be a positive integer"),
        (["--max-artifact-bytes", "many"], 2, "invalid int value"),
        (["--max-artifact-bytes", "64"], 5, ""),
    ],
)
def test_diagnose_flags(job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], code: int,
                        stderr: str) -> None:
    assert main(["diagnose", str(job), "--out", str(tmp_path), *extra]) == code
    assert stderr in capsys.readouterr().err
    if code in (0, 5):
        warnings = orjson.loads((tmp_path / "model.json").read_bytes())["warnings"]
        assert any(w.startswith(f"Skipped artifact {job / 'rank_9' / 'events.jsonl'}: ") for w in warnings)


def test_diagnose_default_caps_skip_the_2_gib_file(job: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["diagnose", str(job), "--out", str(tmp_path)]) == 0
    assert "2/2 present" in capsys.readouterr().out
    model = orjson.loads((tmp_path / "model.json").read_bytes())
    big = job / "rank_9" / "events.jsonl"
    assert f"Skipped artifact {big}: {2 * b.GIB} bytes exceeds max_artifact_bytes={b.GIB}" in model["warnings"]


def _fleet_with_caps(tmp: Path, backend: Backend) -> int:
    """big-job (2 ranks + a JSONL artifact over the returned cap), busy-job (over MAX_EVENTS), small-job."""
    b.write_multi_rank_job(tmp / "big-job", world_size=2, samples=12)
    b.write_multi_rank_job(tmp / "busy-job", world_size=2, samples=40)
    b.write_multi_rank_job(tmp / "small-job", world_size=1, samples=4)
    cap = max(path.stat().st_size for path in tmp.rglob("*") if path.is_file()) + 1
    (tmp / "big-job" / "rank_9").mkdir()
    (tmp / "big-job" / "rank_9" / "events.jsonl").write_bytes(b"\0" * (cap + 1))
    for folder in ("big-job", "busy-job", "small-job"):
        backend.upload(tmp / folder, f"jobs/{folder}")
    return cap


def _check_fleet(backend: Backend, cap: int) -> None:
    jobs = {job["job_id"]: job for job in orjson.loads(backend.get("reports/fleet.json") or b"{}")["jobs"]}
    assert {job_id: job["status"] for job_id, job in jobs.items()} == {
        "big-job": "diagnosed", "busy-job": "failed", "small-job": "diagnosed"}
    # loading stops at the first rank past the cap: 42 of busy-job's 84 events
    assert jobs["busy-job"]["error"] == f"JobLimitError: job holds more than max_events={MAX_EVENTS} events (42 so far)"
    model = orjson.loads(backend.get("reports/big-job/model.json") or b"")
    assert model["model"]["present_ranks"] == [0, 1]
    skipped = [w for w in model["warnings"] if w.startswith("Skipped artifact ")]
    assert len(skipped) == 1
    assert skipped[0].endswith(f"rank_9/events.jsonl: {cap + 1} bytes exceeds max_artifact_bytes={cap}")
    assert model["options"]["max_artifact_bytes"] == cap and model["options"]["max_events"] == MAX_EVENTS


@pytest.mark.usefixtures("prefect_api")
def test_audit_flow_caps(backend: Backend, tmp_path: Path) -> None:
    cap = _fleet_with_caps(tmp_path, backend)
    result = nightly_audit(AuditParameters(storage=backend.settings.uri, endpoint_url=backend.settings.endpoint_url,
                                           max_artifact_bytes=cap, max_events=MAX_EVENTS))
    assert result["failed"] == ["busy-job"] and result["summary"]["diagnosed"] == 2
    _check_fleet(backend, cap)
    if backend.name == "s3":  # the object over the cap is listed (with its size), never downloaded
        from stormwatch.tasks.storage.s3 import S3Storage

        storage = backend.reopen()
        assert isinstance(storage, S3Storage)
        tree = storage.fetch_job("big-job", max_artifact_bytes=cap)
        assert not tree.exists("rank_9/events.jsonl") and tree.exists("rank_0/events.jsonl")
        assert tree.size_bytes("rank_9/events.jsonl") == cap + 1


@pytest.mark.usefixtures("prefect_api")
def test_audit_cli_caps(tmp_path: Path) -> None:
    from tests.tasks.storage.backends import local_backend

    backend = local_backend(tmp_path / "fleet")
    (tmp_path / "src").mkdir()
    cap = _fleet_with_caps(tmp_path / "src", backend)
    code = main(["audit", "--storage", backend.settings.uri, "--workers", "1",
                 "--max-artifact-bytes", str(cap), "--max-events", str(MAX_EVENTS)])
    assert code == 0
    _check_fleet(backend, cap)


@pytest.mark.parametrize(("flag", "value"), [("--max-events", "0"), ("--max-artifact-bytes", "-3")])
def test_audit_cli_refuses_bad_caps(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str,
                                    value: str) -> None:
    assert main(["audit", "--storage", str(tmp_path), flag, value]) == 2
    assert "must be a positive integer" in capsys.readouterr().err


def test_serve_deployments_carry_the_caps() -> None:
    from stormwatch.flows.deployments import build_deployments

    params = AuditParameters(storage="s3://fleet/prod", endpoint_url=None, fail_on="never", preset="medium",
                             max_artifact_bytes=4096, max_events=99)
    deployments = build_deployments(params, cron="0 2 * * *", timezone="UTC")
    for deployment in deployments:
        shared = deployment.parameters["params"]
        assert (shared["max_artifact_bytes"], shared["max_events"]) == (4096, 99)
