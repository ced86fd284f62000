"""bench/kill_bench.py's short form, as CI runs it: five audits killed over a five-night run on local
storage (a random time, after a batch's commit, after the alert claim, before and after the ledger
write), each rerun at once, scored against the same nights run with no kill; every target met."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_kill_bench_short_form_meets_every_target(prefect_api: str, tmp_path: Path) -> None:
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "kill_bench.py"), "--short", "--keep", str(tmp_path)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    report = done.stdout[-8000:] + done.stderr[-4000:]
    assert "targets (every scenario, every storage):" in done.stdout, report
    assert done.returncode == 0, report
