"""A leak owns the regression it causes: a run whose peak reserved regressed because one of its ranks
leaked gets one alert (the leak's, with the regression folded into its message), not two; a
regression another rank set, or one of the hidden gap, stays the job's own."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from stormwatch.alerting.findings import IndicatorFact, JobFinding
from stormwatch.alerting.fleet_findings import fleet_findings
from stormwatch.alerting.inhibition import inhibit
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.leak_findings import leak_signal
from stormwatch.history.regressions import Regression, RegressionMetric, RegressionThresholds
from stormwatch.history.sections import compare_fleet
from stormwatch.history.suspects import SuspectThresholds
from stormwatch.outputs.json_members import Members
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import book_of
from tests.stormwatch.history.device_scenario import NIGHTS, night_time, scenario_history

JOB = f"train-a-{NIGHTS - 1:04d}"  # never on the bad host on the last night


def history(*, leaking_rank: int | None, raised_rank: int = 4, column: str = "peak_reserved_bytes") -> pd.DataFrame:
    """The scenario with the last run of train-a's ``raised_rank`` at 1.5x ``column``, ``leaking_rank`` leaking."""
    frame = scenario_history().copy()
    frame["leak"] = False
    run = frame["job_id"].astype(object) == JOB
    raised = run & (frame["rank"] == raised_rank)
    frame.loc[raised, column] = (frame.loc[raised, column] * 1.5).astype(frame[column].dtype)
    if leaking_rank is not None:
        frame.loc[run & (frame["rank"] == leaking_rank), "leak"] = True
    return frame


def regressions_of(frame: pd.DataFrame) -> list[dict[str, object]]:
    found = compare_fleet(frame, as_of=night_time(NIGHTS - 1), trend_days=30, regression=RegressionThresholds(),
                          suspects=SuspectThresholds()).as_json()["regressions"]
    return [item for item in found if item["job_id"] == JOB]


CASES = [  # (case, leaking rank, metric raised, explained by the leak)
    ("the leaking rank set the peak", 4, "peak_reserved_bytes", True),
    ("another rank leaked", 6, "peak_reserved_bytes", False),
    ("no leak", None, "peak_reserved_bytes", False),
    ("a hidden-gap regression is not a leak's", 4, "hidden_gap_peak_bytes", False),
]


@pytest.mark.parametrize(("case", "leaking", "column", "by_leak"), CASES, ids=[c[0] for c in CASES])
def test_a_regression_set_by_a_leaking_rank_is_the_leak_s(case: str, leaking: int | None, column: str,
                                                           by_leak: bool) -> None:
    (item,) = regressions_of(history(leaking_rank=leaking, column=column))
    assert (item["metric"], item["rank"], item["explained_by_leak"]) == (column, 4, by_leak), case
    if by_leak:
        assert "explained by the leak on rank 4" in str(fleet_findings(
            {"regressions": [item]}, index_url=None, report_url_of=lambda job_id: None)[0].summary)


def leak_finding(rank: int) -> JobFinding:
    fact = IndicatorFact(kind=AlertKind.LEAK.value, rank=rank, severity=Severity.WARNING, signal=leak_signal(rank),
                         timestamp_ns=0, phase_path=None, details=f"rank {rank} grows 4 GiB/h", since_start_ns=None)
    return JobFinding(job_id=JOB, verdict="clean", summary="", indicators=(), missing_ranks=(), expected_ranks=8,
                      started_at_ns=None, report_url=None, leaks=(fact,))


@pytest.mark.parametrize(("leaking", "inhibited"), [(4, True), (6, False)])
def test_the_leak_s_alert_inhibits_the_regression_of_its_rank(leaking: int, inhibited: bool) -> None:
    (item,) = regressions_of(history(leaking_rank=4))  # the regression is the leak's (rank 4)
    item = {**item, "explained_by_leak": leaking == 4}
    found = [*fleet_findings({"regressions": [item]}, index_url=None, report_url_of=lambda job_id: None),
             leak_finding(leaking)]
    book = book_of(*found)
    (regression,) = [key for key in book.records if key.kind is AlertKind.REGRESSION]
    (leak,) = [key for key in book.records if key.kind is AlertKind.LEAK]
    assert inhibit(book.records).by.get(regression) == (leak if inhibited else None)


def test_fleet_json_written_before_leaks_reads_unexplained() -> None:
    (item,) = regressions_of(history(leaking_rank=None))
    old = {key: value for key, value in item.items() if key != "explained_by_leak"}
    parsed = Regression.from_json(Members(old, "regressions[0]"))
    assert parsed.metric is RegressionMetric.PEAK_RESERVED and not parsed.explained_by_leak
    assert replace(parsed, explained_by_leak=True).carrier_text == "explained by the leak on rank 4"
