"""Every regression names the rank that set its value and where it ran; fleet.json written before reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

from stormwatch.history.frame import job_runs
from stormwatch.history.job_regression import judge_run
from stormwatch.history.regressions import (
    Regression,
    RegressionMetric,
    RegressionStatus,
    RegressionThresholds,
    find_regressions,
)
from stormwatch.history.schema import HISTORY_SCHEMA, HISTORY_SCHEMA_VERSION
from stormwatch.outputs.json_members import Members
from tests.stormwatch.history.synthetic import GIB, history_of, run_rows


def _latest(reserved_by_rank: dict[int, float], *, hosts: tuple[str, ...]) -> list[dict[str, object]]:
    rows = run_rows("llama-0004", night=4, world_size=16, hosts=hosts)
    for row in rows:
        row["peak_reserved_bytes"] = int(reserved_by_rank.get(int(str(row["rank"])), 10 * GIB))
    return rows


CASES = [
    ("one rank above the others", {11: 14 * GIB}, ("node-a", "node-b"), (11, "node-b", 3)),
    ("a tie: the lowest rank", {12: 14 * GIB, 3: 14 * GIB}, ("node-a", "node-b"), (3, "node-a", 3)),
    ("rank 0, first host", {0: 14 * GIB}, ("node-a", "node-b"), (0, "node-a", 0)),
]


@pytest.mark.parametrize(("case", "reserved", "hosts", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_rank_that_set_the_value_is_recorded(case: str, reserved: dict[int, float], hosts: tuple[str, ...],
                                                 expected: tuple[int, str, int]) -> None:
    earlier = [row for night in range(4) for row in run_rows(f"llama-{night:04d}", night=night, world_size=16,
                                                              hosts=hosts)]
    history = history_of(earlier + _latest(reserved, hosts=hosts))
    found = {item.metric: item for item in find_regressions(history, job_ids=["llama-0004"])}
    reserved_item = found[RegressionMetric.PEAK_RESERVED]
    assert reserved_item.status is RegressionStatus.REGRESSION
    assert (reserved_item.rank, reserved_item.host, reserved_item.device_id) == expected, case
    assert not reserved_item.explained_by_suspect
    rank, host, device = expected
    assert reserved_item.carrier_text == f"set by rank {rank} on {host} GPU {device}"
    # the worker's judgement of the same run names the same rank
    own = pa.Table.from_pylist([{**{field.name: None for field in HISTORY_SCHEMA}, **row,
                                 "schema_version": HISTORY_SCHEMA_VERSION} for row in _latest(reserved, hosts=hosts)],
                               schema=HISTORY_SCHEMA)
    judged = {item.metric: item for item in judge_run("llama-0004", own, job_runs(history_of(earlier)),
                                                       thresholds=RegressionThresholds())}
    assert judged == found


def test_fleet_json_written_before_the_carrier_reads_with_none() -> None:
    old = {"job_id": "llama-0004", "job_name": "llama", "world_size": 2, "metric": "peak_reserved_bytes",
           "value_bytes": 3 << 30, "baseline_bytes": 2 << 30, "change_pct": 50.0, "baseline_runs": 7,
           "status": "regression", "mad_bytes": 0, "earlier_bytes": [2 << 30] * 7}
    item = Regression.from_json(Members(old))
    assert (item.rank, item.host, item.device_id, item.explained_by_suspect) == (None, None, None, False)
    assert item.carrier_text is None
    assert Regression.from_json(Members(item.as_json())) == item
