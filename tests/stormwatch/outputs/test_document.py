"""JobDocument: model.json read back exactly, damage named by file and member, documents written
before later members existed still read (with the defaults their readers always took)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson
import pytest

from stormwatch.history.regressions import RegressionStatus
from stormwatch.outputs.document import DocumentError, JobDocument
from stormwatch.outputs.fleet import JobStatus, row_from_document
from stormwatch.outputs.recorded_options import RecordedOptions
from stormwatch.reports.render import render_job
from tests.reports.builders import large_document
from tests.stormwatch.outputs.golden_jobs import expected

NAME = "reports/a/model.json"
ONE_SESSION = "one-session/model.json"
RESTARTED = "restarted/model.json"
CUT_SHORT = "cut-short/model.json"
REGRESSION = "regression/model.json"


def data_of(golden: str) -> dict[str, Any]:
    """A golden model.json as parsed JSON, to damage."""
    parsed: dict[str, Any] = orjson.loads(expected(golden))
    return parsed


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        target: Any = data
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
    return edit


def _drop(*path: str | int) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        target: Any = data
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]
    return edit


def _error(data: bytes) -> DocumentError:
    with pytest.raises(DocumentError) as caught:
        JobDocument.from_json(data, name=NAME)
    return caught.value


def test_the_message_names_the_file_and_the_member() -> None:
    data = data_of(ONE_SESSION)
    data["verdict"]["status"] = "bogus"
    error = _error(orjson.dumps(data))
    assert str(error) == 'reports/a/model.json: member "verdict.status": "bogus" is not a verdict status'
    assert (error.name, error.member, error.problem) == (NAME, "verdict.status", '"bogus" is not a verdict status')
    assert isinstance(error, ValueError)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (expected(ONE_SESSION)[:-200], "not JSON ("),
        (b"", "not JSON ("),
        (b"[1, 2]", "[1,2] is not a JSON object"),
        (b'"model"', '"model" is not a JSON object'),
    ],
)
def test_bytes_that_are_no_document(data: bytes, problem: str) -> None:
    error = _error(data)
    assert error.member is None and error.problem.startswith(problem) and str(error).startswith(f"{NAME}: ")


@pytest.mark.parametrize(
    ("golden", "edit", "member", "problem"),
    [
        (ONE_SESSION, _set(("schema_version",), 2), "schema_version",
         "2 is not 1 (the schema version this stormwatch reads)"),
        (ONE_SESSION, _drop("schema_version"), "schema_version", "missing"),
        (ONE_SESSION, _drop("job_id"), "job_id", "missing"),
        (ONE_SESSION, _set(("job_id",), 7), "job_id", "7 is not a string"),
        (ONE_SESSION, _set(("generated_at",), "yesterday"), "generated_at", '"yesterday" is not an ISO 8601 time'),
        (ONE_SESSION, _set(("options",), ["all"]), "options", '["all"] is not an object'),
        (ONE_SESSION, _set(("options", "ranks"), [0, 1]), "options.ranks", "[0,1] is not an option value"),
        (ONE_SESSION, _set(("sessions",), "all"), "sessions", '"all" is not an array'),
        (ONE_SESSION, _set(("sessions", 1, "status"), "paused"), "sessions[1].status",
         '"paused" is not a session status'),
        (ONE_SESSION, _set(("sessions", 0, "started_at_ns"), "soon"), "sessions[0].started_at_ns",
         '"soon" is not an integer'),
        (ONE_SESSION, _set(("sources_loaded", 2), None), "sources_loaded[2]", "null is not a string"),
        (ONE_SESSION, _set(("verdict", "exit_code"), 7), "verdict.exit_code", "7 is not an exit code"),
        (ONE_SESSION, _set(("verdict", "exit_code"), True), "verdict.exit_code", "true is not an integer"),
        (ONE_SESSION, _drop("model"), "model", "missing"),
        (ONE_SESSION, _set(("model", "rows", 2, "samples"), "twelve"), "model.rows[2].samples",
         '"twelve" is not an integer'),
        (ONE_SESSION, _set(("model", "rows", 0, "has_anomaly"), 1), "model.rows[0].has_anomaly",
         "1 is not true or false"),
        (ONE_SESSION, _set(("model", "indicators", 0, "kind"), "first"), "model.indicators[0].kind",
         '"first" is not an indicator kind'),
        (ONE_SESSION, _set(("model", "indicators", 1, "confidence"), "high"), "model.indicators[1].confidence",
         '"high" is not a number or null'),
        (ONE_SESSION, _set(("model", "expected_ranks", 1), 1.5), "model.expected_ranks[1]", "1.5 is not an integer"),
        (ONE_SESSION, _set(("model", "per_rank_timelines", "x"), {}), "model.per_rank_timelines.x",
         '"x" is not a rank'),
        (ONE_SESSION, _set(("model", "per_rank_timelines", "0", "allocated", 3), "x"),
         "model.per_rank_timelines.0.allocated[3]", '"x" is not a 64-bit integer or null'),
        (ONE_SESSION, _set(("model", "per_rank_timelines", "1", "gap", 0), 2.5),
         "model.per_rank_timelines.1.gap[0]", "2.5 is not a 64-bit integer or null"),
        (ONE_SESSION, _set(("model", "per_rank_timelines", "3", "reserved"), 5), "model.per_rank_timelines.3.reserved",
         "5 is not an array"),
        (ONE_SESSION, _set(("model", "markers_by_rank", "0", 0, "start_ns"), None),
         "model.markers_by_rank.0[0].start_ns", "null is not an integer"),
        (ONE_SESSION, _set(("model", "markers_by_rank", "1", 2, "metadata"), "x"),
         "model.markers_by_rank.1[2].metadata", '"x" is not an object'),
        (ONE_SESSION, _set(("fleet", "ranks", 1, "host"), 5), "fleet.ranks[1].host", "5 is not a string or null"),
        (ONE_SESSION, _set(("fleet", "coverage", "schema_versions"), {"v3": 20}), "fleet.coverage.schema_versions.v3",
         '"v3" is not a schema version'),
        (ONE_SESSION, _set(("fleet", "coverage", "collectors", "stormlog.cuda_tracker"), "many"),
         "fleet.coverage.collectors.stormlog.cuda_tracker", '"many" is not an integer'),
        (ONE_SESSION, _drop("fleet", "coverage"), "fleet.coverage", "missing"),
        (CUT_SHORT, _set(("cut_short", 0, "dropped_bytes"), "317"), "cut_short[0].dropped_bytes",
         '"317" is not an integer'),
        (CUT_SHORT, _set(("cut_short", 0, "at_s"), True), "cut_short[0].at_s", "true is not a number or null"),
        (RESTARTED, _set(("attempts", 0, "status"), "paused"), "attempts[0].status",
         '"paused" is not an attempt status'),
        (RESTARTED, _set(("attempts", 0, "most_severe", "kind"), "worst"), "attempts[0].most_severe.kind",
         '"worst" is not an indicator kind'),
        (RESTARTED, _set(("attempts", 1, "ranks", 2, "outlier"), "no"), "attempts[1].ranks[2].outlier",
         '"no" is not true, false or null'),
        (RESTARTED, _drop("session_count"), "session_count",
         "missing (a job document has attempts, session_count, sessions_diagnosed, worst_session)"),
        (REGRESSION, _set(("fleet", "regression", "status"), "worse"), "fleet.regression.status",
         '"worse" is not a regression status'),
        (REGRESSION, _set(("fleet", "regression", "metrics", 1, "earlier_bytes", 0), "a"),
         "fleet.regression.metrics[1].earlier_bytes[0]", '"a" is not an integer'),
    ],
)
def test_each_damaged_member_is_named(golden: str, edit: Callable[[dict[str, Any]], None], member: str,
                                      problem: str) -> None:
    data = data_of(golden)
    edit(data)
    error = _error(orjson.dumps(data))
    assert (error.member, error.problem) == (member, problem)
    assert str(error) == f'{NAME}: member "{member}": {problem}'


@pytest.mark.parametrize("golden", [ONE_SESSION, RESTARTED, CUT_SHORT, REGRESSION, "hostile/model.json"])
def test_a_read_document_writes_its_bytes_and_parses_like_them(golden: str) -> None:
    document = JobDocument.from_json(expected(golden), name=golden)
    assert document.to_json() == expected(golden)
    parsed = document.parsed()
    timelines = parsed["model"]["per_rank_timelines"]
    assert all(isinstance(series, np.ndarray) for timeline in timelines.values() for series in timeline.values())
    parsed["model"]["per_rank_timelines"] = {rank: {name: series.tolist() for name, series in timeline.items()}
                                             for rank, timeline in timelines.items()}
    assert parsed == orjson.loads(expected(golden))


def test_documents_are_frozen_and_change_by_replacement() -> None:
    document = JobDocument.from_json(expected(REGRESSION), name=REGRESSION)
    with pytest.raises(AttributeError):
        document.job_id = "other"  # type: ignore[misc]
    later = document.with_generated_at(datetime(2027, 1, 1, tzinfo=UTC))
    assert later.generated_at.year == 2027 and document.generated_at.year == 2026
    assert document.fleet is not None and document.fleet.regression is not None
    assert document.fleet.regression.status is RegressionStatus.REGRESSION
    cleared = document.with_regression(None)
    assert cleared.fleet is not None and cleared.fleet.regression is None
    assert orjson.loads(cleared.to_json())["fleet"]["regression"] is None
    assert document.fleet.regression is not None  # unchanged
    without_fleet = JobDocument.from_data({**data_of(ONE_SESSION), "fleet": None}, name="x")
    assert without_fleet.with_regression(document.fleet.regression) == without_fleet


def test_options_compare_whole_with_the_options_an_audit_runs_with() -> None:
    document = JobDocument.from_json(expected(RESTARTED), name=RESTARTED)
    recorded = orjson.loads(expected(RESTARTED))["options"]
    assert isinstance(document.options, RecordedOptions) and document.options == recorded
    assert dict(document.options) == recorded and document.options["all_sessions"] is True
    assert document.options != {**recorded, "max_events": 5} and document.options != {**recorded, "unknown": 1}


def _earlier(golden: str, *names: str) -> bytes:
    """A golden model.json as an earlier stormwatch wrote it: without ``names`` (dotted paths)."""
    data = data_of(golden)
    for name in names:
        *parents, last = name.split(".")
        target: Any = data
        for step in parents:
            target = target[int(step)] if isinstance(target, list) else target[step]
        if isinstance(target, list):
            for item in target:
                item.pop(last, None)
        else:
            target.pop(last, None)
    return orjson.dumps(data)


def test_a_document_written_before_the_later_members_reads_with_their_defaults() -> None:
    old = _earlier(RESTARTED, "cut_short", "attempts", "session_count", "sessions_diagnosed", "worst_session",
                   "fleet", "options", "selected_session_id", "model.warnings", "model.markers_by_rank",
                   "sessions.source", "sessions.events", "sessions.world_size")
    document = JobDocument.from_json(old, name="old/model.json")
    assert (document.cut_short, document.attempts, document.session_count, document.worst_session) == ((), None, None,
                                                                                                       None)
    assert (document.fleet, document.options, document.selected_session_id) == (None, None, None)
    assert document.model.warnings == () and document.model.markers_by_rank == {}
    assert {(s.source, s.event_count, s.world_size) for s in document.sessions} == {("stormlog.session", 0, 1)}
    row = row_from_document(document, status=JobStatus.SKIPPED, report="old/report.html")
    assert (row.outlier_ranks, row.coverage, row.session_count, row.cut_short, row.options) == ((), None, None, (),
                                                                                                None)
    assert all(rank["outlier"] is None and rank["host"] is None for rank in row.rank_rows)
    assert "<!doctype html>" in render_job(document)


def test_coverage_before_abrupt_ends_were_counted_reads_as_none() -> None:
    old = _earlier(CUT_SHORT, "fleet.coverage.ended_abruptly", "fleet.coverage.ended_abruptly_ranks")
    document = JobDocument.from_json(old, name="old/model.json")
    assert document.fleet is not None
    assert (document.fleet.facts.coverage.ended_abruptly, document.fleet.facts.coverage.ended_abruptly_ranks) == (0, ())


def test_an_attempt_written_before_its_session_status_was_kept_takes_its_status() -> None:
    document = JobDocument.from_json(_earlier(RESTARTED, "attempts.session_status"), name="old/model.json")
    assert [str(entry.attempt.session_status) for entry in document.attempts or ()] == ["interrupted", "completed"]


def test_a_hand_written_early_document_reads() -> None:
    """The report tests' large document: no options, cut_short, fleet or job-level members."""
    data = large_document(ranks=2, samples=50)
    document = JobDocument.from_json(orjson.dumps(data), name="big-job/model.json")
    assert document.job_id == "big-job" and document.options is None and document.fleet is None
    assert document.model.per_rank_timelines[1]["gap"].dtype == np.int64
    assert len(document.model.markers_by_rank[0]) == 102


def test_v4_timelines_keep_their_nulls() -> None:
    data = data_of(ONE_SESSION)
    data["model"]["per_rank_timelines"]["0"]["allocated"][1] = None
    document = JobDocument.from_data(copy.deepcopy(data), name=NAME)
    series = document.model.per_rank_timelines[0]["allocated"]
    assert series.dtype == object and series[1] is None and isinstance(series[0], int)
    assert orjson.loads(document.to_json()) == data


def test_a_half_job_document_is_refused_when_built() -> None:
    document = JobDocument.from_json(expected(RESTARTED), name=RESTARTED)
    with pytest.raises(ValueError, match="set together"):
        dataclasses.replace(document, session_count=None)
