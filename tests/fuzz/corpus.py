"""The seed corpus: small jobs written by stormlog's own writer code, as key -> bytes.

Each :class:`Shape` is one job folder (``files``, keys relative to its root) and the
keys a mutation may damage (``targets``), each with its :class:`Fmt`. Writers are
those of :mod:`tests.builders` and :mod:`tests.model_builders` (``TelemetryEventV3``
records, ``CPUMemoryTracker.export_events``, ``AppendOnlyTelemetrySink``, the diagnose
bundle layout, schema v4 and legacy ``TrackingEvent`` records); they write to a
temporary folder once per process, and the bytes are kept in memory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path

from tests import builders as b
from tests.model_builders import write_job

SAMPLES = 8  # per rank: small, so that ten thousand cases run in minutes
_PID, _HOST = 4242, "fuzz-node"


class Fmt(StrEnum):
    """How a target file is laid out, which decides how a mutation edits it."""

    JSONL = "jsonl"  # one record per line (a *.jsonl export or a sink segment)
    JSON = "json"  # an array of records, or an object holding them under "events"
    CSV = "csv"  # a tracker's CSV export: header row, one record per row
    TIMELINE = "timeline"  # a diagnose bundle's telemetry_timeline.json
    MANIFEST = "manifest"  # a sink's or a bundle's manifest.json

    @property
    def line_records(self) -> bool:
        """One record per line, so that a cut at byte n keeps the lines before it."""
        return self in (Fmt.JSONL, Fmt.CSV)


@dataclass(frozen=True)
class Shape:
    """One job's artifacts: ``files`` (key -> bytes) and the mutable ``targets`` (key -> Fmt)."""

    name: str
    files: Mapping[str, bytes]
    targets: Mapping[str, Fmt]


def _records(session_id: str, **kwargs: object) -> list[dict]:
    return b.timeline_records(samples=SAMPLES, phases=b.DEFAULT_PHASES, alerts=b.DEFAULT_ALERTS,
                              session_id=session_id, pid=_PID, host=_HOST, **kwargs)


def _jsonl_v3(root: Path) -> None:
    b.write_jsonl(root / "rank_0" / "events.jsonl", _records("fuzz-v3", job_id="fuzz-job"))


def _jsonl_v2(root: Path) -> None:
    b.write_jsonl(root / "v2_events.jsonl", _records("unused", schema_version=2))


def _jsonl_v4(root: Path) -> None:
    records = []
    for i in range(SAMPLES):
        caps = b.CUDA_CAPABILITIES if i % 2 == 0 else b.CPU_CAPABILITIES
        full = caps is b.CUDA_CAPABILITIES
        alloc = b.GIB + i * 8 * b.MIB
        records.append(b.make_v4_record(
            capabilities=caps, session_id="fuzz-v4", timestamp_ns=b.START_NS + i * 500_000_000,
            allocated=alloc, reserved=alloc + 64 * b.MIB, active=alloc if full else None,
            inactive=64 * b.MIB if full else None, change=8 * b.MIB if i else 0,
            device_used=alloc + 320 * b.MIB, device_free=(80 * b.GIB - alloc - 320 * b.MIB) if full else None,
            device_total=80 * b.GIB if full else None, context="v4 sample", pid=_PID, host=_HOST))
    b.write_jsonl(root / "v4.jsonl", records)


def _json_array(root: Path) -> None:
    b.write_json(root / "events.json", _records("fuzz-array"))


def _json_object(root: Path) -> None:
    b.write_json(root / "jax_events.json", _records("fuzz-object"), wrapper={"framework": "jax", "version": 1})


def _legacy_json(root: Path) -> None:
    records = [b.make_legacy_record(timestamp_s=b.START_NS / 1e9 + 0.25 * i, allocated=b.GIB + i * b.MIB,
                                    reserved=2 * b.GIB, device_id=0, rank=0, world_size=1)
               for i in range(SAMPLES)]
    b.write_json(root / "legacy_events.json", records)


def _cpu_csv(root: Path) -> None:
    b.write_cpu_tracker_export(root / "cpu_events.csv", fmt="csv", samples=SAMPLES, phases=b.DEFAULT_PHASES,
                               alerts=b.DEFAULT_ALERTS, host=_HOST, pid=_PID, session_id="fuzz-csv")


def _cpu_json(root: Path) -> None:
    b.write_cpu_tracker_export(root / "cpu_track.json", fmt="json", samples=SAMPLES, alerts=b.DEFAULT_ALERTS,
                               host=_HOST, pid=_PID, session_id="fuzz-cpu-json")


def _sink(root: Path) -> None:
    records = [*_records("fuzz-sink-a"), *b.timeline_records(
        samples=4, session_id="fuzz-sink-b", start_ns=b.START_NS + 10**10, pid=_PID, host=_HOST)]
    b.write_sink(root / "rank_0" / "telemetry", records=records, rollover_max_events=6, retention_max_files=100)


def _bundle(root: Path) -> None:
    stamps = [b.START_NS / 1e9 + 0.5 * i for i in range(SAMPLES)]
    b.write_diagnose_bundle(root / "rank_1" / "bundle", timestamps_s=stamps,
                            allocated=[b.GIB + i * b.MIB for i in range(SAMPLES)],
                            reserved=[b.GIB + (i + 64) * b.MIB for i in range(SAMPLES)], rank=1, world_size=2,
                            session_id="fuzz-bundle")


def _job(root: Path) -> None:
    write_job(root, world_size=3, samples=lambda rank: b.ramp(SAMPLES, base=b.GIB + rank * b.MIB))


_WRITERS: dict[str, Callable[[Path], None]] = {
    "jsonl_v3": _jsonl_v3, "jsonl_v2": _jsonl_v2, "jsonl_v4": _jsonl_v4, "json_array": _json_array,
    "json_object": _json_object, "legacy_json": _legacy_json, "cpu_csv": _cpu_csv, "cpu_json": _cpu_json,
    "sink": _sink, "bundle": _bundle, "job_3_ranks": _job,
}
_AUXILIARY = frozenset({"environment.json", "diagnostic_summary.json"})  # bundle files nothing reads


def _fmt(key: str) -> Fmt | None:
    name = key.rsplit("/", 1)[-1]
    if name in _AUXILIARY:
        return None
    if name == "manifest.json":
        return Fmt.MANIFEST
    if name == "telemetry_timeline.json":
        return Fmt.TIMELINE
    if name.endswith(".jsonl"):
        return Fmt.JSONL
    return Fmt.CSV if name.endswith(".csv") else Fmt.JSON


@cache
def shapes() -> tuple[Shape, ...]:
    """Every seed shape, written once per process (deterministic bytes)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="stormwatch-fuzz-corpus-") as tmp:
        for name, write in _WRITERS.items():
            root = Path(tmp) / name
            root.mkdir()
            write(root)
            files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
            targets = {key: fmt for key in files if (fmt := _fmt(key)) is not None}
            out.append(Shape(name, files, targets))
    return tuple(out)


def shape_named(name: str) -> Shape:
    return next(shape for shape in shapes() if shape.name == name)
