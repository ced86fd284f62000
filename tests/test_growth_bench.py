"""bench/growth_bench.py's smallest form: it must run through (exit 0) and print each section and
every target with its verdict; whether the targets are met is the full bench's business."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = ("false leaks over 4 clean jobs", "planted 1 %/h flagged", "planted 5 %/h flagged", "projection error",
           "cost per job")


def test_the_growth_bench_smallest_form_runs_through() -> None:
    command = [sys.executable, str(REPO / "bench" / "growth_bench.py"), "--short", "--clean-jobs", "4",
               "--leak-jobs", "2", "--ranks", "4", "--cost-samples", "400", "--cost-repeat", "1"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    out, report = done.stdout, done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    for section in ("== false leaks: 4 clean jobs x 4 ranks", "== detection: 2 jobs x 4 ranks per planted rate",
                    "== cost per job", "== capacity warnings over run series"):
        assert section in out, (section, report)
    rates = [line.split()[0] for line in out.splitlines() if line.strip()[:4] in {"0.25", "0.50", "1.00", "5.00"}]
    assert rates == ["0.25", "0.50", "1.00", "5.00"], report
    targets = out[out.index("targets ("):]
    for target in TARGETS:
        lines = [line for line in targets.splitlines() if target in line]
        assert len(lines) == 1 and lines[0].rstrip().endswith(("met", "UNMET")), (target, report)
