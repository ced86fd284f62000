"""Coverage's ``ended_abruptly``: a present rank whose session has no stop event and whose last file
was cut short mid-record."""

from __future__ import annotations

from pathlib import Path

from stormwatch.analysis.model import build_model
from stormwatch.load.loader import load_artifacts
from stormwatch.peers.coverage import Coverage, job_coverage
from tests import builders as b
from tests.cut_short_builders import killed_sink_job, torn_jsonl_job


def _coverage(*paths: Path, ranks: set[int] | None = None) -> Coverage:
    loaded = load_artifacts(list(paths))
    return job_coverage(loaded, build_model(loaded.events, ranks))


def test_a_rank_whose_writer_died_mid_record_ended_abruptly(tmp_path: Path) -> None:
    killed_sink_job(tmp_path / "job", world_size=4, torn_rank=3)
    coverage = _coverage(tmp_path / "job")
    assert (coverage.ended_abruptly, coverage.ended_abruptly_ranks) == (1, (3,))
    assert coverage.sessions_without_stop == 4
    assert coverage.as_dict()["ended_abruptly_ranks"] == [3]


def test_a_rank_left_out_by_the_rank_filter_is_not_counted(tmp_path: Path) -> None:
    killed_sink_job(tmp_path / "job", world_size=4, torn_rank=3)
    assert _coverage(tmp_path / "job", ranks={0, 1}).ended_abruptly_ranks == ()


def test_a_stopped_session_did_not_end_abruptly(tmp_path: Path) -> None:
    """A garbage half line after the stop event: the file is cut short, the capture had stopped."""
    path = b.write_jsonl(tmp_path / "job" / "events.jsonl", b.timeline_records(samples=8, session_id="s-1"))
    path.write_bytes(path.read_bytes() + b'{"schema_version": 3, "sess')
    loaded = load_artifacts([tmp_path / "job"])
    assert len(loaded.cut_short) == 1 and loaded.sessions[0].status == "completed"
    assert job_coverage(loaded, build_model(loaded.events)).ended_abruptly == 0


def test_a_torn_file_that_is_not_the_ranks_last_does_not_end_it(tmp_path: Path) -> None:
    records = b.timeline_records(samples=20, session_id="s-1", lifecycle=False, rank=0, world_size=1)
    first = b.write_jsonl(tmp_path / "job" / "a_events.jsonl", records[:10])
    b.write_jsonl(tmp_path / "job" / "b_events.jsonl", records[10:])
    first.write_bytes(first.read_bytes() + b'{"schema_version": 3, "sess')  # torn, then the writer went on
    loaded = load_artifacts([tmp_path / "job"])
    coverage = job_coverage(loaded, build_model(loaded.events))
    assert len(loaded.cut_short) == 1 and coverage.ended_abruptly == 0 and coverage.sessions_without_stop == 1


def test_a_clean_job_has_none(tmp_path: Path) -> None:
    b.write_attempt(tmp_path / "job", job_id="run-1", world_size=2, close_status=None)
    coverage = _coverage(tmp_path / "job")
    assert coverage.ended_abruptly == 0 and coverage.sessions_without_stop == 2


def test_torn_jsonl_ranks(tmp_path: Path) -> None:
    torn_jsonl_job(tmp_path / "job", world_size=3, torn_rank=0)
    assert _coverage(tmp_path / "job").ended_abruptly_ranks == (0,)
