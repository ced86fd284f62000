"""Regressions by job name: table-driven small histories, then a synthetic fleet with planted ones."""

from __future__ import annotations

import pytest

from stormwatch.history.frame import history_frame, in_window
from stormwatch.history.regressions import (
    RegressionMetric,
    RegressionStatus,
    RegressionThresholds,
    find_regressions,
)
from tests.stormwatch.history.synthetic import GIB, history_of, run_rows, synthetic_fleet

RESERVED = RegressionMetric.PEAK_RESERVED


def _series(values: list[float | None], **run: object) -> list[dict[str, object]]:
    """Runs train-0000, train-0001... of one job name on consecutive nights, peak reserved in GiB."""
    rows: list[dict[str, object]] = []
    for night, value in enumerate(values):
        peak = None if value is None else value * GIB
        rows += run_rows(f"train-{night:04d}", night=night, peak_reserved=peak, **run)  # type: ignore[arg-type]
    return rows


def _judged(values: list[float | None], **thresholds: float) -> dict[str, object]:
    found = [item for item in find_regressions(history_of(_series(values)), thresholds=RegressionThresholds(
        **thresholds)) if item.metric is RESERVED]  # type: ignore[arg-type]
    assert len(found) == 1
    return found[0].as_json()


@pytest.mark.parametrize(
    ("values", "status", "baseline_gib", "runs"),
    [
        ([10, 10, 12], "no_baseline", None, 2),                     # 2 earlier runs: no baseline yet
        ([10, 10, 10, 11.5], "regression", 10, 3),                  # +15%, MAD 0
        ([10, 10, 10, 10.9], "ok", 10, 3),                          # +9%: under 10%
        ([8, 10, 12, 10, 13.0], "ok", 10, 4),                       # +30% but within 3 MAD (MAD 1.5 GiB)
        ([8, 10, 12, 10, 14.6], "regression", 10, 4),               # more than 3 MAD above
        ([10, 10, 10, 9.0], "ok", 10, 3),                           # lower is never a regression
        ([50, 50, 10, 10, 10, 10, 10, 10, 10, 11.5], "regression", 10, 7),  # only the last 7 runs count
        ([10, None, 10, 10, 11.5], "regression", 10, 3),            # a run without a value is no baseline run
    ],
)
def test_status_against_the_median_of_earlier_runs(
    values: list[float | None], status: str, baseline_gib: float | None, runs: int
) -> None:
    row = _judged(values)
    assert row["status"] == status
    assert row["baseline_runs"] == runs
    assert row["baseline_bytes"] == (None if baseline_gib is None else int(baseline_gib * GIB))
    assert row["value_bytes"] == int(values[-1] * GIB)  # type: ignore[operator]
    assert row["earlier_bytes"] == [int(v * GIB) for v in values[:-1] if v is not None][-7:]


def test_change_pct_and_mad() -> None:
    row = _judged([10, 10, 10, 12.5])
    assert row["change_pct"] == pytest.approx(25.0)
    assert row["mad_bytes"] == 0


@pytest.mark.parametrize(
    ("thresholds", "status"),
    [({"min_runs": 4}, "no_baseline"), ({"min_change": 0.2}, "ok"), ({"runs": 3, "min_runs": 3}, "regression")],
)
def test_thresholds_are_parameters(thresholds: dict[str, float], status: str) -> None:
    assert _judged([10, 10, 10, 11.5], **thresholds)["status"] == status


def test_runs_of_another_world_size_or_job_name_are_no_baseline() -> None:
    rows = _series([10, 10, 10]) + run_rows("train-0003", night=3, world_size=4, peak_reserved=20 * GIB)
    rows += run_rows("other-0003", night=3, job_name="other", peak_reserved=20 * GIB)
    found = {item.job_id: item for item in find_regressions(history_of(rows)) if item.metric is RESERVED}
    assert set(found) == {"train-0003", "other-0003"}
    assert {item.status for item in found.values()} == {RegressionStatus.NO_BASELINE}


def test_a_job_without_a_value_gets_no_row_and_job_ids_choose_the_runs() -> None:
    rows = _series([10, 10, 10, None])
    assert [item.metric for item in find_regressions(history_of(rows))] == [RegressionMetric.HIDDEN_GAP_PEAK]
    chosen = find_regressions(history_of(rows), job_ids=["train-0001"])
    assert [(item.job_id, item.status) for item in chosen] == [("train-0001", RegressionStatus.NO_BASELINE)] * 2


def test_a_job_re_audited_counts_once_with_its_latest_peak() -> None:
    rows = _series([10, 10, 10, 10])
    rows += run_rows("train-0001", night=4, peak_reserved=30 * GIB)  # changed inputs: its new peak counts
    rows += run_rows("train-0005", night=5, peak_reserved=11.5 * GIB)
    found = [item for item in find_regressions(history_of(rows)) if item.metric is RESERVED]
    assert [(item.job_id, item.status, item.baseline_runs) for item in found] == [
        ("train-0005", RegressionStatus.REGRESSION, 4)
    ]
    assert found[0].earlier_bytes == (10 * GIB, 10 * GIB, 10 * GIB, 30 * GIB)  # run order: train-0001 last


def test_an_empty_history_has_no_regressions() -> None:
    assert find_regressions(history_of([])) == ()


@pytest.mark.parametrize("bad", [{"runs": 2, "min_runs": 3}, {"min_runs": 0}, {"min_change": -0.1}])
def test_impossible_thresholds_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RegressionThresholds(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_planted_regression_is_found_with_at_most_one_false_one(seed: int) -> None:
    fleet = synthetic_fleet(nights=30, jobs_per_night=40, seed=seed)
    found = find_regressions(history_frame(fleet.table()))

    flagged = {(item.job_id, item.metric) for item in found if item.status is RegressionStatus.REGRESSION}
    assert fleet.regressions <= flagged
    assert len(flagged - fleet.regressions) <= 1
    assert {item.job_id for item in found} == {f"name-{index:02d}-0029" for index in range(40)}
    assert {item.baseline_runs for item in found} == {7}


def test_replaying_an_earlier_night_sees_only_what_was_there() -> None:
    fleet = synthetic_fleet(nights=30, jobs_per_night=40, seed=0)
    history = in_window(history_frame(fleet.table()), as_of=fleet.audit_times[2], days=None)
    found = find_regressions(history)
    assert {item.status for item in found} == {RegressionStatus.NO_BASELINE}
    assert {item.baseline_runs for item in found} == {2}
