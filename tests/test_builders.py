"""The builders write what stormlog 0.3.5's own loader reads, with the numbers we asked for."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

try:
    from tests import builders as b
    from tests import reference as ref
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
    import builders as b
    import reference as ref

STORMLOG43 = Path("/tmp/stormlog43")
SYNTH = "Synthesized telemetry events from telemetry_timeline.json"


def load(*paths, session_id=None):
    result = ref.reference(paths, session_id, include_metadata=True)
    assert set(result) == set(ref.RESULT_KEYS)
    return result


def col(result, name):
    index = ref.EVENT_FIELDS.index(name) if name != "metadata" else -1
    return [event[index] for event in result["events"]]


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_cpu_tracker_export_identity_from_env_and_exact_values(tmp_path, fmt):
    before = dict(os.environ)
    samples = [b.Sample(i * 0.5, 1000 + 10 * i, 1500 + 10 * i) for i in range(6)]
    path = b.write_cpu_tracker_export(
        tmp_path / f"events.{fmt}", fmt=fmt, samples=samples, rank=3, world_size=8,
        job_id="run-7", local_rank=1, host="gpu-host", pid=4321, session_id="sess-3")
    assert dict(os.environ) == before
    got = load(path)
    assert got["warnings"] == []
    assert [s["session_id"] for s in got["sessions"]] == ["sess-3"]
    session = got["sessions"][0]
    assert (session["status"], session["rank"], session["local_rank"], session["world_size"],
            session["job_id"], session["host"], session["pid"]) == (
        "completed", 3, 1, 8, "run-7", "gpu-host", 4321)
    assert col(got, "event_type") == ["start", *["sample"] * 6, "stop"]
    assert col(got, "allocator_allocated_bytes")[1:-1] == [s.allocated for s in samples]
    assert col(got, "allocator_reserved_bytes")[1:-1] == [s.reserved for s in samples]
    assert col(got, "device_used_bytes")[1:-1] == [s.allocated for s in samples]
    assert col(got, "collector") == ["stormlog.cpu_tracker"] * 8
    assert set(col(got, "device_id")) == {-1}
    expected_ns = [int((b.START_NS + round(s.t_s * 1e9)) / 1e9 * 1e9) for s in samples]
    assert col(got, "timestamp_ns")[1:-1] == expected_ns
    assert col(got, "allocator_change_bytes")[1:-1] == [0, 10, 10, 10, 10, 10]


def test_cpu_tracker_export_slurm_job_id_and_machine_defaults(tmp_path):
    path = b.write_cpu_tracker_export(tmp_path / "track.json", samples=3, rank=1,
                                      world_size=2, job_id="4711", job_id_env="SLURM_JOB_ID")
    got = load(path)
    assert got["warnings"] == []
    assert set(col(got, "job_id")) == {"4711"}
    assert set(col(got, "pid")) == {os.getpid()}


def test_cpu_export_phases_alerts_and_deltas(tmp_path):
    path = b.write_cpu_tracker_export(
        tmp_path / "events.json", samples=[b.Sample(0, 100), b.Sample(1, 300), b.Sample(2, 200)],
        phases=b.DEFAULT_PHASES, alerts=b.DEFAULT_ALERTS, emit_deltas=True)
    got = load(path)
    assert got["warnings"] == []
    types = col(got, "event_type")
    assert types.count("peak") == 2 and "allocation" in types and "deallocation" in types
    assert types.count("phase_enter") == types.count("phase_exit") == 4
    kinds = {(m["kind"], m["label"]) for m in got["markers"]}
    assert ("phase", "Phase: train / backward") in kinds
    assert ("oom", "OOM detected (allocator_fragmentation)") in kinds


def test_csv_export_loses_metadata_in_reference(tmp_path):
    """stormlog's CSV export writes metadata as a Python repr; the loader reads {}."""
    path = b.write_cpu_tracker_export(tmp_path / "events.csv", fmt="csv", samples=3,
                                      phases=[b.Phase("step", 0.1, 0.9)])
    assert "'phase_scope'" in path.read_text()
    got = load(path)
    assert got["warnings"] == []
    assert all(meta == {} for meta in col(got, "metadata"))
    assert {m["kind"] for m in got["markers"]} == {"lifecycle"}


def test_make_record_is_validated_by_stormlog():
    rec = b.make_record(rank=2, world_size=4, job_id="j", allocated=10, reserved=20,
                        device_total=100, metadata={"k": 1})
    assert rec["schema_version"] == 3 and rec["session_id"] == "s-0"
    assert (rec["device_used_bytes"], rec["device_free_bytes"]) == (20, 80)
    v2 = b.make_record(schema_version=2)
    assert v2["schema_version"] == 2 and "session_id" not in v2
    with pytest.raises(ValueError):
        b.make_record(rank=4, world_size=4)
    with pytest.raises(ValueError):
        b.make_record(allocated=10, device_used=200, device_total=100)


@pytest.mark.parametrize("writer", ["json", "wrapped", "jsonl"])
def test_json_and_jsonl_writers(tmp_path, writer):
    records = b.timeline_records(samples=5, session_id="s-9", rank=1, world_size=2,
                                 job_id="j", start_ns=b.START_NS + 123)
    if writer == "jsonl":
        path = b.write_jsonl(tmp_path / "events.jsonl", records)
    else:
        path = b.write_json(tmp_path / "events.json", records,
                            wrapper={"peak_memory": 5} if writer == "wrapped" else None)
    got = load(path)
    assert got["warnings"] == [] and got["selected_session_id"] == "s-9"
    assert col(got, "timestamp_ns") == [r["timestamp_ns"] for r in records]
    assert col(got, "timestamp_ns")[1] == b.START_NS + 123
    assert len(got["events"]) == 7 and got["sessions"][0]["status"] == "completed"


def test_v2_and_legacy_records_load_as_legacy_sessions(tmp_path):
    v2 = [b.make_record(schema_version=2, timestamp_ns=b.START_NS + i) for i in range(3)]
    legacy = [b.make_legacy_record(timestamp_s=1.7e9 + i, allocated=i) for i in range(3)]
    got = load(b.write_json(tmp_path / "v2_events.json", v2),
               b.write_json(tmp_path / "old_events.json", legacy))
    assert got["warnings"] == []
    assert [s["source"] for s in got["sessions"]] == ["stormlog.diagnostics.legacy"]
    assert got["sessions"][0]["event_count"] == 6


def test_sink_rollover_retention_and_sessions(tmp_path):
    records = (b.timeline_records(samples=10, session_id="a")
               + b.timeline_records(samples=5, session_id="b", start_ns=b.START_NS + 10**10))
    sink = b.write_sink(tmp_path / "sink", records=records, rollover_max_events=4,
                        retention_max_files=3, close_status=None)
    manifest = json.loads((sink / "manifest.json").read_text())
    assert manifest["format"] == "stormlog.append_only_telemetry_sink"
    assert sorted(p.name for p in sink.glob("segment-*.jsonl")) == [
        "segment-000003.jsonl", "segment-000004.jsonl", "segment-000005.jsonl"]
    status = {s["session_id"]: (s["status"], s["ended_at_ns"]) for s in manifest["sessions"]}
    assert status == {"a": ("completed", records[11]["timestamp_ns"]), "b": ("running", None)}
    got = load(sink)
    assert got["warnings"] == [] and got["selected_session_id"] == "a"
    assert {s["session_id"]: s["event_count"] for s in got["sessions"]} == {"a": 4, "b": 7}
    assert col(got, "timestamp_ns") == [r["timestamp_ns"] for r in records[8:12]]


def test_sink_reopened_marks_running_session_interrupted(tmp_path):
    first = b.timeline_records(samples=3, session_id="crashed")
    b.write_sink(tmp_path / "s", records=first, close_status=None)
    b.write_sink(tmp_path / "s", records=b.timeline_records(
        samples=3, session_id="next", start_ns=b.START_NS + 10**10), close_status="completed")
    got = load(tmp_path / "s")
    assert {s["session_id"]: s["status"] for s in got["sessions"]} == {
        "crashed": "interrupted", "next": "completed"}


@pytest.mark.parametrize("manifest", ["new", "old", None])
def test_diagnose_bundle_rank_from_path(tmp_path, manifest):
    ts = [1.7e9 + 0.5 * i for i in range(4)]
    bundle = b.write_diagnose_bundle(tmp_path / "rank_2" / "diag", timestamps_s=ts,
                                     allocated=[10, 20, 30, 40], manifest=manifest)
    assert (bundle / "telemetry_timeline.json").exists()
    assert (bundle / "manifest.json").exists() == (manifest is not None)
    got = load(bundle)
    assert len(got["warnings"]) == 1 and got["warnings"][0].startswith(SYNTH)
    assert "rank=2 world_size=3 (source=path" in got["warnings"][0]
    session = got["sessions"][0]
    expected = {"new": ("diagnose-0", "gpumemprof diagnose"),
                "old": ("diagnose-0", "stormlog.diagnose.bundle"),
                None: (session["session_id"], "stormlog.diagnose.timeline")}[manifest]
    assert (session["session_id"], session["source"]) == expected
    assert col(got, "allocator_allocated_bytes") == [10, 20, 30, 40]
    assert col(got, "allocator_reserved_bytes") == [10, 20, 30, 40]


@pytest.mark.parametrize("rank_field", ["rank", "metadata", "distributed_identity"])
def test_diagnose_bundle_rank_from_payload(tmp_path, rank_field):
    bundle = b.write_diagnose_bundle(
        tmp_path / "d", timestamps_s=[1.7e9, 1.7e9 + 1], allocated=[1, 2], reserved=[3, 4],
        rank=5, world_size=8, rank_field=rank_field)
    got = load(bundle / "telemetry_timeline.json")
    assert "rank=5 world_size=8 (source=payload" in got["warnings"][0]
    assert col(got, "allocator_reserved_bytes") == [3, 4]
    assert col(got, "sampling_interval_ms") == [0, 1000]


def test_phase_events_nested_worker_thread_oom_and_alerts(tmp_path):
    got = load(b.write_phase_events(tmp_path / "events.json"))
    assert got["warnings"] == []
    phases = {m["label"]: m for m in got["markers"] if m["kind"] == "phase"}
    assert set(phases) == {"Phase: train", "Phase: train / forward",
                           "Phase: train / backward", "Phase: dataloader"}
    assert phases["Phase: dataloader"]["metadata"]["thread_name"] == "loader_0"
    assert phases["Phase: train"]["metadata"]["thread_name"] != "loader_0"
    severities = {m["event_type"]: m["severity"] for m in got["markers"] if m["kind"] != "phase"}
    assert severities == {"start": "info", "stop": "info", "warning": "warning",
                          "critical": "critical", "error": "critical"}
    assert any(m["kind"] == "oom" for m in got["markers"])


@pytest.mark.parametrize("layout", ["rank_dirs", "flat"])
@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "sink"])
def test_multi_rank_job_merges_when_ranks_passed_separately(tmp_path, fmt, layout):
    paths = b.write_multi_rank_job(tmp_path, world_size=4, samples=5, fmt=fmt, layout=layout,
                                   missing_ranks=(2,), job_id="job-9")
    assert len(paths) == 3
    got = load(*paths)
    assert got["warnings"] == []
    merged = next(s for s in got["sessions"] if s["source"] == "stormlog.diagnostics.distributed")
    assert got["selected_session_id"] == merged["session_id"]
    assert (merged["job_id"], merged["world_size"], merged["pid"]) == ("job-9", 4, -1)
    assert sorted(set(col(got, "rank"))) == [0, 1, 3]
    assert merged["event_count"] == 3 * 7


def test_multi_rank_folder_is_not_merged_by_reference(tmp_path):
    b.write_multi_rank_job(tmp_path, world_size=3, samples=4, fmt="json")
    got = load(tmp_path)
    assert [s["session_id"] for s in got["sessions"]] == ["job-1-rank0", "job-1-rank1",
                                                         "job-1-rank2"]
    assert set(col(got, "rank")) == {0}


@pytest.mark.parametrize("fmt", ["jsonl", "sink"])
def test_multi_rank_jsonl_and_nested_sinks_are_invisible_in_folder_scan(tmp_path, fmt):
    b.write_multi_rank_job(tmp_path, world_size=2, samples=3, fmt=fmt)
    got = load(tmp_path)
    assert got["events"] == [] and got["warnings"][0].startswith("No telemetry event payloads")


def v4_examples():
    cuda = b.make_v4_record(allocated=10, reserved=20, active=8, inactive=2, change=10,
                            device_used=30, device_free=70, device_total=100, rank=1,
                            world_size=2, job_id="j")
    cpu = b.make_v4_record(capabilities=b.CPU_CAPABILITIES, allocated=5, reserved=5,
                           change=0, device_used=5, device_id=-1)
    device_only = dict(b.CPU_CAPABILITIES, supports_allocator_allocated=False,
                       supports_allocator_reserved=False, supports_allocator_attribution=False,
                       backend="mlx", telemetry_collector="stormlog.mlx_tracker")
    used_only = b.make_v4_record(capabilities=device_only, device_used=7)
    return [cuda, cpu, used_only]


def test_v4_records_match_the_0_4_3_field_lists():
    for record in v4_examples():
        assert list(record) == [*b.V4_REQUIRED_FIELDS[:8], *b.V4_OPTIONAL_FIELDS,
                                *b.V4_REQUIRED_FIELDS[8:]]
        caps = record["metadata"]["memory_capabilities"]
        assert list(caps) == [*b.CAPABILITY_STRING_FIELDS, *b.CAPABILITY_BOOLEAN_FIELDS]
    assert v4_examples()[2]["allocator_allocated_bytes"] is None
    with pytest.raises(ValueError, match="must be null"):
        b.make_v4_record(capabilities=b.CPU_CAPABILITIES, allocated=1, device_free=3)
    with pytest.raises(ValueError, match="memory_capabilities"):
        b.make_v4_record(capabilities={"backend": "cuda", "telemetry_collector": "x"})
    with pytest.raises(ValueError):
        b.make_v4_record(rank=2, world_size=2)


def test_v4_is_rejected_by_reference_0_3_5(tmp_path):
    got = load(b.write_json(tmp_path / "events.json", v4_examples()))
    assert got["events"] == [] and "Unsupported schema_version: 4" in got["warnings"][0]


@pytest.mark.skipif(not (STORMLOG43 / "stormlog" / "telemetry.py").exists(),
                    reason="stormlog 0.4.3 source not unpacked (never the case in CI)")
def test_v4_records_pass_0_4_3_validator_when_available():
    code = ("import json,sys; sys.path.insert(0, sys.argv[1]);"
            "from stormlog.telemetry import validate_telemetry_record as v;"
            "[v(r) for r in json.load(sys.stdin)]; print('ok')")
    done = subprocess.run([sys.executable, "-c", code, str(STORMLOG43)], text=True,
                          input=json.dumps(v4_examples()), capture_output=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr


def _fake_stormwatch(paths, *, nullable: str):
    """A stand-in for stormwatch's result built from the reference's own objects."""
    from stormlog.tui.distributed_diagnostics import load_distributed_artifacts

    result = load_distributed_artifacts([Path(p) for p in paths])
    rows = [{**{n: getattr(e, n) for n in ref.EVENT_FIELDS}, "metadata": e.metadata,
             "schema_version": e.schema_version} for e in result.events]
    frame = pd.DataFrame(rows)
    for name in ref.INT_EVENT_FIELDS:
        frame[name] = frame[name].astype("Int64" if nullable == "Int64" else "float64")
    Session = dataclasses.make_dataclass(
        "Session", [*ref.SESSION_FIELDS, "event_count"], frozen=True)
    sessions = tuple(Session(**dataclasses.asdict(s.summary), event_count=len(s.events))
                     for s in result.sessions)
    return SimpleNamespace(events=frame, sessions=sessions,
                           selected_session_id=result.selected_session_id,
                           warnings=tuple(result.warnings),
                           sources_loaded=tuple(result.sources_loaded),
                           markers=tuple(result.markers))


@pytest.mark.parametrize("nullable", ["Int64", "float64"])
def test_adapter_ours_matches_reference_on_equivalent_result(tmp_path, nullable):
    paths = b.write_multi_rank_job(tmp_path, world_size=2, samples=4, fmt="jsonl",
                                   phases=b.DEFAULT_PHASES[:2])
    expected = ref.reference(paths, include_metadata=True)
    got = ref.ours(_fake_stormwatch(paths, nullable=nullable), include_metadata=True)
    if nullable == "float64":  # float64 cannot hold every ns near 1.7e18: the diff says so
        diffs = ref.differences(expected, got)
        assert diffs and all(d.split(": ")[1].startswith("timestamp_ns=") for d in diffs)
        return
    assert ref.differences(expected, got, compare_warnings="exact") == []
    assert got == expected
    assert all(type(v) is int for v in expected["events"][0][1:2])
    renamed = ref.canonical(expected)
    assert renamed["selected_session_id"] == "legacy#0"
    assert ref.differences(renamed, ref.canonical(got)) == []
