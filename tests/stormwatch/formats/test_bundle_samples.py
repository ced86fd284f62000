"""Bundle samples: the numpy path gives exactly the events of the sample-by-sample path."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from stormwatch.events.frame import frame_from_rows
from stormwatch.events.sessions import SessionStatus, SessionSummary
from stormwatch.formats.bundle_samples import _sample_rows, _vectorised, sample_events

GIB = 1 << 30


def make_summary(*, job_id: str | None = "job-1", rank: int = 2, world_size: int = 4) -> SessionSummary:
    return SessionSummary(
        session_id="diagnose-0", status=SessionStatus.COMPLETED, started_at_ns=1_700_000_000_000_000_000,
        ended_at_ns=None, host="diag-host", pid=777, job_id=job_id, rank=rank, local_rank=rank,
        world_size=world_size, source="stormlog.diagnose.timeline",
    )


def slow(stamps: list[Any], allocated: list[Any], reserved: list[Any], summary: SessionSummary) -> pd.DataFrame:
    rows, _ = _sample_rows(stamps, allocated, reserved, len(stamps), summary)
    return frame_from_rows(rows)


PLAIN = [
    ("float stamps", [1.7e9 + 0.5 * i for i in range(50)], [GIB + i * 4096 for i in range(50)],
     [2 * GIB - i for i in range(50)]),
    ("int stamps", [1_700_000_000 + i for i in range(20)], [i * 7 for i in range(20)], [i * 9 for i in range(20)]),
    ("bools count as ints", [1.0, 2.0, 3.0], [True, 5, False], [1, True, 2]),
    ("half-millisecond intervals round to even", [0.0, 0.0005, 0.0015, 0.0025, 0.0040], [1] * 5, [2] * 5),
    ("time going backwards", [10.0, 9.0, 11.0], [3, 2, 1], [3, 2, 1]),
    ("one sample", [1.7e9], [0], [0]),
]


@pytest.mark.parametrize(("name", "stamps", "allocated", "reserved"), PLAIN, ids=[case[0] for case in PLAIN])
@pytest.mark.parametrize("job_id", ["job-1", None])
def test_numpy_path_equals_sample_by_sample(name: str, stamps: list[Any], allocated: list[Any],
                                             reserved: list[Any], job_id: str | None) -> None:
    summary = make_summary(job_id=job_id)
    fast = _vectorised(stamps, allocated, reserved, summary)
    assert fast is not None, name
    pd.testing.assert_frame_equal(fast, slow(stamps, allocated, reserved, summary))


NOT_PLAIN = [
    ("a string sample", [1.0, "2.0", 3.0], [1, 2, 3], [1, 2, 3]),
    ("a None allocation", [1.0, 2.0, 3.0], [1, None, 3], [1, 2, 3]),
    ("a float allocation", [1.0, 2.0, 3.0], [1, 2.5, 3], [1, 2, 3]),
    ("nested lists", [[1.0], [2.0]], [1, 2], [1, 2]),
    ("negative allocation", [1.0, 2.0], [1, -2], [1, 2]),
    ("negative time", [-1.0, 2.0], [1, 2], [1, 2]),
    ("past 64 bits", [1.0, 2.0], [1, 1 << 70], [1, 2]),
    ("stamp past int64 ns", [1e10, 2e10], [1, 2], [1, 2]),
    ("nan stamp", [1.0, float("nan")], [1, 2], [1, 2]),
]


@pytest.mark.parametrize(("name", "stamps", "allocated", "reserved"), NOT_PLAIN, ids=[case[0] for case in NOT_PLAIN])
def test_other_samples_go_one_by_one_with_the_same_result(name: str, stamps: list[Any], allocated: list[Any],
                                                          reserved: list[Any]) -> None:
    summary = make_summary()
    assert _vectorised(stamps, allocated, reserved, summary) is None, name
    events, problems = sample_events(stamps, allocated, reserved, count=len(stamps), summary=summary)
    rows, expected = _sample_rows(stamps, allocated, reserved, len(stamps), summary)
    pd.testing.assert_frame_equal(events, frame_from_rows(rows))
    assert problems == expected
