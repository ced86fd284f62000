"""bench/fleet_growth_bench.py's smallest form, local storage only: three nights of new runs audited one after
another, the unchanged rerun and Prefect's start-up, then post-jobs against a few stored runs, one alone, two one
after another and two at a time. The bench must run through (exit 0: every audit and post-job succeeded and
passed its checks) and print its tables and every target; whether the targets are met is its figures' business,
not this test's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = (
    "growth: last night's wall time <= 1.2x night 2's",
    "growth: last night's fleet-state bytes written <= 1.2x night 2's",
    "unchanged audit of the stored runs <= start-up + 5 s",
    "one post-job <= start-up + 2 s",
    "one post-job peak RSS < 300 MB",
    "post-jobs K at a time >= 1.6x sooner than one after another",
)


def test_the_fleet_growth_bench_smallest_form_runs_through(prefect_api: str, tmp_path: Path) -> None:
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    command = [sys.executable, str(REPO / "bench" / "fleet_growth_bench.py"), "--short", "--nights", "3",
               "--runs-per-night", "5", "--stored", "10", "--post-jobs", "2", "--parallel", "2",
               "--timeout", "300", "--keep", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    out = done.stdout
    report = out[-8000:] + done.stderr[-4000:]
    assert done.returncode == 0, report
    assert "== growth, local: 3 nights x 5 new runs" in out, report
    night_rows = [line.split() for line in out.splitlines() if line[:5].strip() in {"1", "2", "3"}]
    assert [row[:3] for row in night_rows] == [["1", "5", "5"], ["2", "10", "5"], ["3", "15", "5"]], report
    assert "unchanged rerun, growth fleet (15 stored runs)" in out, report
    assert "start-up: post-job-shaped empty flow, best of 3" in out, report
    assert "== post-job, local: against 10 stored runs" in out, report
    for row in ("one post-job", "2 one after another (total)", "2, 2 at a time (total)",
                "speed-up (one after another / at a time)"):
        assert row in out, (row, report)
    targets = out[out.index("targets ("):]
    for target in TARGETS:
        lines = [line for line in targets.splitlines() if target in line]
        assert len(lines) == 1, (target, report)
        assert lines[0].rstrip().endswith(("met", "NOT met")), (target, report)
