"""The worker's per-job judgement equals find_regressions over the whole history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from stormwatch.diagnose import diagnose
from stormwatch.history.frame import history_frame, job_runs
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.job_regression import judge_run, regression_summary
from stormwatch.history.regressions import RegressionStatus, RegressionThresholds, find_regressions
from stormwatch.history.rows import history_rows
from tests import builders as b


@pytest.mark.parametrize("levels_gib", [[1.0, 1.01, 0.99, 1.0, 1.6], [1.0, 1.0, 1.02], [1.0, 1.0, 1.0, 1.0, 1.01]])
def test_judge_run_equals_find_regressions(tmp_path: Path, levels_gib: list[float]) -> None:
    tables = []
    for night, level in enumerate(levels_gib):
        folder = tmp_path / f"run-{night}"
        b.write_multi_rank_job(folder, world_size=2, samples=lambda rank, level=level: b.ramp(
            4, base=int(level * b.GIB) + rank * 16 * b.MIB))
        job_id = f"train-x-{night:04d}"
        document = diagnose([folder], job_id=job_id, source_name=str(folder)).document
        when = datetime(2026, 11, 1, 2, tzinfo=UTC) + timedelta(days=night)
        tables.append(history_rows([document], job_names=JobNamePattern(), audit_time=when))
    own, earlier = tables[-1], pd.concat([history_frame(table) for table in tables[:-1]], ignore_index=True)
    job_id = own.column("job_id")[0].as_py()
    thresholds = RegressionThresholds()
    whole = pd.concat([earlier, history_frame(own)], ignore_index=True)
    expected = find_regressions(whole, job_ids=[job_id], thresholds=thresholds)
    assert judge_run(job_id, own, job_runs(earlier), thresholds=thresholds) == expected
    summary = regression_summary(job_id, own, job_runs(earlier), thresholds=thresholds)
    assert summary is not None and summary.job_name == "train-x" and summary.metrics == expected
    if levels_gib[-1] >= 1.5:
        assert summary.status is RegressionStatus.REGRESSION
    elif len(levels_gib) - 1 < thresholds.min_runs:
        assert summary.status is RegressionStatus.NO_BASELINE
    assert judge_run(job_id, own, None, thresholds=thresholds)[0].status.value == "no_baseline"
