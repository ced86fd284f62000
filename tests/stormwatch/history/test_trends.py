"""Nightly trends for the fleet index."""

from __future__ import annotations

from datetime import date

import numpy as np

from stormwatch.history.frame import history_frame
from stormwatch.history.trends import nightly_trends
from tests.stormwatch.history.synthetic import GIB, history_of, run_rows, synthetic_fleet


def test_jobs_verdicts_and_p95_per_night() -> None:
    rows = run_rows("a-0000", night=0, verdict="critical", peak_reserved=10 * GIB)
    rows += run_rows("b-0000", night=0, verdict="clean", peak_reserved=20 * GIB)
    rows += run_rows("c-0000", night=0, verdict=None, peak_reserved=None)
    rows += run_rows("a-0000", night=0, verdict="warning", peak_reserved=12 * GIB,  # re-audited the same night
                     audit="audit-20261101T020000Z-ffffffff")
    rows += run_rows("a-0001", night=2, verdict="clean", peak_reserved=30 * GIB)

    trends = [trend.as_json() for trend in nightly_trends(history_of(rows))]

    assert trends == [
        {"night": "2026-11-01", "jobs": 3, "peak_reserved_p95_bytes": int(np.percentile([12 * GIB, 20 * GIB], 95)),
         "verdicts": {"clean": 1, "info": 0, "warning": 1, "critical": 0, "empty": 0, "unknown": 1}},
        {"night": "2026-11-03", "jobs": 1, "peak_reserved_p95_bytes": 30 * GIB,
         "verdicts": {"clean": 1, "info": 0, "warning": 0, "critical": 0, "empty": 0}},
    ]


def test_a_synthetic_month() -> None:
    fleet = synthetic_fleet(nights=30, jobs_per_night=40, seed=0)
    trends = nightly_trends(history_frame(fleet.table()))

    assert [trend.night for trend in trends] == [date(2026, 11, day) for day in range(1, 31)]
    assert {trend.jobs for trend in trends} == {40}
    assert all(sum(trend.verdicts.values()) == 40 for trend in trends)


def test_an_empty_history_has_no_nights() -> None:
    assert nightly_trends(history_of([])) == ()
