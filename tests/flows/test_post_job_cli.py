"""``stormwatch post-job JOB_ID --storage URI``: the post-job flow for one job from a shell, exit code =
its verdict's; waits for (and names) an audit holding the lease (issue 23)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main
from stormwatch.tasks.storage.lease import acquire, job_lease
from stormwatch.tasks.storage.local import LocalStorage
from stormwatch.tasks.storage.protocol import StorageSettings
from tests import builders as b

pytestmark = pytest.mark.usefixtures("prefect_api")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """jobs/critical-job (alerts, an OOM) and jobs/clean-job, written by stormlog's writers."""
    fleet = tmp_path / "fleet"
    b.write_multi_rank_job(fleet / "jobs" / "critical-job", world_size=2, alerts=b.DEFAULT_ALERTS,
                           job_id="critical-job")
    b.write_multi_rank_job(fleet / "jobs" / "clean-job", world_size=2, samples=12, job_id="clean-job")
    return fleet


def fleet_rows(root: Path) -> dict[str, dict]:
    document = orjson.loads((root / "reports" / "fleet.json").read_bytes())
    return {row["job_id"]: row for row in document["jobs"]}


@pytest.mark.parametrize(("job", "fail_on", "verdict"), [
    ("critical-job", "critical", "critical"),
    ("critical-job", "never", "critical"),
    ("clean-job", "warning", "clean"),
])
def test_post_job_exits_with_the_verdicts_code_and_writes_the_row(
    root: Path, capsys: pytest.CaptureFixture[str], job: str, fail_on: str, verdict: str
) -> None:
    code = main(["post-job", job, "--storage", str(root), "--fail-on", fail_on])
    model = orjson.loads((root / "reports" / job / "model.json").read_bytes())
    assert model["verdict"]["status"] == verdict and code == model["verdict"]["exit_code"]
    assert code == (3 if verdict == "critical" and fail_on != "never" else 0)
    assert not (root / "reports" / "fleet.json").exists()  # a post-job rewrites nothing fleet-wide
    out, err = capsys.readouterr()
    assert out.startswith(f"{job}: {model['verdict']['summary']}\n")
    assert f"  exit code: {code} (--fail-on {fail_on})" in out
    assert f"  report: {(root / 'reports' / job / 'report.html').as_uri()}" in out
    assert "notifications: none sent (no channel configured)" in out
    assert "  fleet: committed; fleet.json and the index show it after the next audit or `stormwatch compact`" in out
    assert "temporary Prefect server" not in err  # PREFECT_API_URL is set (the session's server)

    assert main(["compact", "--storage", str(root)]) == 0
    assert capsys.readouterr().out == "folded 1 commit (1 jobs) into fleet.json, fleet.parquet and the index\n"
    row = fleet_rows(root)[job]
    assert (row["status"], row["verdict"], row["exit_code"]) == ("diagnosed", verdict, code)
    assert set(fleet_rows(root)) == {job}  # the other job is the next audit's
    assert main(["compact", "--storage", str(root)]) == 0
    assert capsys.readouterr().out == "nothing to fold: fleet.json holds every committed job\n"


def test_post_job_waits_only_for_its_jobs_lease_and_names_its_holder(root: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    storage = LocalStorage(StorageSettings(uri=str(root)))
    held = acquire(storage, name=job_lease("critical-job"), owner="post-job critical-job on gpu-head pid 4242")
    audit = acquire(storage, owner="nightly-audit on gpu-head pid 4243")  # never waited for
    assert held is not None and audit is not None
    try:
        code = main(["post-job", "critical-job", "--storage", str(root), "--lease-wait", "0.3"])
    finally:
        held.release()
    assert code == 1
    err = capsys.readouterr().err
    assert ("waiting up to 0.3 s for job critical-job's lease held by post-job critical-job on gpu-head pid 4242 "
            "until ") in err
    error = next(line for line in err.splitlines() if line.startswith("error: "))
    assert error.startswith("error: job critical-job not diagnosed: not diagnosed after waiting 0.3 s: another "
                            "post-job of this job holds its lease post-job critical-job on gpu-head pid 4242")
    assert not (root / "reports" / "critical-job").exists()  # nothing read or written
    audit.release()


def test_compact_refuses_a_root_that_is_no_storage_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["compact", "--storage", str(tmp_path)]) == 2
    assert main(["compact", "--storage", str(tmp_path / "missing")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"error: {tmp_path} is not a storage root: it has no jobs/ or reports/")
    assert lines[1] == f"error: storage root {tmp_path / 'missing'} does not exist" and len(lines) == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]  # nothing written
