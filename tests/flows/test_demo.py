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
        "legacy": "clean", "missing-ranks": "warning", "oom": "critical",
    }
    most_severe = {job["job_id"]: (job["most_severe"] or {}).get("signal") for job in fleet["jobs"]}
    assert most_severe["collective-spike"] == "collective:collective_confident"
    assert most_severe["drifting-rank"] == "gap:persistent_drift"
    assert most_severe["oom"] == "alert:error"
    broken = orjson.loads((root / "reports" / "broken-artifact" / "model.json").read_bytes())
    assert any("rank_1/telemetry.jsonl:11:" in warning for warning in broken["warnings"])
    assert (root / "reports" / "index.html").is_file()
    assert all((root / "reports" / job / "report.html").is_file() for job in verdicts)
    out = capsys.readouterr().out
    assert "audited 6 jobs: 6 diagnosed" in out and "critical: collective-spike, drifting-rank, oom" in out

    assert main(["demo", str(root)]) == 0  # again: inputs rewritten identically, so nothing re-diagnosed
    assert "0 diagnosed, 6 unchanged" in capsys.readouterr().out
