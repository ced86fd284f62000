"""A file that ends mid-record is named in the job's document (top-level ``warnings`` and
``cut_short``), in coverage (``ended_abruptly``) and in the fleet row; ``model`` stays the reference's."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import diagnose_job
from stormwatch.history.sections import fleet_coverage
from stormwatch.load.cut_short import CutShortFile
from stormwatch.outputs.cut_short import cut_short_sentence
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.fleet import FleetRow, JobStatus, fleet_document, row_from_document
from tests import builders as b
from tests.cut_short_builders import killed_sink_job, snapshot, torn_jsonl_job
from tests.reference_model import canonical_model, model_differences, reference_model

SENTENCE = "rank 1: rank_1/events.jsonl ends mid-record {at:.1f} s into the job; the writer stopped abruptly"


def _diagnose(root: Path, *, all_sessions: bool) -> dict[str, Any]:
    """The job's model.json as written (through JSON)."""
    job = diagnose_job([root], job_id="job", source_name=str(root), options=DiagnoseOptions(all_sessions=all_sessions))
    return orjson.loads(job.document.to_json())


def _row(document: dict[str, Any], *, report: str | None) -> FleetRow:
    return row_from_document(JobDocument.from_data(document, name="job/model.json"), status=JobStatus.DIAGNOSED,
                             report=report)


@pytest.mark.parametrize("all_sessions", [False, True])
def test_the_document_names_the_cut_and_the_model_stays_the_reference(tmp_path: Path, all_sessions: bool) -> None:
    root = tmp_path / "job"
    paths, torn = torn_jsonl_job(root)
    before = snapshot(root)
    document = _diagnose(root, all_sessions=all_sessions)

    at_s = (torn.last_event_ns - b.START_NS) / 1e9
    assert document["warnings"] == [SENTENCE.format(at=at_s)]
    assert document["cut_short"] == [{
        "rank": 1, "file": "rank_1/events.jsonl", "source": str(paths[1]), "session_id": "job-1-rank1",
        "session_group": document["selected_session_id"], "at_s": round(at_s, 3),
        "last_event_ns": torn.last_event_ns, "dropped_bytes": torn.partial_bytes}]
    coverage = document["fleet"]["coverage"]  # the cut took rank 1's stop event with it
    assert (coverage["ended_abruptly_ranks"], coverage["session_ids_without_stop"]) == ([1], ["job-1-rank1"])
    assert document["model"]["warnings"] == []
    differences = model_differences(canonical_model(reference_model(paths)), canonical_model(document["model"]))
    assert not differences, "\n".join(differences)
    assert snapshot(root) == before


def test_a_killed_writer_is_a_rank_that_ended_abruptly(tmp_path: Path) -> None:
    root = tmp_path / "job"
    _, torn = killed_sink_job(root, world_size=4, torn_rank=2)
    document = _diagnose(root, all_sessions=True)
    coverage = document["fleet"]["coverage"]
    assert (coverage["ended_abruptly"], coverage["ended_abruptly_ranks"]) == (1, [2])
    assert coverage["sessions_without_stop"] == 4  # every writer died; only rank 2's file was torn mid-record
    (cut,) = document["cut_short"]
    assert cut["rank"] == 2 and cut["file"].startswith("rank_2/attempt-1/segment-")
    assert document["warnings"] == [
        f"rank 2: {cut['file']} ends mid-record {(torn.last_event_ns - b.START_NS) / 1e9:.1f} s into the job; "
        "the writer stopped abruptly"]


def test_an_earlier_attempt_cut_short_is_named_by_its_session(tmp_path: Path) -> None:
    """An OOM-killed first attempt, its writer cut off mid-record, then a clean restart: the job's
    document (the restart's) names the cut in the attempt's session; that session's own says "job"."""
    root = tmp_path / "job"
    _, torn = killed_sink_job(root, world_size=2, torn_rank=1, oom=True)
    b.write_attempt(root, job_id="run-2", world_size=2, attempt="attempt-2", start_ns=b.START_NS + 60 * 10**9)
    job = diagnose_job([root], job_id="job", source_name="x", options=DiagnoseOptions(all_sessions=True))
    first, second = job.attempts
    assert second.default and job.document.selected_session_id == second.session_id
    (cut,) = job.document.cut_short
    assert cut.session_group == first.session_id and cut.session_id == "run-1-rank1"
    at = f"{(torn.last_event_ns - b.START_NS) / 1e9:.1f}"
    assert f"rank 1: {cut.file} ends mid-record {at} s into session {first.session_id}; " \
           "the writer stopped abruptly" in job.document.warnings
    assert job.document.fleet is not None and job.document.fleet.facts.coverage.ended_abruptly == 0  # not the restart
    own = next(result.diagnosis.document for result in job.sessions
               if result.session_id == first.session_id and result.diagnosis is not None)
    assert f"rank 1: {cut.file} ends mid-record {at} s into the job; the writer stopped abruptly" in own.warnings
    assert own.fleet is not None and own.fleet.facts.coverage.ended_abruptly_ranks == (1,)


def test_a_clean_job_says_nothing(tmp_path: Path) -> None:
    b.write_multi_rank_job(tmp_path / "job", world_size=2, fmt="jsonl")
    for all_sessions in (False, True):
        document = _diagnose(tmp_path / "job", all_sessions=all_sessions)
        assert document["cut_short"] == [] and document["warnings"] == []
        assert document["fleet"]["coverage"]["ended_abruptly"] == 0
        assert _row(document, report=None).cut_short == ()


def test_the_fleet_row_says_which_file_of_which_rank(tmp_path: Path) -> None:
    root = tmp_path / "job"
    _, torn = killed_sink_job(root, world_size=2, torn_rank=1)
    document = _diagnose(root, all_sessions=True)
    row = _row(document, report="job/report.html")
    (entry,) = row.cut_short
    assert entry == {"rank": 1, "file": document["cut_short"][0]["file"],
                     "at_s": round((torn.last_event_ns - b.START_NS) / 1e9, 3), "session_id": "run-1-rank1",
                     "dropped_bytes": torn.partial_bytes}
    fleet = fleet_document([row], generated_at=datetime(2026, 1, 1, tzinfo=UTC), storage="x")
    stored = orjson.loads(orjson.dumps(fleet))["jobs"][0]
    assert stored["cut_short"] == [entry] and FleetRow.from_json(stored).cut_short == row.cut_short
    assert stored["coverage"]["ended_abruptly_ranks"] == [1]
    old = {key: value for key, value in stored.items() if key != "cut_short"}  # a row written before the member
    assert FleetRow.from_json(old).cut_short == ()
    summed = fleet_coverage([stored["coverage"], stored["coverage"], {"expected_ranks": 2}])
    assert summed["ended_abruptly"] == 2 and summed["jobs"] == 3


def test_sentences_without_a_time_or_a_rank() -> None:
    base = CutShortFile(source="/x/a.jsonl", path="a.jsonl", rank=None, session_id=None, last_event_ns=None,
                        dropped_bytes=5)
    assert cut_short_sentence(base, selected_session_id="s") == (
        "a.jsonl ends mid-record before its first complete record; the writer stopped abruptly")
    unplaced = CutShortFile(source="/x/a.jsonl", path="a.jsonl", rank=3, session_id="legacy", last_event_ns=b.START_NS,
                            dropped_bytes=5)
    assert cut_short_sentence(unplaced, selected_session_id="s") == (
        "rank 3: a.jsonl ends mid-record after its last complete record, at 2023-11-14T22:13:20.000Z; "
        "the writer stopped abruptly")
    assert unplaced.at_s is None
