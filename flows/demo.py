"""An example fleet of stormlog-shaped jobs, written to a local folder.

Records follow stormlog's schema v3 (and its legacy and append-only sink shapes)
so the loader reads them as it reads real telemetry. Deterministic: the same
folder content on every run.

``restarted`` is a 4-rank job that ran twice: its first attempt ran out of memory on
rank 3 and was interrupted (each rank's sink marks its session ``interrupted``), the
restart (a new run id, so new sessions) completed cleanly. stormlog's default
selection picks the restart; diagnosing every session flags the job from attempt 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from stormwatch.events.sessions import SessionStatus

GIB = 1 << 30
START_NS = 1_700_000_000_000_000_000
STEP_NS = 50_000_000


def _record(
    job: str,
    rank: int,
    world: int,
    index: int,
    *,
    start_ns: int = START_NS,
    event_type: str = "sample",
    context: str | None = None,
    allocated: int,
    reserved: int,
    used: int,
    total: int | None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "schema_version": 3,
        "session_id": f"{job}-rank{rank}",
        "timestamp_ns": start_ns + index * STEP_NS,
        "event_type": event_type,
        "collector": "stormlog.cuda_tracker",
        "sampling_interval_ms": 50,
        "pid": 1000 + rank,
        "host": f"gpu-node-{rank // 4:02d}",
        "job_id": job,
        "rank": rank,
        "local_rank": rank % 4,
        "world_size": world,
        "device_id": rank % 4,
        "allocator_allocated_bytes": allocated,
        "allocator_reserved_bytes": reserved,
        "allocator_active_bytes": allocated,
        "allocator_inactive_bytes": reserved - allocated,
        "allocator_change_bytes": 0,
        "device_used_bytes": used,
        "device_free_bytes": None if total is None else total - used,
        "device_total_bytes": total,
        "context": context,
        "metadata": metadata or {"backend": "cuda"},
    }


def _rank_records(
    job: str,
    rank: int,
    world: int,
    samples: int,
    *,
    spike_at: int | None = None,
    drift_bytes: int = 0,
    oom: bool = False,
    stop: bool = True,
    start_ns: int = START_NS,
) -> list[dict[str, Any]]:
    """``stop``: the capture ends with a ``stop`` event (False: the process died first)."""
    total = 80 * GIB
    out = [_record(job, rank, world, 0, event_type="start", allocated=0, reserved=0, used=0, total=total,
                   start_ns=start_ns)]
    for i in range(1, samples + 1):
        allocated = 20 * GIB + (i % 10) * (64 << 20)
        reserved = allocated + 2 * GIB
        hidden = 6 * GIB if spike_at is not None and abs(i - spike_at) < 3 else 256 << 20
        used = reserved + hidden + i * drift_bytes  # drift: memory leaking outside the allocator
        context = "nccl all_reduce" if spike_at is not None and abs(i - spike_at) < 3 else "train_step"
        out.append(
            _record(
                job,
                rank,
                world,
                i,
                allocated=allocated,
                reserved=reserved,
                used=min(used, total),
                total=total,
                context=context,
                start_ns=start_ns,
            )
        )
    if oom:
        out.append(
            _record(
                job,
                rank,
                world,
                samples + 1,
                event_type="error",
                context="CUDA out of memory",
                allocated=78 * GIB,
                reserved=79 * GIB,
                used=80 * GIB,
                total=total,
                metadata={"oom_reason": "allocator_fragmentation"},
                start_ns=start_ns,
            )
        )
    if stop:
        out.append(_record(job, rank, world, samples + 2, event_type="stop", allocated=0, reserved=0, used=0,
                           total=total, start_ns=start_ns))
    return out


def _write(path: Path, data: bytes) -> None:
    """Write unless the file already holds exactly ``data`` (a rerun leaves inputs, and mtimes, alone)."""
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    _write(path, b"".join(orjson.dumps(r) + b"\n" for r in records))


def _interrupted_sink(folder: Path, records: list[dict[str, Any]]) -> None:
    """An append-only sink (manifest + one segment, lines with sorted keys as the sink writes them)
    whose one session a later start found still running, and so marked ``interrupted``."""
    segment = b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in records)
    first, last = records[0], records[-1]
    session = {key: first[key] for key in ("session_id", "host", "pid", "job_id", "rank", "local_rank", "world_size")}
    manifest = {
        "schema_version": 2,
        "format": "stormlog.append_only_telemetry_sink",
        "sessions": [{**session, "status": SessionStatus.INTERRUPTED.value, "started_at_ns": first["timestamp_ns"],
                      "ended_at_ns": last["timestamp_ns"], "source": "stormlog.cuda_tracker"}],
        "segments": [{"filename": "segment-000001.jsonl", "event_count": len(records), "size_bytes": len(segment),
                      "closed": True, "session_id": first["session_id"]}],
    }
    _write(folder / "segment-000001.jsonl", segment)
    _write(folder / "manifest.json", orjson.dumps(manifest, option=orjson.OPT_INDENT_2))


def write_demo_fleet(root: Path, *, samples: int = 400) -> list[str]:
    """Write ``root/jobs/<job_id>/...`` for a handful of varied jobs; returns job ids."""
    jobs = root / "jobs"
    for rank in range(8):
        _jsonl(
            jobs / "collective-spike" / f"rank_{rank}" / "telemetry.jsonl",
            _rank_records("collective-spike", rank, 8, samples, spike_at=samples // 2),
        )
    for rank in (0, 1, 3):
        _jsonl(
            jobs / "missing-ranks" / f"rank_{rank}" / "telemetry.jsonl",
            _rank_records("missing-ranks", rank, 4, samples),
        )
    for rank in range(2):
        _jsonl(
            jobs / "drifting-rank" / f"rank_{rank}" / "telemetry.jsonl",
            _rank_records("drifting-rank", rank, 2, samples, drift_bytes=(32 << 20) if rank == 1 else 0),
        )
    _jsonl(jobs / "oom" / "rank_0" / "telemetry.jsonl", _rank_records("oom", 0, 1, samples, oom=True))
    restart_ns = START_NS + (samples + 600) * STEP_NS  # the restart began half a minute after the OOM
    for rank in range(4):
        first = _rank_records("restarted-run1", rank, 4, samples, oom=rank == 3, stop=False)
        _interrupted_sink(jobs / "restarted" / f"rank_{rank}" / "attempt-1", first)
        _jsonl(jobs / "restarted" / f"rank_{rank}" / "attempt-2" / "telemetry.jsonl",
               _rank_records("restarted-run2", rank, 4, samples, start_ns=restart_ns))
    legacy = [
        {"timestamp": 1_700_000_000.0 + i * 0.5, "memory_allocated": GIB + i * (1 << 20), "device": "cpu"}
        for i in range(50)
    ]
    _write(jobs / "legacy" / "tracker_events.json", orjson.dumps(legacy))
    broken = _rank_records("broken-artifact", 0, 2, samples)
    _jsonl(jobs / "broken-artifact" / "rank_0" / "telemetry.jsonl", broken)
    lines = [orjson.dumps(r) for r in _rank_records("broken-artifact", 1, 2, samples)]
    lines[10] = b'{"schema_version": 3, "timestamp_ns": oops'
    _write(jobs / "broken-artifact" / "rank_1" / "telemetry.jsonl", b"\n".join(lines) + b"\n")
    return sorted(p.name for p in jobs.iterdir())
