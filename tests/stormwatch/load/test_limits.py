"""Per-job caps: oversized artifacts are skipped unread, a job over ``max_events`` fails with
:class:`JobLimitError`, and big JSONL is parsed in chunks with the whole-file result."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from stormwatch import MemoryTree, load_artifacts
from stormwatch.diagnose import DiagnoseOptions, diagnose
from stormwatch.formats.jsonl import read_jsonl, read_jsonl_stream
from stormwatch.load.limits import DEFAULT_LIMITS, JobLimitError, LoadLimits
from tests import builders as b

TWO_GIB = 2 * b.GIB
REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("fields", "valid"),
    [
        ({}, True),
        ({"max_artifact_bytes": 1, "max_events": 1, "chunk_bytes": 1}, True),
        ({"max_artifact_bytes": 0}, False),
        ({"max_events": -5}, False),
        ({"chunk_bytes": 0}, False),
        ({"max_events": 1.5}, False),
        ({"max_artifact_bytes": True}, False),
    ],
)
def test_limits_are_validated(fields: dict, valid: bool) -> None:
    if valid:
        LoadLimits(**fields)
    else:
        with pytest.raises(ValueError, match="must be a positive integer"):
            LoadLimits(**fields)


def test_defaults() -> None:
    assert (DEFAULT_LIMITS.max_artifact_bytes, DEFAULT_LIMITS.max_events) == (b.GIB, 50_000_000)
    assert issubclass(JobLimitError, ValueError)


def _mixed_jsonl() -> tuple[bytes, int]:
    """stormlog-written records plus every kind of bad line (BOM, CRLF, blank, malformed JSON,
    a non-object, a legacy record for the line-by-line path, >20 bad lines, a torn tail);
    returns the bytes and the longest line's length."""
    lines = [json.dumps(r, sort_keys=True) for r in b.timeline_records(samples=300, session_id="s-1")]
    lines.insert(5, '{"schema_version": 3, "timestamp_ns": ')
    lines.insert(40, json.dumps(b.make_legacy_record(timestamp_s=1.7e9, allocated=5 * b.MIB)))
    lines.insert(70, "")
    lines.insert(90, "[1, 2]")
    for index in range(100, 250, 6):
        lines.insert(index, "not json")
    data = b"\xef\xbb\xbf" + ("\r\n".join(lines[:150]) + "\n" + "\n".join(lines[150:]) + '\n{"torn').encode()
    return data, max(len(line) for line in lines) + 2


@pytest.mark.parametrize("chunk_factor", [1, 2, 7, 50, 10_000])
def test_chunked_parse_equals_whole_file(chunk_factor: int) -> None:
    data, longest = _mixed_jsonl()
    whole = read_jsonl(data, label="f.jsonl", default_session_id="d")
    chunked = read_jsonl_stream(io.BytesIO(data), label="f.jsonl", default_session_id="d",
                                chunk_bytes=longest * chunk_factor)
    pd.testing.assert_frame_equal(chunked.frame, whole.frame, check_categorical=False)
    assert chunked.warnings == whole.warnings
    assert len(whole.frame) > 300 and any("more bad lines skipped" in w for w in whole.warnings)
    assert "f.jsonl:6: malformed JSON" in whole.warnings[0]


def test_line_longer_than_a_chunk_is_skipped_with_its_line_number() -> None:
    records = [json.dumps(r) for r in b.timeline_records(samples=6, session_id="s-1")]
    huge = json.dumps(b.make_record(session_id="s-1", metadata={"blob": "x" * 5000}))
    data = "\n".join([*records[:3], huge, *records[3:]]).encode() + b"\n"
    parsed = read_jsonl_stream(io.BytesIO(data), label="f", default_session_id="d", chunk_bytes=2048)
    assert parsed.warnings == ("f:4: line longer than 2048 bytes (line skipped)",)
    expected = read_jsonl("\n".join(records).encode(), label="f", default_session_id="d")
    pd.testing.assert_frame_equal(parsed.frame, expected.frame, check_categorical=False)


def test_job_loaded_in_chunks_equals_job_loaded_whole(tmp_path: Path) -> None:
    b.write_multi_rank_job(tmp_path / "job", world_size=3, samples=40, alerts=b.DEFAULT_ALERTS)
    whole = load_artifacts([tmp_path / "job"])
    chunked = load_artifacts([tmp_path / "job"], limits=LoadLimits(chunk_bytes=4096))
    pd.testing.assert_frame_equal(chunked.events, whole.events, check_categorical=False)
    assert chunked.warnings == whole.warnings and chunked.sessions == whole.sessions


def _job_with_big_file(root: Path, size_bytes: int) -> Path:
    """Two normal ranks and a sparse ``rank_9/events.jsonl`` of ``size_bytes`` NUL bytes."""
    b.write_multi_rank_job(root, world_size=2, samples=12)
    big = root / "rank_9" / "events.jsonl"
    big.parent.mkdir()
    with big.open("wb") as stream:
        os.truncate(stream.fileno(), size_bytes)
    return big


@pytest.mark.parametrize("as_paths", [False, True])
def test_oversized_artifact_is_skipped_and_the_rest_loads(tmp_path: Path, as_paths: bool) -> None:
    big = _job_with_big_file(tmp_path / "job", TWO_GIB)
    normal = sorted((tmp_path / "job").glob("rank_[01]/events.jsonl"))
    source = [*normal, big] if as_paths else [tmp_path / "job"]
    loaded = load_artifacts(source)
    assert f"Skipped artifact {big}: {TWO_GIB} bytes exceeds max_artifact_bytes={b.GIB}" in loaded.warnings
    assert sorted(set(loaded.events["rank"])) == [0, 1]
    diagnosis = diagnose([tmp_path / "job"], job_id="job", source_name="job")
    assert list(diagnosis.model.present_ranks) == [0, 1]


@pytest.mark.parametrize(
    ("layout", "fmt"), [("rank_dirs", "jsonl"), ("flat", "sink"), ("rank_dirs", "json"), ("flat", "csv")]
)
def test_artifact_cap_applies_to_every_format(tmp_path: Path, layout: str, fmt: str) -> None:
    paths = b.write_multi_rank_job(tmp_path / "job", world_size=2, samples=12, layout=layout, fmt=fmt)
    whole = load_artifacts([tmp_path / "job"])
    assert sorted(set(whole.events["rank"])) == [0, 1]
    capped = load_artifacts([tmp_path / "job"], limits=LoadLimits(max_artifact_bytes=64))
    assert capped.events.empty
    assert any(w.startswith("Skipped artifact ") and "max_artifact_bytes=64" in w for w in capped.warnings)
    assert paths  # written by stormlog's own writers


def test_withheld_object_is_named_with_its_size() -> None:
    data = b.timeline_records(samples=4, session_id="s-1")
    text = "".join(json.dumps(r) + "\n" for r in data).encode()
    tree = MemoryTree({"rank_0/events.jsonl": text}, name="s3://bucket/jobs/j",
                      withheld={"rank_1/events.jsonl": 5_000_000_000})
    loaded = load_artifacts(tree)
    assert len(loaded.events) == len(data)
    assert loaded.warnings == (
        f"Skipped artifact s3://bucket/jobs/j/rank_1/events.jsonl: 5000000000 bytes exceeds "
        f"max_artifact_bytes={b.GIB}",
    )


@pytest.mark.parametrize(("max_events", "fails"), [(1, True), (27, True), (28, False), (10_000, False)])
def test_max_events(tmp_path: Path, max_events: int, fails: bool) -> None:
    b.write_multi_rank_job(tmp_path / "job", world_size=2, samples=12)
    assert len(load_artifacts([tmp_path / "job"]).events) == 28  # 2 ranks x (12 samples + start, stop)
    options = DiagnoseOptions(limits=LoadLimits(max_events=max_events))
    if fails:
        with pytest.raises(JobLimitError, match=f"more than max_events={max_events} events"):
            diagnose([tmp_path / "job"], job_id="job", source_name="job", options=options)
    else:
        assert len(diagnose([tmp_path / "job"], job_id="job", source_name="job", options=options).loaded.events) == 28


def test_max_events_stops_a_streamed_artifact_early() -> None:
    text = "".join(json.dumps(r) + "\n" for r in b.timeline_records(samples=200, session_id="s-1")).encode()
    with pytest.raises(JobLimitError, match="max_events=10"):
        read_jsonl_stream(io.BytesIO(text), label="f", default_session_id="d", chunk_bytes=1024, max_events=10)


_BOUNDED = textwrap.dedent("""
    import sys, time
    from stormwatch import load_artifacts
    from stormwatch.load.limits import LoadLimits
    started = time.perf_counter()
    loaded = load_artifacts([sys.argv[1]], limits=LoadLimits(max_artifact_bytes=3 << 30))
    elapsed = time.perf_counter() - started
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of a big pytest
    # process would report the parent's size
    hwm_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    peak_mib = hwm_kib / 1024
    print(f"peak_rss_mib={peak_mib:.0f} seconds={elapsed:.1f} events={len(loaded.events)}")
    print("\\n".join(loaded.warnings))
""")


def test_two_gib_artifact_loads_with_bounded_memory(tmp_path: Path) -> None:
    big = _job_with_big_file(tmp_path / "job", TWO_GIB)
    done = subprocess.run([sys.executable, "-c", _BOUNDED, str(tmp_path / "job")], capture_output=True, text=True,
                          cwd=REPO, check=True)
    first, *warnings = done.stdout.splitlines()
    peak_mib = float(first.split()[0].split("=")[1])
    assert peak_mib < 700, first
    assert f"{big}:1: line longer than {DEFAULT_LIMITS.chunk_bytes} bytes (line skipped)" in warnings
    assert first.endswith("events=28")
