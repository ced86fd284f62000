"""Verdicts, exit codes and ``--fail-on``: table-driven over built models."""

from __future__ import annotations

import dataclasses
import importlib.metadata
from datetime import UTC, datetime

import orjson
import pytest

import stormwatch
from stormwatch.analysis.model import AnomalyIndicator, DiagnosticsModel
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.load.tree import Entry
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.fleet import FleetRow, JobStatus, failed_row, fleet_document, rank_table, row_from_document
from stormwatch.outputs.model_json import input_fingerprint
from stormwatch.outputs.verdict import ExitCode, Verdict, VerdictStatus, decide_verdict, exit_code_for
from stormwatch.severity import FailOn, Severity
from tests.stormwatch.outputs.golden_jobs import expected


def make_indicator(*, kind: str = "most_severe", severity: str = "warning", rank: int = 0) -> AnomalyIndicator:
    return AnomalyIndicator(kind=kind, rank=rank, severity=severity, timestamp_ns=1, signal="alert:x", details="")


def make_model(*, severity: str | None = None, missing: tuple[int, ...] = ()) -> DiagnosticsModel:
    indicators = () if severity is None else (make_indicator(kind="earliest", severity=severity),
                                              make_indicator(severity=severity))
    expected = tuple(range(4))
    present = tuple(rank for rank in expected if rank not in missing)
    return DiagnosticsModel(rows=(), indicators=indicators, expected_ranks=expected, present_ranks=present,
                            missing_ranks=missing, per_rank_timelines={})


@pytest.mark.parametrize(
    ("severity", "missing", "fail_on", "status", "exit_code"),
    [
        (None, (), FailOn.NEVER, VerdictStatus.CLEAN, 0),
        (None, (), FailOn.WARNING, VerdictStatus.CLEAN, 0),
        ("info", (), FailOn.WARNING, VerdictStatus.INFO, 0),
        ("warning", (), FailOn.WARNING, VerdictStatus.WARNING, 3),
        ("warning", (), FailOn.CRITICAL, VerdictStatus.WARNING, 0),
        ("critical", (), FailOn.CRITICAL, VerdictStatus.CRITICAL, 3),
        ("critical", (), FailOn.NEVER, VerdictStatus.CRITICAL, 0),
        (None, (2,), FailOn.WARNING, VerdictStatus.WARNING, 3),  # a missing rank is a warning
        ("info", (1, 2), FailOn.CRITICAL, VerdictStatus.WARNING, 0),
        ("critical", (3,), FailOn.WARNING, VerdictStatus.CRITICAL, 3),
    ],
)
def test_verdict(severity, missing, fail_on, status, exit_code) -> None:
    verdict = decide_verdict(make_model(severity=severity, missing=missing), events=10, fail_on=fail_on)
    assert (verdict.status, verdict.exit_code) == (status, exit_code)
    assert verdict.summary.startswith(status.value)
    if missing:
        assert f"missing ranks {format_ranks(missing)}" in verdict.summary


def test_empty_job_is_exit_5_whatever_fail_on() -> None:
    for fail_on in FailOn:
        verdict = decide_verdict(make_model(), events=0, fail_on=fail_on)
        assert (verdict.status, verdict.exit_code) == (VerdictStatus.EMPTY, 5)


@pytest.mark.parametrize(("ranks", "text"), [((), ""), ((3,), "3"), ((0, 2, 4, 5, 6, 7), "0,2,4-7"),
                                             ((9, 1, 2), "1-2,9")])
def test_format_ranks(ranks, text) -> None:
    assert format_ranks(ranks) == text


def test_fail_on_thresholds() -> None:
    assert not FailOn.NEVER.reached_by(Severity.CRITICAL)
    assert FailOn.WARNING.reached_by(Severity.WARNING) and not FailOn.WARNING.reached_by(Severity.INFO)
    assert FailOn.CRITICAL.reached_by(Severity.CRITICAL) and not FailOn.CRITICAL.reached_by(Severity.WARNING)
    assert not FailOn.WARNING.reached_by(None)


def test_fingerprint_is_order_independent_and_sensitive() -> None:
    a, b = Entry("a.jsonl", 10, "etag-1"), Entry("b/c.jsonl", 20, "etag-2")
    assert input_fingerprint([a, b]) == input_fingerprint([b, a])
    assert input_fingerprint([a, b]) != input_fingerprint([a, Entry("b/c.jsonl", 20, "etag-3")])
    assert input_fingerprint([a]) != input_fingerprint([a, b])


@pytest.mark.parametrize(
    ("code", "value"),
    [(ExitCode.CLEAN, 0), (ExitCode.ERROR, 1), (ExitCode.USAGE, 2), (ExitCode.FINDINGS, 3),
     (ExitCode.NOTHING_LOADABLE, 5)],
)
def test_exit_codes_are_the_documented_ones(code, value) -> None:
    assert int(code) == value and code == value


def test_exit_codes_are_exactly_those() -> None:
    assert sorted(int(code) for code in ExitCode) == [0, 1, 2, 3, 5]


@pytest.mark.parametrize(
    ("status", "rank", "severity"),
    [(VerdictStatus.EMPTY, 0, None), (VerdictStatus.CLEAN, 1, None), (VerdictStatus.INFO, 2, Severity.INFO),
     (VerdictStatus.WARNING, 3, Severity.WARNING), (VerdictStatus.CRITICAL, 4, Severity.CRITICAL)],
)
def test_verdict_status_rank_and_severity(status, rank, severity) -> None:
    assert (status.rank, status.severity) == (rank, severity)
    if severity is not None:
        assert VerdictStatus.of(severity) is status
        assert status.value == severity.value  # a finding's verdict is spelled as its severity


def test_verdict_status_values_and_order() -> None:
    # definition order is fleet.json's summary order; the values are the model.json/fleet.json strings
    assert [status.value for status in VerdictStatus] == ["clean", "info", "warning", "critical", "empty"]
    assert VerdictStatus.of(None) is VerdictStatus.CLEAN


@pytest.mark.parametrize(
    ("statuses", "worst"),
    [
        ((), None),
        ((VerdictStatus.EMPTY,), VerdictStatus.EMPTY),
        ((VerdictStatus.EMPTY, VerdictStatus.CLEAN), VerdictStatus.CLEAN),
        ((VerdictStatus.INFO, VerdictStatus.CLEAN), VerdictStatus.INFO),
        ((VerdictStatus.WARNING, VerdictStatus.CRITICAL, VerdictStatus.INFO), VerdictStatus.CRITICAL),
        (tuple(VerdictStatus), VerdictStatus.CRITICAL),
    ],
)
def test_worst_verdict_status(statuses, worst) -> None:
    assert VerdictStatus.worst(statuses) is worst


@pytest.mark.parametrize(
    ("status", "fail_on", "code"),
    [
        ("empty", FailOn.NEVER, ExitCode.NOTHING_LOADABLE),
        (VerdictStatus.EMPTY, FailOn.WARNING, ExitCode.NOTHING_LOADABLE),
        ("clean", FailOn.WARNING, ExitCode.CLEAN),
        ("info", FailOn.WARNING, ExitCode.CLEAN),
        ("warning", FailOn.WARNING, ExitCode.FINDINGS),
        (VerdictStatus.WARNING, FailOn.CRITICAL, ExitCode.CLEAN),
        ("critical", FailOn.CRITICAL, ExitCode.FINDINGS),
        ("critical", FailOn.NEVER, ExitCode.CLEAN),
    ],
)
def test_exit_code_for_stored_status(status, fail_on, code) -> None:
    assert exit_code_for(status, fail_on) is code


def test_severity_is_defined_once() -> None:
    from stormwatch.analysis import markers

    assert markers.Severity is Severity and stormwatch.Severity is Severity


def test_engine_api_exports() -> None:
    from stormwatch import DiagnosticsModel as Exported
    from stormwatch import build_model

    assert Exported is DiagnosticsModel
    assert {"build_model", "DiagnosticsModel", "Severity"} <= set(stormwatch.__all__)
    assert callable(build_model)


def test_version_comes_from_package_metadata() -> None:
    from stormwatch.diagnose import DiagnoseOptions

    assert stormwatch.__version__ == importlib.metadata.version("stormwatch")
    assert DiagnoseOptions().recorded()["engine_version"] == stormwatch.__version__


@pytest.mark.parametrize("status", [*VerdictStatus, None])
def test_fleet_row_verdict_is_the_enum_and_serialises_as_its_value(status) -> None:
    value = None if status is None else status.value
    golden = JobDocument.from_json(expected("one-session/model.json"), name="one-session/model.json")
    if status is None:  # a job that failed has a row without a verdict
        row = failed_row("j", status=JobStatus.FAILED, error="OSError: gone")
    else:
        document = dataclasses.replace(golden, verdict=Verdict(status, ExitCode.CLEAN, f"{value}: test"))
        row = row_from_document(document, status=JobStatus.DIAGNOSED, report=None, exit_code=ExitCode.FINDINGS)
        assert type(row.exit_code) is int
    assert row.verdict is status
    data = row.as_json()
    assert data["verdict"] == value and type(data["verdict"]) is type(value)  # a plain str, not the enum
    assert FleetRow.from_json(orjson.loads(orjson.dumps(data))) == row
    summary = fleet_document([row], generated_at=datetime(2026, 1, 1, tzinfo=UTC), storage="s")["summary"]
    assert list(summary)[-5:] == ["clean", "info", "warning", "critical", "empty"]
    assert all(type(key) is str for key in summary)
    assert [summary[item.value] for item in VerdictStatus] == [int(item is status) for item in VerdictStatus]
    cells = rank_table([row])["verdict"].tolist()
    assert cells == [value] * 4 if status is not None else cells == []
