"""What Prefect sees of a run, read back through its API: the final state and its message, the
run's name, its table artifacts, and the project's log lines (no user settings)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.outcome import result_of
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.post_job import post_job
from stormwatch.flows.run_artifacts import ATTENTION_KEY, FAILED_KEY, POST_JOB_KEY, VERDICTS_KEY
from stormwatch.tasks.storage.lease import LeaseRecord, lease_key
from tests import builders as b

pytestmark = pytest.mark.usefixtures("prefect_api")

AS_OF = datetime(2025, 3, 4, 2, 0, 5, tzinfo=UTC)


def fleet_root(tmp_path: Path) -> Path:
    """critical-job, clean-job, broken-job (fails: over the byte cap), and a refused id."""
    root = tmp_path / "fleet"
    b.write_multi_rank_job(root / "jobs" / "critical-job", world_size=2, alerts=b.DEFAULT_ALERTS,
                           phases=b.DEFAULT_PHASES)
    b.write_multi_rank_job(root / "jobs" / "clean-job", world_size=1, samples=12)
    b.write_multi_rank_job(root / "jobs" / "broken-job", world_size=2, samples=4000)
    (root / "jobs" / "bad%2fid").mkdir()
    (root / "jobs" / "bad%2fid" / "events.jsonl").write_bytes(b"{}\n")
    return root


def plant_lease(root: Path, *, expires_in: timedelta) -> LeaseRecord:
    """Another host's audit lease, live or expired."""
    now = datetime.now(UTC)
    record = LeaseRecord(owner="nightly-audit on other-host pid 7", token=uuid.uuid4().hex, acquired_at=now,
                         expires_at=now + expires_in, host="other-host", pid=7, renewed_at=now)
    path = root / "reports" / lease_key("audit")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(record.to_bytes())
    return record


def read_run(state: Any, *, log_line: str | None = None) -> tuple[Any, dict[str, Any], list[str]]:
    """The flow run as the API has it, its artifacts by key, and its log messages (the log worker ships
    them in the background: read until one starts with ``log_line``, for up to 30 s)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, LogFilter, LogFilterFlowRunId

    run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
        artifacts = {item.key: item for item in client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id])))}
        messages: list[str] = []
        for _ in range(60 if log_line else 1):
            messages = [log.message for log in client.read_logs(
                LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))]
            if log_line is None or any(message.startswith(log_line) for message in messages):
                break
            time.sleep(0.5)
    return run, artifacts, messages


def table(artifact: Any) -> list[dict[str, Any]]:
    data = orjson.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
    if isinstance(data, dict):  # columns of values
        return [dict(zip(data, values, strict=True)) for values in zip(*data.values(), strict=True)]
    return list(data)


def test_a_finding_fails_the_run_named_for_its_night_with_tables_and_project_logs(tmp_path: Path) -> None:
    root = fleet_root(tmp_path)
    plant_lease(root, expires_in=-timedelta(minutes=5))  # expired: taken over, with a stormwatch.* warning
    cap = sum(path.stat().st_size for path in (root / "jobs" / "critical-job").rglob("*") if path.is_file())
    params = AuditParameters(storage=str(root), fail_on="critical", as_of=AS_OF, max_job_bytes=cap + 1)

    state = nightly_audit(params, return_state=True)

    assert state.is_failed()
    assert state.message == "1 job at or above fail_on critical: critical-job"
    result = result_of(state)  # the data is kept: the command line prints it and exits 3
    assert result["exit_code"] == 3 and result["findings"] == ["critical-job"] and result["failed"] == ["broken-job"]
    run, artifacts, messages = read_run(state, log_line="taking over lease")
    assert run.name == "nightly-audit-2025-03-04T02:00:05Z"
    assert run.state.type.value == "FAILED" and run.state.message == state.message
    assert any(message.startswith("taking over lease .locks/audit.json: expired") for message in messages)
    assert {VERDICTS_KEY, ATTENTION_KEY, FAILED_KEY} <= set(artifacts)
    counts = {row["count of"]: row["jobs"] for row in table(artifacts[VERDICTS_KEY])}
    assert counts["verdict critical"] == 1 and counts["status failed"] == 1 and counts["status refused"] == 1
    attention = table(artifacts[ATTENTION_KEY])
    assert [(row["job"], row["verdict"]) for row in attention] == [("critical-job", "critical"),
                                                                   ("broken-job", "failed")]
    assert attention[0]["summary"] and "JobTooLargeError" in attention[1]["summary"]
    failed = {row["job"]: (row["status"], row["error"]) for row in table(artifacts[FAILED_KEY])}
    assert set(failed) == {"broken-job", "bad%2fid"} and "JobTooLargeError" in failed["broken-job"][1]


def test_below_fail_on_the_run_completes(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    b.write_multi_rank_job(root / "jobs" / "clean-job", world_size=1, samples=12)
    state = nightly_audit(AuditParameters(storage=str(root), fail_on="warning"), return_state=True)
    assert state.is_completed() and result_of(state)["exit_code"] == 0


def test_a_held_lease_cancels_the_run_and_names_its_holder(tmp_path: Path) -> None:
    root = fleet_root(tmp_path)
    record = plant_lease(root, expires_in=timedelta(hours=1))
    state = nightly_audit(AuditParameters(storage=str(root), fail_on="critical"), return_state=True)
    assert state.is_cancelled()
    assert state.message == f"not audited: another audit holds the lease {record.describe()}; it ends by then if " \
                            "that audit is gone, or run `stormwatch audit --break-lease`"
    assert result_of(state)["exit_code"] == 1
    assert not (root / "reports" / "fleet.json").exists()


@pytest.mark.parametrize(("job_id", "fail_on", "kind", "message"), [
    ("critical-job", "critical", "FAILED", "job critical-job at or above fail_on critical: critical: "),
    ("critical-job", "never", "COMPLETED", "job critical-job: critical"),
    ("clean-job", "warning", "COMPLETED", "job clean-job: clean"),
    ("missing-job", "never", "FAILED", "job missing-job failed: "),
])
def test_post_job_states_names_and_table(tmp_path: Path, job_id: str, fail_on: str, kind: str, message: str) -> None:
    root = fleet_root(tmp_path)
    state = post_job(job_id, AuditParameters(storage=str(root), fail_on=fail_on), lease_wait_s=0,
                     return_state=True)
    assert state.type.value == kind and str(state.message).startswith(message)
    run, artifacts, _ = read_run(state)
    assert run.name == f"post-job-{job_id}"
    (row,) = table(artifacts[POST_JOB_KEY])
    assert row["job"] == job_id and row["status"] == result_of(state)["job"]["status"]
