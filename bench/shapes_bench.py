"""Shapes benchmark: one job in every artifact shape stormlog writes, each against its own parse floor.

    python bench/shapes_bench.py [--ranks 8] [--samples 5000] [--seed 0] [--repeat 3]
                                 [--shapes jsonl-text,jsonl-null,csv,json,sink,sink-restart,bundle,v4,
                                           v4-csv,oom-dump,mlx]
                                 [--skip-reference] [--skip-scaling] [--scaling-factors 0.5,1,2]
                                 [--keep DIR]

One ``jobgen.py --hidden-memory`` job (8 ranks x 5,000 samples by default) is written once
per shape, one job folder each (``DIR/<shape>/rank_N/...``):

  jsonl-text  jobgen's records as they are: rank_N/telemetry.jsonl, text contexts,
              tracker-like metadata on every record
  jsonl-null  the same with ``"context": null`` on every ``sample`` record
  csv         rank_N/events.csv as ``MemoryTracker.export_events(path, "csv")`` writes it:
              ``pd.DataFrame(records).to_csv(path, index=False)`` (metadata a Python literal,
              nullable int columns as floats)
  json        rank_N/events.json as ``export_events(path, "json")``:
              ``json.dump(records, f, indent=2, default=str)``
  sink        rank_N/telemetry/: stormlog's AppendOnlyTelemetrySink (tests.builders.write_sink),
              ~4 rotated segment-*.jsonl + manifest.json per rank
  sink-restart  the sink's writer run twice per rank (write_restarted_sink): a session left running,
              then a restarted one appended; ~16 segments, retention deleting the oldest; a rollups.json
  bundle      rank_N/: a diagnose bundle (tests.builders.write_diagnose_bundle: environment.json,
              telemetry_timeline.json with the CUDA tracker's int shape over the sample records,
              diagnostic_summary.json, manifest.json from stormlog's session summary). As diagnose
              writes them: the rank comes from the rank_N folder, and with no job_id the ranks do
              not merge into one distributed session (both loaders select one rank's session);
              a timeline has no device counters, so there is no hidden memory to find
  v4          rank_N/telemetry.jsonl in schema 4 (stormlog 0.4.x): active/inactive null (the
              collector declares them unsupported) and metadata.memory_capabilities; laid out as
              tests.builders.make_v4_record does, a sample of records checked against it and
              check_v4_record
  v4-csv      rank_N/events.csv as 0.4.3's ``export_events(path, "csv")`` writes the v4 records above
              (pandas ``to_csv``: metadata a Python literal, so capabilities are inferred as 0.4.3 does)
  mlx         rank_N/tracking.json as stormlog 0.4.3's MLX tracker writes it (``json.dump(..., indent=2)``
              of ``{"telemetry_events": [...]}``, the v4 records above; its ``session_summary`` left
              out). 0.3.5 cannot read it, so the reference shows ``-``
  oom-dump    sink's layout, and on the last rank an OOM flight-recorder dump (write_oom_dump):
              its ring buffer (the last 10,000 sink records) copied out as 0.4.3 lays it out, in the
              legacy record shape (float seconds, ``memory_*``) that 0.4.3's recorder writes.
              The reference reads the sinks alone (each event once); stormwatch the whole folder,
              so "agree" says the dump's copies were not counted twice

Per shape, one row:
  reference    stormlog 0.3.5 load_distributed_artifacts(rank inputs) + build_distributed_model,
               once, in a fresh subprocess (model_bench.run_reference; ``--skip-reference``).
               0.3.5 cannot read schema 4 ("Unsupported schema_version"), so v4 shows ``-``
  cold         stormwatch load_artifacts([shape folder]) + build_model in a FRESH subprocess,
               timed after its imports (model_bench.run_stormwatch_memory), best of --repeat;
               the same process gives the peak RSS (VmHWM minus the RSS after imports)
  warm         the same calls in this process after one untimed call, best of --repeat
  floor        that shape's own raw parse, reading its files (page cache warm, as for stormwatch):
               pyarrow.json.read_json per file (jsonl, sink segments, v4), pyarrow.csv.read_csv
               per file (csv), orjson.loads of each whole file (json; bundle timeline + manifest)
  check        the model's rows and indicators against the reference's (model_bench.compare_models,
               details text excluded); reported on its own line, not a target: on csv stormwatch
               recovers the Python-literal metadata (ast.literal_eval, src/stormwatch/formats/csv_export.py)
               that 0.3.5 drops (json.loads fails, metadata {}), so it finds phase paths the
               reference cannot
Warm, floor and cold take turns in every round, so a busy spell of the shared machine hits all.

Targets per shape: warm and cold <= 2x floor; stormwatch's peak RSS below the input's size.
Scaling (csv and json, unless ``--skip-scaling``): warm time at --scaling-factors x the samples,
fitted exponent of time ~ events**k, target k <= 1.15.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]  # jobgen, load_bench, model_bench; in-tree stormwatch
from jobgen import HIDDEN_SAMPLE_META, write_job  # noqa: E402
from load_bench import fmt_s, interleaved_best  # noqa: E402
from model_bench import (  # noqa: E402
    LINEAR_EXPONENT_MAX,
    compare_models,
    fmt_mb,
    import_model,
    loglog_slope,
    run_reference,
    run_stormwatch_memory,
    stormwatch_pipeline,
)

SHAPES = ("jsonl-text", "jsonl-null", "csv", "json", "sink", "sink-restart", "bundle", "v4", "v4-csv", "oom-dump",
          "mlx")
#: stormlog 0.4.3's OOMFlightRecorder default ring buffer (events copied out at an OOM).
DUMP_BUFFER = 10_000
SCALING_SHAPES = ("csv", "json")
FLOOR_TARGET = 2.0  # stormwatch warm and cold <= FLOOR_TARGET x the shape's parse floor
MANIFEST = "shapes.json"  # in the job root: which shapes were written with which parameters
V4_CHECK_EVERY = 997  # check_v4_record + make_v4_record comparison on every N-th record (and the first/last)


@dataclass(frozen=True)
class ShapeJob:
    """One shape's job folder, what the reference gets (rank by rank) and what the floor parses."""

    shape: str
    folder: Path
    ref_inputs: list[Path]
    floor_files: list[Path]
    input_bytes: int
    records: int


# --- writing the shapes ---------------------------------------------------------------------


def _rank_dirs(folder: Path) -> list[Path]:
    dirs = [p for p in folder.glob("rank_*") if p.is_dir()]
    return sorted(dirs, key=lambda p: int(p.name.removeprefix("rank_")))


def _read_records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line]


def _write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    dumps = orjson.dumps  # jobgen's line format (compact, key order kept)
    path.write_bytes(b"".join(dumps(rec) + b"\n" for rec in records))


def write_null_context(path: Path, records: list[dict[str, Any]]) -> None:
    _write_lines(path, [{**rec, "context": None} if rec["event_type"] == "sample" else rec for rec in records])


def write_tracker_csv(path: Path, records: list[dict[str, Any]]) -> None:
    """stormlog/tracker.py MemoryTracker.export_events(path, "csv")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(records)
    df.to_csv(str(path), index=False)


def write_tracker_json(path: Path, records: list[dict[str, Any]]) -> None:
    """stormlog/tracker.py MemoryTracker.export_events(path, "json")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(records, f, indent=2, default=str)


def write_sink_dir(path: Path, records: list[dict[str, Any]]) -> None:
    """stormlog's AppendOnlyTelemetrySink, rotating into ~4 segments (none deleted)."""
    from tests.builders import write_sink

    write_sink(path, records=records, rollover_max_events=len(records) // 4 + 1, retention_max_files=10_000)


def write_restarted_sink(path: Path, records: list[dict[str, Any]]) -> None:
    """A sink the rank wrote twice: its first half as one session left running (the process died),
    then, after a restart, its second half as a new session appended to the same sink (which turns
    the first "interrupted"); rotating into ~16 segments of which retention keeps the newest 12; and
    a ``rollups.json`` as 0.4.3's sink writes beside them (a summary, not events)."""
    from tests.builders import write_sink

    half = len(records) // 2
    restarted = [{**rec, "session_id": f"{rec['session_id']}-restart"} for rec in records[half:]]
    every = len(records) // 16 + 1
    write_sink(path, records=records[:half], rollover_max_events=every, retention_max_files=12, close_status=None)
    write_sink(path, records=restarted, rollover_max_events=every, retention_max_files=12)
    segments = sorted(path.glob("segment-*.jsonl"))
    rollups = {"format": "stormlog.telemetry_rollups", "schema_version": 1,
               "generated_at_ns": records[-1]["timestamp_ns"],
               "coverage": {"retained_segment_count": len(segments),
                            "retained_segment_filenames": [seg.name for seg in segments]},
               "sessions": [{"session_id": records[0]["session_id"]}, {"session_id": restarted[0]["session_id"]}]}
    (path / "rollups.json").write_text(json.dumps(rollups, indent=2, sort_keys=True))


def write_oom_dump(root: Path, records: list[dict[str, Any]], seconds: list[float], *, rank: int) -> None:
    """An OOM flight-recorder dump as stormlog 0.4.3's ``OOMFlightRecorder.dump`` lays it out
    (``oom_dump_<stamp>_<pid>_<backend>_<seq>/``, each file ``json.dump(..., indent=2, default=str)``):
    the last :data:`DUMP_BUFFER` of the rank's records (``seconds``: their stamps) as ``events.json``
    in the legacy shape the recorder's ring buffer holds (``TrackingEvent.to_dict()``: float seconds,
    ``memory_*``, ``device_*``, ``backend``), copies of what the sink holds; and the metadata of a
    CUDA OOM. Written by hand: 0.4.3 is not importable beside 0.3.5."""
    folder = root / f"oom_dump_20231114T221320Z_{4242 + rank}_cuda_1"
    folder.mkdir(parents=True)
    events = [_legacy_event(rec, stamp) for rec, stamp in zip(records[-DUMP_BUFFER:], seconds[-DUMP_BUFFER:],
                                                               strict=True)]
    session = events[-1].get("session_id") if events else None
    metadata = {"reason": "torch.cuda.OutOfMemoryError", "exception_type": "OutOfMemoryError",
                "exception_module": "torch.cuda",
                "exception_message": f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU {rank} has a total capacity "
                                     "of 80.00 GiB of which 1.10 GiB is free.",
                "context": "train/backward", "backend": "cuda", "captured_event_count": len(events),
                "session_id": session, "session_status": "running", "session": None,
                "custom_metadata": {"rank": rank, "session_id": session, "total_memory_bytes": 80 * 1024**3}}
    for name, payload in (("events.json", events), ("metadata.json", metadata),
                          ("environment.json", {"pid": 4242 + rank, "cwd": "/", "system": {}}),
                          ("manifest.json", {"schema_version": 2, "bundle_name": folder.name, "backend": "cuda",
                                             "event_count": len(events), "session_id": session,
                                             "files": ["manifest.json", "events.json", "metadata.json",
                                                       "environment.json"]})):
        with open(folder / name, "w") as handle:
            json.dump(payload, handle, indent=2, default=str)


def _legacy_event(record: dict[str, Any], seconds: float) -> dict[str, Any]:
    """A v3 record in the legacy shape of 0.4.3's ``TrackingEvent.to_dict()``."""
    return {"timestamp": seconds, "event_type": record["event_type"], "session_id": record["session_id"],
            "memory_allocated": record["allocator_allocated_bytes"],
            "memory_reserved": record["allocator_reserved_bytes"], "memory_change": record["allocator_change_bytes"],
            "device_id": record["device_id"], "context": record["context"], "job_id": record.get("job_id"),
            "rank": record.get("rank"), "local_rank": record.get("local_rank"),
            "world_size": record.get("world_size"), "metadata": record.get("metadata") or {},
            "active_memory": record.get("allocator_active_bytes"),
            "inactive_memory": record.get("allocator_inactive_bytes"), "device_used": record["device_used_bytes"],
            "device_free": record.get("device_free_bytes"), "device_total": record.get("device_total_bytes"),
            "backend": "cuda"}


def write_bundle(path: Path, records: list[dict[str, Any]]) -> None:
    """A diagnose bundle over the sample records (the CUDA tracker's int timeline).

    As ``stormlog diagnose`` writes it: no rank in the timeline (stormlog's loader takes it
    from the ``rank_N`` folder) and no job_id in the manifest's session."""
    from tests.builders import write_diagnose_bundle

    samples = [rec for rec in records if rec["event_type"] == "sample"]
    first = samples[0]
    write_diagnose_bundle(
        path,
        timestamps_s=[rec["timestamp_ns"] / 1e9 for rec in samples],
        allocated=[rec["allocator_allocated_bytes"] for rec in samples],
        reserved=[rec["allocator_reserved_bytes"] for rec in samples],
        session_id=f"diagnose-{first['session_id']}",
        host=first["host"],
        pid=first["pid"],
        created_iso=time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(samples[-1]["timestamp_ns"] / 1e9 + 5)),
    )


def v4_capabilities() -> dict[str, Any]:
    """The CUDA collector's memory capabilities with active/inactive unsupported."""
    from tests.builders import CUDA_CAPABILITIES

    return {
        **CUDA_CAPABILITIES,
        "sampling_source": HIDDEN_SAMPLE_META["sampling_source"],
        "supports_allocator_active": False,
        "supports_allocator_inactive": False,
    }


def to_v4(rec: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
    """A jobgen v3 record as schema 4, with make_v4_record's key order (that of v3)."""
    return {
        **rec,
        "schema_version": 4,
        "allocator_active_bytes": None,
        "allocator_inactive_bytes": None,
        "metadata": {**rec["metadata"], "memory_capabilities": caps},
    }


def check_v4_sample(records: list[dict[str, Any]], caps: dict[str, Any]) -> int:
    """check_v4_record, and equality (key order included) with make_v4_record, on a sample."""
    from tests.builders import check_v4_record, make_v4_record

    picked = {0, len(records) - 1, *range(0, len(records), V4_CHECK_EVERY)}
    seen_kinds: set[str] = set()
    for i, rec in enumerate(records):  # one record of every event type too
        if rec["event_type"] not in seen_kinds:
            seen_kinds.add(rec["event_type"])
            picked.add(i)
    for i in sorted(picked):
        rec = records[i]
        check_v4_record(rec)
        meta = {k: v for k, v in rec["metadata"].items() if k != "memory_capabilities"}
        again = make_v4_record(
            capabilities=caps, session_id=rec["session_id"], timestamp_ns=rec["timestamp_ns"],
            event_type=rec["event_type"], collector=rec["collector"],
            sampling_interval_ms=rec["sampling_interval_ms"], pid=rec["pid"], host=rec["host"],
            device_id=rec["device_id"], allocated=rec["allocator_allocated_bytes"],
            reserved=rec["allocator_reserved_bytes"], active=rec["allocator_active_bytes"],
            inactive=rec["allocator_inactive_bytes"], change=rec["allocator_change_bytes"],
            device_used=rec["device_used_bytes"], device_free=rec["device_free_bytes"],
            device_total=rec["device_total_bytes"], context=rec["context"], job_id=rec["job_id"],
            rank=rec["rank"], local_rank=rec["local_rank"], world_size=rec["world_size"], metadata=meta,
        )
        if again != rec or list(again) != list(rec):
            raise ValueError(f"v4 record {i} differs from make_v4_record's")
    return len(picked)


def write_shape(shape: str, folder: Path, source: list[Path]) -> int:
    """Write ``shape`` into ``folder`` from the jsonl-text rank files; returns the records written."""
    total = 0
    caps = v4_capabilities() if shape in ("v4", "v4-csv", "mlx") else {}
    for rank, src in enumerate(source):
        records = _read_records(src)
        rank_dir = folder / f"rank_{rank}"
        if shape == "jsonl-null":
            write_null_context(rank_dir / "telemetry.jsonl", records)
        elif shape == "csv":
            write_tracker_csv(rank_dir / "events.csv", records)
        elif shape == "json":
            write_tracker_json(rank_dir / "events.json", records)
        elif shape == "sink":
            write_sink_dir(rank_dir / "telemetry", records)
        elif shape == "sink-restart":
            write_restarted_sink(rank_dir / "telemetry", records)
        elif shape == "bundle":
            write_bundle(rank_dir, records)
            records = [rec for rec in records if rec["event_type"] == "sample"]
        elif shape == "v4":
            records = [to_v4(rec, caps) for rec in records]
            check_v4_sample(records, caps)
            _write_lines(rank_dir / "telemetry.jsonl", records)
        elif shape == "v4-csv":
            records = [to_v4(rec, caps) for rec in records]
            write_tracker_csv(rank_dir / "events.csv", records)
        elif shape == "mlx":
            records = [to_v4(rec, caps) for rec in records]
            rank_dir.mkdir(parents=True, exist_ok=True)
            with open(rank_dir / "tracking.json", "w") as handle:  # as 0.4.3's MLX tracker writes it
                json.dump({"telemetry_events": records}, handle, indent=2, allow_nan=False)
        elif shape == "oom-dump":
            # 0.4.3 stamps an event once, in float seconds: the sink stores int(seconds * 1e9), the dump the seconds
            seconds = [rec["timestamp_ns"] / 1e9 for rec in records]
            records = [{**rec, "timestamp_ns": int(stamp * 1e9)} for rec, stamp in zip(records, seconds, strict=True)]
            write_sink_dir(rank_dir / "telemetry", records)
            if rank == len(source) - 1:
                write_oom_dump(rank_dir / "oom_dumps", records, seconds, rank=rank)
        else:
            raise ValueError(f"unknown shape {shape!r}")
        total += len(records)
    return total


def shape_job(shape: str, folder: Path, records: int) -> ShapeJob:
    """What is on disk for ``shape`` (rank order), as the reference and the floor see it."""
    ranks = _rank_dirs(folder)
    if shape in ("jsonl-text", "jsonl-null", "v4"):
        ref_inputs = [d / "telemetry.jsonl" for d in ranks]
        floor_files = ref_inputs
    elif shape in ("csv", "json", "v4-csv"):
        ref_inputs = [d / f"events.{shape.removeprefix('v4-')}" for d in ranks]
        floor_files = ref_inputs
    elif shape in ("sink", "sink-restart", "oom-dump"):  # the reference reads the sinks: the job's events, once
        ref_inputs = [d / "telemetry" for d in ranks]
        floor_files = [seg for d in ref_inputs for seg in sorted(d.glob("segment-*.jsonl"))]
    elif shape == "mlx":
        ref_inputs = [d / "tracking.json" for d in ranks]
        floor_files = ref_inputs
    elif shape == "bundle":
        ref_inputs = ranks
        floor_files = [d / name for d in ranks for name in ("telemetry_timeline.json", "manifest.json")]
    else:
        raise ValueError(f"unknown shape {shape!r}")
    input_bytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return ShapeJob(shape, folder, ref_inputs, floor_files, input_bytes, records)


def prepare(root: Path, shapes: list[str], *, ranks: int, samples: int, seed: int) -> dict[str, ShapeJob]:
    """Write (or reuse, when ``root/shapes.json`` says they were written with these parameters) the shapes."""
    params = {"ranks": ranks, "samples": samples, "seed": seed}
    manifest_path = root / MANIFEST
    written: dict[str, Any] = {}
    if manifest_path.exists():
        old = json.loads(manifest_path.read_text())
        if old.get("params") == params:
            written = old.get("shapes", {})
    root.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        manifest_path.write_text(json.dumps({"params": params, "shapes": written}, indent=2))

    base = root / "jsonl-text"
    if "jsonl-text" not in written:  # every other shape is made from it
        shutil.rmtree(base, ignore_errors=True)
        t0 = time.perf_counter()
        files = write_job(base, ranks=ranks, samples=samples, seed=seed, hidden=True)
        records = sum(p.read_bytes().count(b"\n") for p in files)
        written["jsonl-text"] = {"records": records, "write_s": round(time.perf_counter() - t0, 2)}
        save()
    source = [d / "telemetry.jsonl" for d in _rank_dirs(base)]
    jobs: dict[str, ShapeJob] = {}
    for shape in shapes:
        folder = root / shape
        if shape not in written:
            shutil.rmtree(folder, ignore_errors=True)
            t0 = time.perf_counter()
            records = write_shape(shape, folder, source)
            written[shape] = {"records": records, "write_s": round(time.perf_counter() - t0, 2)}
            save()
        jobs[shape] = shape_job(shape, folder, written[shape]["records"])
    took = ", ".join(f"{s} {written[s]['write_s']:.1f} s" for s in dict.fromkeys(["jsonl-text", *shapes]))
    print(f"job root: {root} ({ranks} ranks x {samples:,} samples, seed {seed}; written: {took})")
    return jobs


# --- the floors -------------------------------------------------------------------------------


def floor_fn(job: ShapeJob) -> tuple[str, Callable[[], int]]:
    """(label, callable) of the shape's raw parse: every file read and parsed, rows counted."""
    files = list(job.floor_files)
    if job.shape in ("csv", "v4-csv"):
        import pyarrow.csv as pcsv

        return "pyarrow.csv.read_csv", lambda: sum(pcsv.read_csv(str(p)).num_rows for p in files)
    if job.shape in ("json", "bundle", "mlx"):
        loads = orjson.loads
        return "orjson.loads(file)", lambda: sum(len(loads(p.read_bytes())) for p in files)
    import pyarrow.json as pj

    return "pyarrow.json.read_json", lambda: sum(pj.read_json(str(p)).num_rows for p in files)


# --- measuring ----------------------------------------------------------------------------------


@dataclass
class Result:
    shape: str
    job: ShapeJob
    ref_s: float | None = None
    ref_note: str = ""
    cold_s: float | None = None
    warm_s: float | None = None
    floor_s: float | None = None
    floor_label: str = ""
    peak_rss: int | None = None
    agree: str = "-"
    diffs: tuple[str, ...] = ()
    note: str = ""


def measure(job: ShapeJob, args: argparse.Namespace, build_model: Callable[..., Any]) -> Result:
    res = Result(job.shape, job)
    pipeline = stormwatch_pipeline(job.folder, build_model)
    try:
        model = pipeline()  # untimed: warms this process's caches; its model is checked below
    except Exception as exc:
        res.note = f"stormwatch failed ({type(exc).__name__}: {exc})"
        return res
    label, floor = floor_fn(job)
    res.floor_label = label
    floor()  # untimed, like the warm-up call above
    warm: list[float] = []
    floors: list[float] = []
    cold: list[float] = []
    peaks: list[int] = []
    for _ in range(max(args.repeat, 1)):  # rounds: warm, floor, cold subprocess
        timed = interleaved_best(1, {"warm": pipeline, "floor": floor})
        for name, into in (("warm", warm), ("floor", floors)):
            seconds, _, note = timed[name]
            if seconds is None:
                res.note = f"{name} {note}"
            else:
                into.append(seconds)
        try:
            run = run_stormwatch_memory(job.folder, "rss")
        except RuntimeError as exc:
            res.note = f"cold run failed ({exc})"
            continue
        cold.append(float(run["seconds"]))
        peaks.append(max(run["memory"]["peak_rss_delta_bytes"].values()))
    res.warm_s = min(warm, default=None)
    res.floor_s = min(floors, default=None)
    res.cold_s = min(cold, default=None)
    res.peak_rss = max(peaks, default=None)

    if job.shape == "bundle":
        res.note = "no job_id in diagnose manifests: ranks stay separate sessions, the model is the selected one's"
    if job.shape in ("v4", "v4-csv", "mlx"):
        res.ref_note = "stormlog 0.3.5 cannot read schema 4 (Unsupported schema_version)"
    elif args.skip_reference:
        res.ref_note = "skipped (--skip-reference)"
    else:
        try:
            ref = run_reference(job.ref_inputs)
        except RuntimeError as exc:
            res.ref_note = f"failed ({exc})"
        else:
            res.ref_s = float(ref["seconds"])
            diffs = compare_models(ref, model)
            res.agree = "AGREE" if not diffs else f"DIFFER ({len(diffs)})"
            res.diffs = tuple(diffs)
            tally = ref["tally"]
            found = sum(tally["collective_attributions"].values())
            gaps = sum(tally["gap_findings"].values())
            res.ref_note = (f"{ref['events']:,} events, {found} collective attributions, {gaps} gap findings, "
                            f"{len(ref['indicators'])} indicators")
    return res


def fmt_size(n_bytes: float | None) -> str:
    """MB with one decimal below 10 MB (small jobs), else as model_bench.fmt_mb."""
    if n_bytes is not None and n_bytes < 10e6:
        return f"{n_bytes / 1e6:.1f} MB"
    return fmt_mb(n_bytes)


def ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def print_table(results: list[Result]) -> None:
    head = (f"{'shape':<13}{'records':>9}{'input':>9}{'reference':>11}{'cold':>9}{'warm':>9}{'floor':>9}"
            f"{'warm/fl':>9}{'cold/fl':>9}{'peak RSS':>10}  {'model vs ref'}")
    print(head)
    print("-" * (len(head) + 4))
    for r in results:
        print(f"{r.shape:<13}{r.job.records:>9,}{fmt_size(r.job.input_bytes):>9}{fmt_s(r.ref_s):>11}"
              f"{fmt_s(r.cold_s):>9}{fmt_s(r.warm_s):>9}{fmt_s(r.floor_s):>9}"
              f"{fmt_x(ratio(r.warm_s, r.floor_s)):>9}{fmt_x(ratio(r.cold_s, r.floor_s)):>9}"
              f"{fmt_size(r.peak_rss):>10}  {r.agree}")
    print()
    for r in results:
        notes = [f"floor {r.floor_label}", f"reference: {r.ref_note}"]
        if r.note:
            notes.append(r.note)
        print(f"  {r.shape:<13}" + "; ".join(notes))
        for line in r.diffs[:8]:
            print(f"      {line}")
        if len(r.diffs) > 8:
            print(f"      ... {len(r.diffs) - 8} more")


def targets(results: list[Result]) -> bool:
    ok = True
    print(f"\ntargets: warm and cold <= {FLOOR_TARGET:g}x the shape's floor; peak RSS below the input's size")
    for r in results:
        warm_x, cold_x = ratio(r.warm_s, r.floor_s), ratio(r.cold_s, r.floor_s)
        speed = warm_x is not None and cold_x is not None and warm_x <= FLOOR_TARGET and cold_x <= FLOOR_TARGET
        memory = r.peak_rss is not None and r.peak_rss < r.job.input_bytes
        ok &= speed and memory
        print(f"  {r.shape:<13}speed (warm {fmt_x(warm_x)}, cold {fmt_x(cold_x)}): {'met' if speed else 'NOT met'}"
              f"; memory ({fmt_size(r.peak_rss)} vs {fmt_size(r.job.input_bytes)}): {'met' if memory else 'NOT met'}"
              + ("" if r.agree == "-" else f"; model: {r.agree}"))
    return ok


def run_scaling(shape: str, args: argparse.Namespace, build_model: Callable[..., Any], base: Result | None) -> bool:
    """Warm stormwatch (and the floor, in turns) at --scaling-factors x the samples; fitted exponent."""
    factors = [float(f) for f in args.scaling_factors.split(",") if f.strip()]
    points: list[tuple[int, float]] = []
    floor_points: list[tuple[int, float]] = []
    cells: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"stormwatch-shapes-{shape}-") as tmp:
        for factor in factors:
            samples = max(200, round(args.samples * factor))
            if base is not None and samples == args.samples and base.warm_s and base.floor_s:
                job, warm_s, floor_s = base.job, base.warm_s, base.floor_s  # measured above
            else:
                root = Path(tmp) / f"s{samples}"
                job = prepare_quiet(root, shape, ranks=args.ranks, samples=samples, seed=args.seed)
                pipeline = stormwatch_pipeline(job.folder, build_model)
                pipeline()
                timed = interleaved_best(args.repeat, {"warm": pipeline, "floor": floor_fn(job)[1]})
                warm_s, floor_s = timed["warm"][0], timed["floor"][0]
                shutil.rmtree(root, ignore_errors=True)
            if warm_s is None:
                cells.append(f"{job.records:,} events: failed")
                continue
            points.append((job.records, warm_s))
            if floor_s is not None:
                floor_points.append((job.records, floor_s))
            cells.append(f"{job.records:,} ev {fmt_s(warm_s)} (floor {fmt_s(floor_s)})")
    if len(points) < 2:
        print(f"  {shape:<6}too few points ({'; '.join(cells)}): NOT met")
        return False
    k = loglog_slope(points)
    floor_k = f"{loglog_slope(floor_points):.2f}" if len(floor_points) >= 2 else "-"
    met = k <= LINEAR_EXPONENT_MAX
    print(f"  {shape:<6}{'; '.join(cells)}")
    print(f"  {'':<6}time ~ events^{k:.2f} (floor ^{floor_k}), target <= {LINEAR_EXPONENT_MAX}: "
          f"{'met' if met else 'NOT met'}")
    return met


def prepare_quiet(root: Path, shape: str, *, ranks: int, samples: int, seed: int) -> ShapeJob:
    base = root / "jsonl-text"
    files = write_job(base, ranks=ranks, samples=samples, seed=seed, hidden=True)
    if shape == "jsonl-text":
        return shape_job(shape, base, sum(p.read_bytes().count(b"\n") for p in files))
    records = write_shape(shape, root / shape, files)
    shutil.rmtree(base, ignore_errors=True)
    return shape_job(shape, root / shape, records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=5_000, help="sample events per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="rounds: best of N for warm, cold and floor")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma list of {', '.join(SHAPES)}")
    parser.add_argument("--skip-reference", action="store_true", help="skip stormlog 0.3.5 (a subprocess per shape)")
    parser.add_argument("--skip-scaling", action="store_true", help="skip the csv/json scaling runs")
    parser.add_argument("--scaling-factors", default="0.5,1,2", help="scaling sizes, as factors of --samples")
    parser.add_argument("--keep", type=Path, help="write the job folders here and keep them (reused if present)")
    args = parser.parse_args(argv)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown or not shapes:
        parser.error(f"unknown shapes {unknown}; choose from {', '.join(SHAPES)}")
    build_model = import_model()

    tmp = None
    if args.keep is None:
        tmp = tempfile.TemporaryDirectory(prefix="stormwatch-shapes-")
        root = Path(tmp.name)
    else:
        root = args.keep.resolve()
    try:
        jobs = prepare(root, shapes, ranks=args.ranks, samples=args.samples, seed=args.seed)
        print(f"timing: {args.repeat} rounds of (warm, floor, cold subprocess), best of each; "
              f"reference once per shape, in a subprocess\n")
        results = [measure(jobs[shape], args, build_model) for shape in shapes]
        print_table(results)
        ok = targets(results)
        scaled = [s for s in SCALING_SHAPES if s in shapes]
        if not args.skip_scaling and scaled:
            print(f"\nscaling: warm, best of {args.repeat} (floor in turns), at {args.scaling_factors}"
                  f" x {args.samples:,} samples per rank")
            by_shape = {r.shape: r for r in results}
            for shape in scaled:
                ok &= run_scaling(shape, args, build_model, by_shape.get(shape))
        skipped = [name for name, flag in (("reference", args.skip_reference), ("scaling", args.skip_scaling)) if flag]
        scope = f" (measured ones; skipped: {', '.join(skipped)})" if skipped else ""
        checked = [r for r in results if r.agree != "-"]
        differ = [r.shape + (" (metadata recovered by design)" if r.shape == "csv" else "")
                  for r in checked if r.agree != "AGREE"]
        if checked:
            print(f"\nmodel vs reference: {len(checked) - len(differ)} of {len(checked)} shapes agree"
                  + (f"; differ: {', '.join(differ)}" if differ else ""))
        print(f"\nall targets: {'MET' if ok else 'NOT MET'}{scope}")
        return 0 if ok else 1
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
