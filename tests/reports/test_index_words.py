"""The index's small words (issue 28): time into a job, shortened session ids, which first cause is
the reason, and where a rank ran."""

from __future__ import annotations

from typing import Any

import pytest

from stormwatch.reports.fleetcause import device_text, verdict_causes
from stormwatch.reports.formatting import format_elapsed_s, short_id
from tests.reports.attention_builders import placed


@pytest.mark.parametrize(("seconds", "text"), [
    (0.04, "0.0 s"), (20.05, "20.1 s"), (59.94, "59.9 s"), (59.96, "1 min 00 s"), (184.4, "3 min 04 s"),
    (7384.0, "2 h 03 min"), (-3.0, "-3.0 s"), (None, "—"), (float("nan"), "—"),
])
def test_format_elapsed_s(seconds: float | None, text: str) -> None:
    assert format_elapsed_s(seconds) == text


@pytest.mark.parametrize(("session_id", "short"), [
    ("legacy-10513d62-958b-5ca2-b529-fe56456eecfd", "legacy-10513d62…"),
    ("3f2a9c1e-0000-4000-8000-000000000000", "3f2a9c1e…"),
    ("oom-rank0", "oom-rank0"), ("abcdefghi", "abcdefghi"), ("abcdefghij", "abcdefgh…"), ("legacy-", "legacy-"),
])
def test_short_id(session_id: str, short: str) -> None:
    assert short_id(session_id) == short


@pytest.mark.parametrize(("device_id", "text"), [(3, "GPU 3"), (0, "GPU 0"), (-1, "CPU"), (None, None)])
def test_device_text(device_id: int | None, text: str | None) -> None:
    assert device_text(device_id) == text


BREACH = placed(signal="gap_ratio_breach", severity="warning", since_s=6.0)
DRIFT = placed(signal="gap:persistent_drift", severity="critical", since_s=20.0)
OOM = placed(signal="alert:error", severity="critical", oom=True, since_s=30.0)


@pytest.mark.parametrize(("earliest", "most_severe", "shown", "other"), [
    (BREACH, DRIFT, "gap:persistent_drift", "gap_ratio_breach"),  # the verdict's severity, not the first warning
    (DRIFT, DRIFT, "gap:persistent_drift", None),  # one cause
    (DRIFT, OOM, "alert:error", "gap:persistent_drift"),  # an OOM is the reason whenever it is a first cause
    (BREACH, None, "gap_ratio_breach", None),
    (None, None, None, None),
    ("x", {"signal": 5}, "5", None),  # malformed: read as far as it goes
])
def test_the_cause_that_made_the_verdict(earliest: Any, most_severe: Any, shown: str | None,
                                         other: str | None) -> None:
    cause, second = verdict_causes({"earliest": earliest, "most_severe": most_severe})
    assert (None if cause is None else cause.signal.code) == shown
    assert (None if second is None else second.signal.code) == other
