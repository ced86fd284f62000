"""Coverage of jobs written by stormlog's own writers: ranks, sessions, schema versions, collectors."""

from __future__ import annotations

from pathlib import Path

from stormwatch.analysis.model import build_model
from stormwatch.load.loader import load_artifacts
from stormwatch.peers.coverage import Coverage, job_coverage
from tests.builders import (
    CPU_CAPABILITIES,
    GIB,
    START_NS,
    make_v4_record,
    ramp,
    timeline_records,
    write_jsonl,
    write_multi_rank_job,
)
from tests.model_builders import build_legacy_job


def coverage_of(root: Path, selected: set[int] | None = None) -> Coverage:
    loaded = load_artifacts([root])
    return job_coverage(loaded, build_model(loaded.events, selected))


def test_complete_job(tmp_path: Path) -> None:
    write_multi_rank_job(tmp_path, world_size=4, samples=5)
    coverage = coverage_of(tmp_path)
    # 5 samples + start + stop per rank; the merged rank-group session is not counted
    assert coverage == Coverage(
        expected_ranks=4, present_ranks=4, missing_ranks=(), ranks_present_percent=100.0, sessions=4,
        sessions_without_stop=0, session_ids_without_stop=(), schema_versions=((3, 28),),
        collectors=(("stormlog.cuda_tracker", 28),), load_warnings=0)


def test_missing_ranks_unstopped_sessions_mixed_schemas_and_collectors(tmp_path: Path) -> None:
    write_multi_rank_job(tmp_path, world_size=8, samples=5, job_id="j", missing_ranks=(3, 5, 6, 7))
    # rank 3: no stop event (the process died); rank 5: schema v4 from a CPU tracker, no lifecycle events
    write_jsonl(tmp_path / "rank_3" / "events.jsonl", timeline_records(
        samples=ramp(4), lifecycle=False, session_id="j-rank3", job_id="j", rank=3, world_size=8))
    write_jsonl(tmp_path / "rank_5" / "events.jsonl", [
        make_v4_record(capabilities=CPU_CAPABILITIES, session_id="j-rank5", timestamp_ns=START_NS + i, device_id=-1,
                       allocated=GIB, reserved=GIB, device_used=GIB, job_id="j", rank=5, world_size=8)
        for i in range(2)])
    (tmp_path / "rank_6").mkdir()
    (tmp_path / "rank_6" / "events.jsonl").write_text('{"broken": \n', encoding="utf-8")
    coverage = coverage_of(tmp_path)
    assert (coverage.expected_ranks, coverage.present_ranks, coverage.missing_ranks) == (8, 6, (6, 7))
    assert coverage.ranks_present_percent == 75.0
    assert coverage.sessions == 6
    assert coverage.session_ids_without_stop == ("j-rank3", "j-rank5") and coverage.sessions_without_stop == 2
    assert coverage.schema_versions == ((3, 4 * 7 + 4), (4, 2))
    assert coverage.collectors == (("stormlog.cpu_tracker", 2), ("stormlog.cuda_tracker", 4 * 7 + 4))
    assert coverage.load_warnings >= 1  # the broken line


def test_a_rank_filter_counts_only_the_selected_ranks(tmp_path: Path) -> None:
    write_multi_rank_job(tmp_path, world_size=4, samples=5)
    coverage = coverage_of(tmp_path, {0, 1})
    assert (coverage.expected_ranks, coverage.present_ranks, coverage.ranks_present_percent) == (2, 2, 100.0)
    assert coverage.schema_versions == ((3, 14),) and coverage.sessions == 4  # sessions are the job's


def test_legacy_job_is_one_session_without_stop(tmp_path: Path) -> None:
    build_legacy_job(tmp_path)
    coverage = coverage_of(tmp_path)
    assert coverage.sessions == 1 and coverage.sessions_without_stop == 1
    assert coverage.schema_versions == ((3, 33),)  # 4 x 8 samples + one critical alert


def test_empty_job(tmp_path: Path) -> None:
    coverage = coverage_of(tmp_path)
    assert (coverage.expected_ranks, coverage.ranks_present_percent, coverage.sessions) == (0, None, 0)
    assert coverage.schema_versions == () and coverage.collectors == ()


def test_as_dict_is_json_ready(tmp_path: Path) -> None:
    write_multi_rank_job(tmp_path, world_size=2, samples=3)
    data = coverage_of(tmp_path).as_dict()
    assert data["schema_versions"] == {"3": 10} and data["collectors"] == {"stormlog.cuda_tracker": 10}
    assert data["missing_ranks"] == [] and data["session_ids_without_stop"] == []
