"""Schema-v4 rows that count ``allocator_change_bytes`` without allocated memory support:
dropped, with a warning naming the file and line, where stormlog 0.4.3 drops them.

The artifacts are written by stormlog 0.4.3's own code, in a subprocess: its CUDA
``MemoryTracker.export_events`` (csv: ``pandas.to_csv``, metadata a Python literal; json),
fed :class:`TrackingEvent` objects as a run logs them (start and phase events before the
first sample carry no counters and a change of 0), and its MLX adapter's CSV writer
(metadata as JSON) over the same records; also its ``CPUMemoryTracker`` CSV export. The
tracker module imports torch, which 0.4.3 only needs for devices: a stub stands in, and a
collector with CUDA capabilities is passed, which 0.4.3 supports (``collector=``).

0.4.3 reads a CSV metadata cell as JSON or ``{}``, so a Python-literal cell makes it infer
capabilities from the counters, and those forbid a change without an allocated counter.
stormwatch recovers the rest of that metadata on purpose (docs/conformance.md), so the
markers' ``metadata`` is the one thing not compared. Bytes are bytes, times ns.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stormwatch import load_artifacts
from tests import model_builders as mb
from tests.builders import GIB, MIB, START_NS
from tests.reference_model import _clean_env, canonical_model, model_differences, our_model, reference_model

WORLD_SIZE = 2
N_SAMPLES = 8
#: Rows before the first sample (start, two phase enters): lines 2-4 of each CSV, records 1-3 of each JSON.
EARLY_ROWS = 3
RULE = "allocator_change_bytes must be null"  # stormlog 0.4.3's and stormwatch's wording both start so

_WRITER = r"""
import csv, json, os, sys, types
spec = json.load(sys.stdin)
torch = types.ModuleType("torch")  # 0.4.3's tracker imports torch; a passed collector never uses it
torch.device = type("device", (), {})
torch.Tensor = type("Tensor", (), {})
torch.cuda = types.SimpleNamespace(is_available=lambda: False, current_device=lambda: 0)
torch.backends = types.SimpleNamespace()
torch.version = types.SimpleNamespace(hip=None, cuda=None)
torch.nn = types.SimpleNamespace(Module=type("Module", (), {}))
sys.modules["torch"] = torch
from stormlog import cpu_profiler, tracker as gpu
from stormlog.device_collectors import DeviceMemoryCapabilities, DeviceMemoryCollector, DeviceMemorySample
from stormlog.tui.mlx_adapter import MLXTrackerAdapter

class Collector(DeviceMemoryCollector):
    def name(self): return spec["caps"]["backend"]
    def is_available(self): return True
    def capabilities(self): return DeviceMemoryCapabilities(**spec["caps"])
    def sample(self): return DeviceMemorySample(**spec["first_sample"])

for item in spec["ranks"]:
    os.environ.update(item["env"])
    if item["tracker"] == "cpu":
        tracker = cpu_profiler.CPUMemoryTracker(sampling_interval=0.5)
        make = cpu_profiler.TrackingEvent
    else:
        tracker = gpu.MemoryTracker(collector=Collector(), sampling_interval=0.5)
        make = gpu.TrackingEvent
    ident = tracker.distributed_identity
    for event in item["events"]:
        tracker.events.append(make(**event, **ident))
    for fmt, path in item["exports"].items():
        if fmt == "csv_json_metadata":  # the MLX adapter's CSV writer, over the tracker's records
            records = [tracker._telemetry_record_from_event(e) for e in tracker.events]
            results = types.SimpleNamespace(telemetry_events=records)
            adapter = types.SimpleNamespace(tracker=types.SimpleNamespace(get_results=lambda: results))
            MLXTrackerAdapter.export_events(adapter, path, "csv")
        else:
            tracker.export_events(path, format=fmt)
"""


def _counters(rank: int, index: int) -> dict[str, Any]:
    """``TrackingEvent`` counters of sample ``index``: a ramp, reserved 1.25 x, a 2 GiB gap."""
    allocated = 4 * GIB + rank * 256 * MIB + index * 32 * MIB
    reserved = allocated * 5 // 4
    used = reserved + 2 * GIB
    return {"memory_allocated": allocated, "memory_reserved": reserved, "active_memory": allocated,
            "inactive_memory": reserved // 10, "device_used": used, "device_free": mb.DEVICE_TOTAL_BYTES - used,
            "device_total": mb.DEVICE_TOTAL_BYTES}



def _events(rank: int, *, tracker: str) -> list[dict[str, Any]]:
    """``TrackingEvent`` fields of one rank's run: start and two phase enters before any sample
    (the GPU tracker has no counters yet there, and logs a change of 0), samples every 0.5 s,
    a critical alert on rank 1 and stop (with the last sample's counters). CPU: RSS throughout."""
    def counters(index: int | None) -> dict[str, Any]:
        if tracker == "cpu":
            rss = GIB + rank * 64 * MIB + (index or 0) * MIB
            return {"memory_allocated": rss, "memory_reserved": rss}
        return {"memory_allocated": None, "memory_reserved": None} if index is None else _counters(rank, index)

    def at(t_s: float, event_type: str, context: str, index: int | None, change: int) -> dict[str, Any]:
        return {"timestamp": START_NS / 1e9 + t_s, "event_type": event_type, "memory_change": change,
                "device_id": rank if tracker == "gpu" else -1, "session_id": f"{mb.JOB_ID}-rank{rank}",
                "context": context, **counters(index)}
    out = [at(0.0, "start", "Memory tracking started", None, 0),
           at(0.001, "phase_enter", "Phase entered: train", None, 0),
           at(0.002, "phase_enter", "Phase entered: forward", None, 0)]
    for index in range(N_SAMPLES):
        out.append(at(0.5 * (index + 1), "sample", "Collected telemetry sample.", index, 32 * MIB if index else 0))
        if rank == 1 and index == 4:
            out.append(at(0.5 * (index + 1) + 0.1, "critical", "memory above 95%", index, 0))
    out.append(at(0.5 * (N_SAMPLES + 1), "stop", "Memory tracking stopped", N_SAMPLES - 1, 0))
    return out


def write_job(root: Path, stormlog43: Path, *, tracker: str, formats: tuple[str, ...]) -> dict[str, list[Path]]:
    """Each rank's export in each of ``formats`` (``csv``, ``json``, ``csv_json_metadata``),
    by 0.4.3's writers; returns the paths per format, in rank order."""
    paths: dict[str, list[Path]] = {fmt: [] for fmt in formats}
    ranks = []
    for rank in range(WORLD_SIZE):
        exports = {}
        for fmt in formats:
            suffix = "json" if fmt == "json" else "csv"
            path = root / fmt / f"rank_{rank}" / f"{tracker}_events.{suffix}"
            path.parent.mkdir(parents=True, exist_ok=True)
            exports[fmt] = str(path)
            paths[fmt].append(path)
        ranks.append({"env": mb._rank_env(rank, WORLD_SIZE), "tracker": tracker,
                      "events": _events(rank, tracker=tracker), "exports": exports})
    first_sample = {"allocated_bytes": 4 * GIB, "reserved_bytes": 5 * GIB, "used_bytes": 7 * GIB,
                    "free_bytes": mb.DEVICE_TOTAL_BYTES - 7 * GIB, "total_bytes": mb.DEVICE_TOTAL_BYTES,
                    "active_bytes": 4 * GIB, "inactive_bytes": GIB // 2, "device_id": 0}
    spec = {"caps": mb.CUDA_CAPABILITIES, "first_sample": first_sample, "ranks": ranks}
    env = {k: v for k, v in _clean_env().items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    done = subprocess.run([sys.executable, "-c", _WRITER], input=json.dumps(spec), text=True, capture_output=True,
                          check=False, env={**env, "PYTHONPATH": str(stormlog43)})
    if done.returncode != 0:
        raise RuntimeError(f"stormlog 0.4.3 writer failed:\n{done.stderr}")
    return paths


_LOAD = r"""
import json, sys
from pathlib import Path
from stormlog.tui import distributed_diagnostics as dd
loaded = dd.load_distributed_artifacts([Path(p) for p in json.load(sys.stdin)])
json.dump({"warnings": list(loaded.warnings), "events": len(loaded.events)}, sys.stdout)
"""


def reference_load(paths: list[Path], stormlog43: Path) -> dict[str, Any]:
    """stormlog 0.4.3's ``load_distributed_artifacts``: its warnings and how many events it kept."""
    done = subprocess.run([sys.executable, "-c", _LOAD], input=json.dumps([str(p) for p in paths]), text=True,
                          capture_output=True, check=True, env={**_clean_env(), "PYTHONPATH": str(stormlog43)})
    return dict(json.loads(done.stdout))


def _without_marker_metadata(model: dict[str, Any]) -> dict[str, Any]:
    """The model without its markers' ``metadata``: stormwatch recovers the CSV metadata that
    0.4.3 reads as ``{}`` (a documented difference); everything else is compared."""
    markers = {rank: [{k: v for k, v in marker.items() if k != "metadata"} for marker in values]
               for rank, values in model["markers_by_rank"].items()}
    return {**model, "markers_by_rank": markers}


@dataclass(frozen=True)
class Case:
    tracker: str
    fmt: str
    rejected_lines: tuple[int, ...]  # in every rank's file, numbered alike by both readers
    compare_marker_metadata: bool


CASES: dict[str, Case] = {
    # pandas writes metadata as a Python literal: 0.4.3 infers capabilities; the early rows break the rule
    "gpu-csv": Case("gpu", "csv", tuple(range(2, 2 + EARLY_ROWS)), compare_marker_metadata=False),
    # the same records with JSON metadata: 0.4.3 reads the stated capabilities (allocated supported)
    "gpu-csv-json-metadata": Case("gpu", "csv_json_metadata", (), compare_marker_metadata=True),
    # JSON: stated capabilities too; the rule is checked (records.py / v4_capabilities.py) and holds
    "gpu-json": Case("gpu", "json", (), compare_marker_metadata=True),
    # counters throughout: nothing rejected, but the inferred capabilities allow fragmentation analysis
    "cpu-csv": Case("cpu", "csv", (), compare_marker_metadata=False),
}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory, stormlog43: Path) -> Callable[[str], dict[str, list[Path]]]:
    """Each tracker's job, written once per module in every format it has."""
    made: dict[str, dict[str, list[Path]]] = {}

    def get(tracker: str) -> dict[str, list[Path]]:
        if tracker not in made:
            formats = ("csv", "json", "csv_json_metadata") if tracker == "gpu" else ("csv",)
            made[tracker] = write_job(tmp_path_factory.mktemp(tracker), stormlog43, tracker=tracker, formats=formats)
        return made[tracker]
    return get


def _rule_lines(warnings: Sequence[str], path: Path) -> list[int]:
    """The line numbers of the warnings that name ``path`` (as ``path:line:``) and the rule."""
    prefix = f"{path}:"
    return sorted(int(w.split(prefix, 1)[1].split(":", 1)[0]) for w in warnings if prefix in w and RULE in w)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rows_rejected_where_stormlog_rejects_them(name: str, jobs: Callable[[str], dict[str, list[Path]]],
                                                  stormlog43: Path) -> None:
    """The same rows are dropped, each named by file and line; the rest of each file loads."""
    case = CASES[name]
    paths = jobs(case.tracker)[case.fmt]
    reference = reference_load(paths, stormlog43)
    ours = load_artifacts(paths)
    for path in paths:
        assert _rule_lines(reference["warnings"], path) == list(case.rejected_lines)
        assert _rule_lines(ours.warnings, path) == list(case.rejected_lines)
    assert len(ours.events) == reference["events"] == WORLD_SIZE * (EARLY_ROWS + N_SAMPLES + 1) + 1 - len(
        case.rejected_lines) * WORLD_SIZE


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_equals_reference(name: str, jobs: Callable[[str], dict[str, list[Path]]], stormlog43: Path) -> None:
    case = CASES[name]
    paths = jobs(case.tracker)[case.fmt]
    expected = canonical_model(reference_model(paths, version="0.4.3", stormlog43=stormlog43))
    actual = canonical_model(our_model(paths))
    if not case.compare_marker_metadata:
        expected, actual = _without_marker_metadata(expected), _without_marker_metadata(actual)
    differences = model_differences(expected, actual, compare_warnings="exact")
    assert not differences, "\n".join(differences)
    assert [i["signal"] for i in expected["indicators"]] == ["alert:critical"] * 2  # the scenario's signal


def test_csv_keeps_recovered_metadata_but_not_its_capabilities(jobs: Callable[[str], dict[str, list[Path]]]) -> None:
    """Of a Python-literal cell stormwatch keeps everything but the stated capabilities,
    which are replaced by those 0.4.3 infers (sampling source "legacy", not the collector's)."""
    path = jobs("gpu")["csv"][0]
    metadata = load_artifacts([path]).events.query("event_type == 'sample'")["metadata"].iloc[0]
    assert metadata["sampling_source"] == mb.CUDA_CAPABILITIES["sampling_source"] != "legacy"  # recovered
    assert metadata["memory_capabilities"]["sampling_source"] == "legacy"


def _strip_capabilities(record: dict[str, Any]) -> None:
    record["metadata"].pop("memory_capabilities")  # 0.4.3 then infers them from the counters


def _deny_allocated(record: dict[str, Any]) -> None:
    if record["allocator_allocated_bytes"] is None:  # the stated capabilities then forbid the change
        record["metadata"]["memory_capabilities"]["supports_allocator_allocated"] = False


JSON_EDITS: dict[str, Callable[[dict[str, Any]], None]] = {"inferred": _strip_capabilities, "stated": _deny_allocated}


@pytest.mark.parametrize("layout", ["json", "jsonl"])
@pytest.mark.parametrize("edit", sorted(JSON_EDITS))
def test_json_rows_break_the_same_rule(edit: str, layout: str, jobs: Callable[[str], dict[str, list[Path]]],
                                       stormlog43: Path, tmp_path: Path) -> None:
    """JSON and JSON Lines: 0.4.3 applies the rule to every v4 record, stated or inferred
    capabilities alike, and refuses the whole file; stormwatch already applies it (the per-record
    and per-column checks) and drops only those records, naming file and line (documented)."""
    source = jobs("gpu")["json"][0]
    records = json.loads(source.read_text())
    for record in records:
        JSON_EDITS[edit](record)
    path = tmp_path / f"rank_0_events.{layout}"
    if layout == "json":
        path.write_text(json.dumps(records, indent=2))
    else:
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
    reference = reference_load([path], stormlog43)
    assert reference["events"] == 0 and any(RULE in w and str(path) in w for w in reference["warnings"])
    ours = load_artifacts([path])
    named = [w for w in ours.warnings if RULE in w and w.startswith(f"{path}:")]
    assert len(named) == EARLY_ROWS, ours.warnings
    assert len(ours.events) == len(records) - EARLY_ROWS
    if layout == "jsonl":
        assert _rule_lines(ours.warnings, path) == list(range(1, 1 + EARLY_ROWS))
