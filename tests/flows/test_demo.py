"""``stormwatch demo``: the README's first command, end to end."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main


@pytest.mark.usefixtures("prefect_api")
def test_demo_writes_the_fleet_and_audits_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "demo"
    assert main(["demo", str(root)]) == 0
    fleet = orjson.loads((root / "reports" / "fleet.json").read_bytes())
    verdicts = {job["job_id"]: job["verdict"] for job in fleet["jobs"]}
    assert verdicts == {
        "broken-artifact": "clean", "collective-spike": "critical", "drifting-rank": "critical",
        "legacy": "clean", "missing-ranks": "warning", "oom": "critical", "restarted": "critical",
    }
    most_severe = {job["job_id"]: (job["most_severe"] or {}).get("signal") for job in fleet["jobs"]}
    assert most_severe["collective-spike"] == "collective:collective_confident"
    assert most_severe["drifting-rank"] == "gap:persistent_drift"
    assert most_severe["oom"] == "alert:error"
    # the restarted job is flagged from its first attempt, although stormlog's default session is the clean restart
    restarted = orjson.loads((root / "reports" / "restarted" / "model.json").read_bytes())
    first, second = restarted["attempts"]
    assert first["description"] == "attempt 1 of 2, interrupted, OOM on rank 3" and second["verdict"] == "clean"
    assert restarted["selected_session_id"] == second["session_id"] and most_severe["restarted"] == "alert:error"
    row = next(job for job in fleet["jobs"] if job["job_id"] == "restarted")
    assert (row["session_count"], row["worst_session"]) == (2, first["session_id"])
    assert (root / "reports" / "restarted" / "sessions" / first["session_id"] / "report.html").is_file()
    broken = orjson.loads((root / "reports" / "broken-artifact" / "model.json").read_bytes())
    assert any("rank_1/telemetry.jsonl:11:" in warning for warning in broken["warnings"])
    index = (root / "reports" / "index.html").read_text()
    assert "in attempt 1 of 2, interrupted, OOM on rank 3" in index  # the index says which attempt the cause is from
    assert all((root / "reports" / job / "report.html").is_file() for job in verdicts)
    out = capsys.readouterr().out
    assert "audited 7 jobs: 7 diagnosed" in out and "critical: collective-spike, drifting-rank, oom, restarted" in out

    assert main(["demo", str(root)]) == 0  # again: inputs rewritten identically, so nothing re-diagnosed
    assert "0 diagnosed, 7 unchanged" in capsys.readouterr().out
