"""fleet.json rows place their first causes (issue 28): OOM or not, host and device, time into the run,
and what an OOM dump says; older rows without these members still read."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.fleet import FleetRow, JobStatus, row_from_document
from stormwatch.outputs.fleet_causes import INDICATOR_FIELDS, PLACE_FIELDS
from tests.stormwatch.outputs.golden_jobs import expected

DUMP = {"folder": "rank_3/oom_dump_x", "rank": 3, "session_id": None, "backend": "cuda",
        "exception_type": "OutOfMemoryError", "message": "CUDA out of memory.", "context": None,
        "requested_bytes": 2 * 1024**3, "free_bytes": 1181116006, "total_bytes": 80 * 1024**3}


def _row(name: str, **changes: Any) -> FleetRow:
    data = orjson.loads(expected(f"{name}/model.json"))
    data.update(changes)
    document = JobDocument.from_data(data, name=f"{name}/model.json")
    return row_from_document(document, status=JobStatus.DIAGNOSED, report=f"{name}/report.html")


@pytest.mark.parametrize(("name", "kind", "expected_cause"), [
    # one session: placed by its fleet facts, timed from the selected session's start
    ("one-session", "earliest", {"rank": 0, "signal": "alert:warning", "severity": "warning", "oom": False,
                                 "host": "node-0", "device_id": 0, "since_start_ns": 2_000_000_000,
                                 "phase_path": "(likely) train / backward", "oom_dump": None}),
    ("one-session", "most_severe", {"rank": 0, "signal": "alert:critical", "oom": False,
                                    "since_start_ns": 3_500_000_000, "phase_path": "train"}),
    # a restarted job: the worst attempt's OOM, placed by that attempt's ranks, timed from its start
    ("restarted", "earliest", {"rank": 3, "signal": "alert:error", "severity": "critical", "oom": True,
                               "host": "node-1", "device_id": 1, "since_start_ns": 3_000_000_000, "oom_dump": None}),
])
def test_causes_say_where_and_when(name: str, kind: str, expected_cause: dict[str, Any]) -> None:
    cause = getattr(_row(name), kind)
    assert set(cause) == {*INDICATOR_FIELDS, *PLACE_FIELDS}
    assert {key: cause[key] for key in expected_cause} == expected_cause


def test_an_oom_cause_carries_its_dumps_sentence() -> None:
    cause = _row("restarted", oom_dumps=[DUMP]).earliest
    assert cause is not None and cause["oom"] is True
    assert cause["oom_dump"] == "out of memory on rank 3: tried to allocate 2.0 GiB with 1.1 GiB free of 80 GiB"
    other_rank = _row("restarted", oom_dumps=[{**DUMP, "rank": 0}]).earliest
    assert other_rank is not None and other_rank["oom_dump"] is None  # another rank's dump says nothing of this one


def test_rows_round_trip_and_older_rows_still_read() -> None:
    row = _row("restarted")
    data = orjson.loads(orjson.dumps(row.as_json()))
    assert FleetRow.from_json(data) == row
    older = {**data, "earliest": {key: data["earliest"][key] for key in INDICATOR_FIELDS}, "most_severe": None}
    assert FleetRow.from_json(older).earliest == older["earliest"]  # a row written before causes were placed
