"""The loader records every artifact whose last record was cut short (JSONL files, sink segments,
JSON arrays that break off), while its events, warnings and the model stay stormlog 0.3.5's."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from stormwatch import load_artifacts
from stormwatch.formats.json_document import read_json
from stormwatch.formats.jsonl import read_jsonl, read_jsonl_stream
from stormwatch.load.cut_short import CutShortFile
from stormwatch.load.limits import LoadLimits
from stormwatch.load.loader import load_sessions
from stormwatch.load.tree import MemoryTree
from tests import builders as b
from tests.cut_short_builders import killed_sink_job, last_segment, snapshot, tear_last_line, torn_jsonl_job
from tests.reference import canonical, differences, load_ours, reference
from tests.reference_model import canonical_model, model_differences, our_model, reference_model


def test_torn_jsonl_is_recorded_and_the_load_stays_the_reference(tmp_path: Path) -> None:
    root = tmp_path / "job"
    paths, torn = torn_jsonl_job(root)
    before = snapshot(root)
    job = load_sessions([root])

    group = job.default_session_id
    first_ns = int(job.result_for().events["timestamp_ns"].min())
    assert job.cut_short == (CutShortFile(
        source=str(paths[1]), path="rank_1/events.jsonl", rank=1, session_id="job-1-rank1",
        last_event_ns=torn.last_event_ns, dropped_bytes=torn.partial_bytes, session_group_id=group,
        session_first_event_ns=first_ns),)
    assert job.result_for().cut_short == job.cut_short
    assert job.cut_short[0].at_s == (torn.last_event_ns - first_ns) / 1e9
    assert not differences(canonical(reference(paths)), canonical(load_ours(paths)), compare_warnings="exact")
    assert job.warnings == ()  # silent, as stormlog is: the fact lives beside the warnings
    assert snapshot(root) == before


def test_torn_jsonl_model_equals_the_reference(tmp_path: Path) -> None:
    root = tmp_path / "job"
    paths, _ = torn_jsonl_job(root, world_size=4, torn_rank=2)
    expected = canonical_model(reference_model(paths))
    assert not model_differences(expected, canonical_model(our_model(paths)))
    assert not model_differences(expected, canonical_model(our_model([root], job_folder=True)))


def test_killed_sink_segment_is_recorded_and_its_model_equals_the_reference(tmp_path: Path) -> None:
    root = tmp_path / "job"
    paths, torn = killed_sink_job(root)
    segment = last_segment(paths[1])
    job = load_sessions([root])
    (cut,) = job.cut_short
    assert (cut.path, cut.source) == (segment.relative_to(root).as_posix(), str(segment))
    assert (cut.rank, cut.session_id, cut.last_event_ns, cut.dropped_bytes) == (
        1, "run-1-rank1", torn.last_event_ns, torn.partial_bytes)
    assert cut.session_group_id == job.default_session_id  # the two ranks' group
    assert not model_differences(canonical_model(reference_model(paths)),
                                 canonical_model(our_model([root], job_folder=True)))


def test_a_segment_holding_only_a_torn_line_is_named_from_the_manifest(tmp_path: Path) -> None:
    """Nine records, four a segment: the last segment holds one record, which the cut leaves partial."""
    records = b.timeline_records(samples=9, session_id="s-1", lifecycle=False, rank=0, world_size=1)
    sink = b.write_sink(tmp_path / "sink", records=records, rollover_max_events=4, retention_max_files=100,
                        close_status=None)
    segment = last_segment(sink)
    assert len(segment.read_bytes().splitlines()) == 1
    torn = tear_last_line(segment)
    (cut,) = load_artifacts([sink]).cut_short
    assert torn.last_event_ns is None and cut.last_event_ns is None and cut.at_s is None
    assert (cut.session_id, cut.rank, cut.path, cut.dropped_bytes) == ("s-1", 0, segment.name, torn.partial_bytes)


def test_streamed_jsonl_reports_the_same_cut(tmp_path: Path) -> None:
    path = b.write_jsonl(tmp_path / "events.jsonl", b.timeline_records(samples=200, session_id="s-1"))
    torn = tear_last_line(path, keep=0.3)
    data = path.read_bytes()
    whole = read_jsonl(data, label="x", default_session_id="d")
    for chunk in (2048, 4096, len(data) + 1):  # longer than any line
        streamed = read_jsonl_stream(io.BytesIO(data), label="x", default_session_id="d", chunk_bytes=chunk)
        assert streamed.cut_short_bytes == whole.cut_short_bytes == torn.partial_bytes
        assert len(streamed.frame) == len(whole.frame)
    streamed_load = load_sessions([path], limits=LoadLimits(chunk_bytes=4096))  # the loader streams it
    assert [cut.dropped_bytes for cut in streamed_load.cut_short] == [torn.partial_bytes]
    assert streamed_load.warnings == () and len(streamed_load.parts[0].events) == len(whole.frame)


def test_a_torn_line_before_the_last_is_only_a_malformed_line(tmp_path: Path) -> None:
    lines = [json.dumps(record) for record in b.timeline_records(samples=8, session_id="s-1")]
    lines.insert(4, lines[4][: len(lines[4]) // 2])
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    loaded = load_artifacts([path])
    assert loaded.cut_short == ()
    assert any(f"{path}:5:" in warning for warning in loaded.warnings)


def test_clean_files_record_nothing(tmp_path: Path) -> None:
    paths = b.write_multi_rank_job(tmp_path / "jsonl", world_size=2, fmt="jsonl")
    sinks = b.write_attempt(tmp_path / "sinks", job_id="run-1", world_size=2, close_status=None)
    exported = b.write_json(tmp_path / "json" / "events.json", b.timeline_records(samples=8, session_id="s-1"))
    for source in ([tmp_path / "jsonl"], paths, sinks, [tmp_path / "sinks"], [exported]):
        assert load_sessions(source).cut_short == ()
    assert read_jsonl(b"", label="x", default_session_id="d").cut_short_bytes is None
    assert read_jsonl(b'{"a": 1}\n  ', label="x", default_session_id="d").cut_short_bytes is None  # blank tail


def test_explicit_files_are_named_from_the_folder_holding_them(tmp_path: Path) -> None:
    paths, _ = torn_jsonl_job(tmp_path / "job")
    assert [cut.path for cut in load_sessions(paths).cut_short] == ["rank_1/events.jsonl"]
    assert [cut.path for cut in load_sessions([paths[1]]).cut_short] == ["events.jsonl"]


def test_json_array_that_breaks_off_is_cut_short(tmp_path: Path) -> None:
    records = b.timeline_records(samples=10, session_id="s-1", rank=0, world_size=1)
    path = b.write_json(tmp_path / "events.json", records)
    text = path.read_bytes()
    os.truncate(path, int(len(text) * 0.6))
    loaded = load_artifacts([path])
    (cut,) = loaded.cut_short
    kept = len(loaded.events)
    assert 0 < kept < len(records) and cut.last_event_ns == records[kept - 1]["timestamp_ns"]
    assert (cut.rank, cut.session_id, cut.path) == (0, "s-1", "events.json")
    complete = json.dumps(records[:kept], indent=2)[:-2]  # the kept records' text, without "\n]"
    assert cut.dropped_bytes == int(len(text) * 0.6) - len(complete.encode())
    assert any("kept the" in warning for warning in loaded.warnings)  # the loader's own warning stays


def test_json_array_left_open_after_a_record_drops_nothing(tmp_path: Path) -> None:
    records = b.timeline_records(samples=4, session_id="s-1")
    data = json.dumps(records, indent=2).encode()
    parsed = read_json(data[: data.rindex(b"}") + 1], label="x", default_session_id="d")
    assert parsed.cut_short_bytes == 0 and len(parsed.frame) == len(records)


def test_every_cut_point_of_a_json_array_is_cut_short_but_bad_json_inside_is_not() -> None:
    records = b.timeline_records(samples=2, session_id="s-1", phases=b.DEFAULT_PHASES[:1])
    data = json.dumps(records, indent=2, ensure_ascii=True).encode()
    compact = json.dumps(records, separators=(",", ":")).encode()
    for text in (data, compact):
        for end in range(1, len(text) - 1, 7):
            assert read_json(text[:end], label="x", default_session_id="d").cut_short_bytes is not None, end
    broken = data.replace(b'"event_type"', b'"event_type" oops', 1)  # bad JSON mid-file, closed at the end
    assert read_json(broken, label="x", default_session_id="d").cut_short_bytes is None


def test_a_tree_read_into_memory_names_the_file_by_its_key(tmp_path: Path) -> None:
    """An S3 prefix read into memory: ``path`` is the key under the job, ``source`` the object's identity."""
    root = tmp_path / "job"
    _, torn = torn_jsonl_job(root)
    objects = {path.relative_to(root).as_posix(): path.read_bytes() for path in root.rglob("*") if path.is_file()}
    (cut,) = load_sessions(MemoryTree(objects, name="s3://bucket/jobs/job-1")).cut_short
    assert (cut.path, cut.source) == ("rank_1/events.jsonl", "s3://bucket/jobs/job-1/rank_1/events.jsonl")
    assert (cut.rank, cut.dropped_bytes, cut.last_event_ns) == (1, torn.partial_bytes, torn.last_event_ns)
