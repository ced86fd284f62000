"""Synthetic distributed stormlog job: one schema-v3 telemetry JSONL file per rank.

Records mirror what stormlog 0.3.5's CUDA ``MemoryTracker`` writes to its sink
(``telemetry_event_to_dict`` of the event built by ``_telemetry_record_from_event``):
same key order, same metadata layout (event keys, then collector health, then
collector capabilities), ``device_used = max(allocated, reserved)`` as the CUDA
collector reports it, and a zeroed ``start`` snapshot. Built with numpy + orjson;
no stormlog objects are created per event.

``--hidden-memory`` (opt in; the default output is unchanged, byte for byte) models a
collector that reads device usage from the driver (``mem_get_info``), so
``device_used - allocator_reserved`` is memory outside the caching allocator:
  * a per-rank baseline of 384-552 MiB (CUDA context + NCCL communicators) with a few
    MiB of noise, so every sample is "significant" under the medium collective preset;
  * an NCCL all_reduce burst every 400 samples on every rank (same sample indices,
    +0.9-1.6 GiB for 2 samples); two bursts in three carry a collective-token marker
    (a ``collective`` event "nccl all_reduce ..." before the burst, or the burst
    sample's context), the third has none;
  * a 512 MiB tensor-parallel all_gather burst (one sample) per rank pair (0-1, 2-3, ...)
    every 400 samples, pairs 600 ms apart, marked in the sample's context;
  * a synchronised ~4.75 GiB hidden spike at the mid-run allocation spike (gap ratio
    above 5% of the 80 GiB device), with an NCCL ``warning`` on every rank;
  * a linear drift of +6 GiB over the run on one rank (``DRIFT_RANK``).

    python bench/jobgen.py OUT --ranks 8 --samples 20000 [--seed 0] [--hidden-memory]
"""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import orjson

GIB = 1024**3
MIB = 1024**2
DEVICE_TOTAL = 80 * GIB
INTERVAL_S = 0.05
GPUS_PER_NODE = 4
COLLECTOR = "stormlog.cuda_tracker"
# fmt: off
SAMPLE_META = {  # healthy CollectorHealthState().to_dict() + CUDA capability_metadata
    "collector_health_status": "healthy", "telemetry_partial": False,
    "collector_partial_fields": [], "collector_last_error": None,
    "collector_consecutive_failures": 0, "collector_next_retry_epoch_s": None,
    "backend": "cuda", "supports_device_total": True, "supports_device_free": True,
    "sampling_source": "torch.cuda.memory_allocated/reserved",
}
# --hidden-memory: device usage read from the driver, not max(allocated, reserved)
HIDDEN_SAMPLE_META = {**SAMPLE_META, "sampling_source": "torch.cuda.mem_get_info + memory_allocated/reserved"}
# key order of stormlog.telemetry.telemetry_event_to_dict for a TelemetryEventV3
V3_KEYS = (
    "schema_version", "session_id", "timestamp_ns", "event_type", "collector",
    "sampling_interval_ms", "pid", "host", "job_id", "rank", "local_rank", "world_size",
    "device_id", "allocator_allocated_bytes", "allocator_reserved_bytes",
    "allocator_active_bytes", "allocator_inactive_bytes", "allocator_change_bytes",
    "device_used_bytes", "device_free_bytes", "device_total_bytes", "context", "metadata",
)
# fmt: on


def _format_bytes(value: int) -> str:
    """Same text as stormlog.utils.format_bytes (precision 2)."""
    if value == 0:
        return "0 B"
    units = ["B", "KB", "MB", "GB", "TB", "PB"]
    size, unit = float(value), 0
    while size >= 1024.0 and unit < len(units) - 1:
        size /= 1024.0
        unit += 1
    return f"{size:.2f} {units[unit]}"


def _spike_window(n: int) -> tuple[int, int]:
    """(centre, half-width) in sample indices of the synchronised spike."""
    return n // 2, max(n // 200, 20)


def _memory_series(rng: np.random.Generator, rank: int, n: int) -> tuple[np.ndarray, ...]:
    """Allocated / reserved / inactive byte series with drift and a mid-run spike."""
    idx = np.arange(n)
    base = (34.0 + 0.45 * rank) * GIB
    drift = np.cumsum(rng.normal(0.0, 3.0 * MIB, n))  # slow random walk
    wave = 1.5 * GIB * ((idx % 40) < 22)  # activations alloc/free each step
    mid, width = _spike_window(n)  # same sample window on every rank
    bump = np.clip(1.0 - np.abs(idx - mid) / width, 0.0, None)
    spike = 31.0 * GIB * bump
    allocated = ((base + drift + wave + spike) // 512 * 512).astype(np.int64)
    frag = np.clip(1.5 * GIB + np.cumsum(rng.normal(0.0, 1.0 * MIB, n)), 256 * MIB, None)
    reserved = (-(-(allocated + frag) // (2 * MIB)) * (2 * MIB)).astype(np.int64)
    inactive = ((reserved - allocated) * 0.35 // 512 * 512).astype(np.int64)
    return allocated, reserved, inactive


BURST_PERIOD = 400  # samples between NCCL all_reduce bursts (20 s at 50 ms)
BURST_OFFSET = 150  # first burst onset, in samples
BURST_SAMPLES = 2  # samples each burst lasts
DRIFT_RANK = 3  # rank whose hidden memory drifts up
DRIFT_BYTES = 6 * GIB  # total drift over the run on DRIFT_RANK
MID_SPIKE_BYTES = 4.75 * GIB  # peak of the synchronised mid-run hidden spike
MID_SPIKE_HALF_WIDTH = 8  # samples
TP_OFFSET = 60  # first tensor-parallel all_gather, in samples (before the first all_reduce)
TP_GROUP_STAGGER = 12  # samples between the groups' all_gathers (600 ms: not synchronous)
TP_BYTES = 512 * MIB


def _burst_onsets(n: int) -> np.ndarray:
    """Sample indices where an all_reduce burst starts (same on every rank)."""
    return np.arange(BURST_OFFSET, n - BURST_SAMPLES, BURST_PERIOD)


def _tp_onsets(n: int, rank: int) -> np.ndarray:
    """One-sample all_gather bursts of rank pair (2g, 2g+1), staggered between pairs."""
    return np.arange(TP_OFFSET + TP_GROUP_STAGGER * (rank // 2), n, BURST_PERIOD)


def _hidden_gap(seed: int, rank: int, n: int) -> np.ndarray:
    """Bytes of device memory outside the caching allocator, per sample (int64, >= 0).

    Baseline + noise per rank; the burst sizes come from a job-level generator so that
    every rank sees the same bursts; none of this touches the allocator series' stream.
    """
    rank_rng = np.random.default_rng([seed, rank, 1])
    job_rng = np.random.default_rng([seed, 1_000_003])
    idx = np.arange(n)
    gap = (384 + 24 * rank) * MIB + rank_rng.normal(0.0, 6.0 * MIB, n)
    onsets = _burst_onsets(n)
    sizes = job_rng.uniform(0.9, 1.6, onsets.size) * GIB
    for k in range(BURST_SAMPLES):
        gap[onsets + k] += sizes * (1.0 - 0.25 * k)
    mid, _ = _spike_window(n)
    gap += MID_SPIKE_BYTES * np.clip(1.0 - np.abs(idx - mid) / MID_SPIKE_HALF_WIDTH, 0.0, None)
    gap[_tp_onsets(n, rank)] += TP_BYTES
    if rank == DRIFT_RANK:
        gap += DRIFT_BYTES * idx / n
    return (np.clip(gap, 0.0, None) // (2 * MIB) * (2 * MIB)).astype(np.int64)  # driver granularity


def _phase_plan(n: int, epochs: int = 4) -> list[tuple[int, str, str, dict[str, Any]]]:
    """(sample index, enter|exit, name, attrs) in emission order."""
    plan: list[tuple[int, str, str, dict[str, Any]]] = [(0, "enter", "setup", {})]
    t0, t1 = n * 2 // 100, n * 96 // 100
    plan += [(t0, "exit", "setup", {}), (t0, "enter", "train", {"epochs": epochs})]
    span = (t1 - t0) // epochs
    for e in range(epochs):
        start, end = t0 + e * span, t0 + (e + 1) * span
        plan.append((start, "enter", "epoch", {"epoch": e}))
        plan.append((end - span * 3 // 100, "enter", "eval", {"split": "val"}))
        plan += [(end - 1, "exit", "eval", {}), (end - 1, "exit", "epoch", {})]
    plan += [(t1, "exit", "train", {}), (t1, "enter", "checkpoint", {"step": t1})]
    plan.append((n * 99 // 100, "exit", "checkpoint", {}))
    return plan


def _phase_events(plan, session_id: str, thread_id: int) -> dict[int, list[tuple]]:
    """PhaseRecorder boundaries (type, context, metadata) keyed by the sample they follow."""
    out: dict[int, list[tuple]] = {}
    stack: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (static scope fields, attrs)
    for seq, (index, action, name, attrs) in enumerate(plan, start=1):
        if action == "enter":
            parent = stack[-1][0] if stack else None
            path = [*parent["path"], name] if parent else [name]
            fixed = {"name": name, "path": path, "depth": len(path)}
            fixed["scope_id"] = f"{session_id}:{seq}"
            fixed["parent_scope_id"] = parent["scope_id"] if parent else None
            stack.append((fixed, attrs))
        active, attrs = stack[-1] if action == "enter" else stack.pop()
        scope = {"action": action, **active, "thread_id": thread_id}
        scope.update(thread_name="MainThread", sequence=seq)
        if attrs:
            scope["attributes"] = dict(attrs)
        verb, event_type = (
            ("entered", "phase_enter") if action == "enter" else ("exited", "phase_exit")
        )
        context = f"Phase {verb}: {' / '.join(active['path'])}"  # PHASE_*_EVENT, runtime.py
        out.setdefault(index, []).append((event_type, context, {"phase_scope": scope}))
    return out


def _rank_lines(
    rank: int, ranks: int, n: int, seed: int, job_id: str, *, hidden: bool = False, null_contexts: bool = False
) -> bytes:
    rng = np.random.default_rng([seed, rank])
    session_id = str(uuid.UUID(bytes=rng.bytes(16), version=4))
    pid = int(rng.integers(2_000, 60_000))
    host = f"gpu-node-{rank // GPUS_PER_NODE:02d}"
    local_rank = rank % GPUS_PER_NODE if ranks > GPUS_PER_NODE else rank
    t_start = 1_718_000_000.0 + seed * 86_400 + rng.uniform(0.0, 0.004)  # clock skew
    ts = t_start + (np.arange(1, n + 1) * INTERVAL_S) + rng.uniform(0.0, 0.002, n)
    alloc_a, reserved_a, inactive_a = _memory_series(rng, rank, n)
    if hidden:
        used_a = np.minimum(reserved_a + _hidden_gap(seed, rank, n), DEVICE_TOTAL - 256 * MIB)
    else:
        used_a = np.maximum(alloc_a, reserved_a)
    alloc, reserved, inactive, used = (a.tolist() for a in (alloc_a, reserved_a, inactive_a, used_a))
    ts_ns = (ts * 1_000_000_000).astype(np.int64).tolist()  # tracker: int(ts * 1e9)

    extras = _phase_events(_phase_plan(n), session_id, 139_800_000_000_000 + rank * 4096)
    mid, width = _spike_window(n)
    rise = mid - width // 2  # first tick on the spike ramp that trips the 100 MB alert
    while alloc[rise] - alloc[rise - 1] <= 100 * MIB:
        rise += 1
    # alerts precede the sample of the same tick, as in _run_tracking_iteration
    warn_before = {rise: ["large"], mid: ["usage"], mid + 2: ["usage"]}
    nccl = {mid - 3, mid, mid + 2, n // 4, n * 3 // 4, n - 10}
    sample_meta = HIDDEN_SAMPLE_META if hidden else SAMPLE_META
    collective_before: dict[int, int] = {}  # sample index -> burst number (custom event)
    sample_ctx_at: dict[int, str] = {}  # sample index -> context other than the default
    if hidden:
        for b, onset in enumerate(_burst_onsets(n).tolist()):
            if b % 3 == 0:
                collective_before[onset] = b
            elif b % 3 == 1:
                nccl.add(onset)
        tp_ctx = f"Collected telemetry sample during nccl all_gather (tensor-parallel group {rank // 2})."
        sample_ctx_at.update(dict.fromkeys(_tp_onsets(n, rank).tolist(), tp_ctx))
        warn_before.setdefault(mid - 1, []).insert(0, "nccl")

    head = (3, session_id)
    ident = (COLLECTOR, 50, pid, host, job_id, rank, local_rank, ranks, local_rank)
    dumps = orjson.dumps

    def record(t_ns: int, etype: str, i: int | None, change: int, ctx: str | None, meta: dict) -> bytes:
        if i is None:  # start: tracker emits a zeroed snapshot with the known total
            mem = (0, 0, None, None, change, 0, None, DEVICE_TOTAL)
        else:
            a, u = alloc[i], used[i]
            mem = (a, reserved[i], a, inactive[i], change, u, DEVICE_TOTAL - u, DEVICE_TOTAL)
        return dumps(dict(zip(V3_KEYS, (*head, t_ns, etype, *ident, *mem, ctx, meta), strict=True)))

    start_ns = int(t_start * 1_000_000_000)
    out = [record(start_ns, "start", None, 0, "Memory tracking started", sample_meta)]
    sample_ctx = "Collected telemetry sample."
    for i in range(n):
        if i in collective_before:  # a user hook's custom event, 1 ms before the sample
            b = collective_before[i]
            bucket_bytes = (25 + 5 * (b % 4)) * 1_000_000
            ctx = f"nccl all_reduce launched (bucket {b}, {_format_bytes(bucket_bytes)})"
            meta = {"collective": "all_reduce", "backend": "nccl", "bucket": b, "bucket_bytes": bucket_bytes}
            out.append(record(ts_ns[i] - 1_000_000, "collective", i, 0, ctx, {**meta, **sample_meta}))
        for k, kind in enumerate(warn_before.get(i, ())):  # tracker _check_alerts
            change = alloc[i] - alloc[i - 1]
            if kind == "nccl":  # a user hook's NCCL watchdog warning
                hidden_bytes = used[i] - reserved[i]
                ctx = f"NCCL all_reduce: {_format_bytes(hidden_bytes)} of device memory outside the allocator"
                meta = {"collective": "all_reduce", "backend": "nccl", "hidden_gap_bytes": hidden_bytes}
            elif kind == "usage":
                pct = alloc[i] / DEVICE_TOTAL * 100
                ctx, meta = f"WARNING: Memory usage at {pct:.1f}%", {"usage_percent": pct}
            else:
                ctx = f"Large allocation detected: {_format_bytes(change)}"
                meta = {"large_allocation": True}
            t = ts_ns[i] - 200_000 + k * 10_000
            out.append(record(t, "warning", i, change, ctx, {**meta, **sample_meta}))
        ctx = sample_ctx_at.get(i, sample_ctx)
        if i in nccl:
            ctx = f"Collected telemetry sample during nccl all_reduce (bucket {i % 7})."
        out.append(record(ts_ns[i], "sample", i, 0, None if null_contexts else ctx, sample_meta))
        for k, (etype, pctx, pmeta) in enumerate(extras.get(i, ())):
            t = ts_ns[i] + 20_000_000 + k * 150_000
            out.append(record(t, etype, i, 0, pctx, {**pmeta, **sample_meta}))
    stop_ns = ts_ns[-1] + 30_000_000
    out.append(record(stop_ns, "stop", n - 1, 0, "Memory tracking stopped", sample_meta))
    out.append(b"")
    return b"\n".join(out)


def validate_job(paths: list[Path], per_kind: int = 50) -> int:
    """validate_telemetry_record + exact to_dict(from_record(rec)) round trip (values and
    key order) for the first ``per_kind`` records of each event_type; 0 if no stormlog."""
    try:
        from stormlog.telemetry import (
            telemetry_event_from_record,
            telemetry_event_to_dict,
            validate_telemetry_record,
        )
    except ImportError:
        return 0
    checked = 0
    for path in paths:
        seen: dict[str, int] = {}
        for line in path.read_bytes().splitlines():
            rec = orjson.loads(line)
            kind = rec["event_type"]
            seen[kind] = seen.get(kind, 0) + 1
            if seen[kind] > per_kind:
                continue
            validate_telemetry_record(rec)
            again = telemetry_event_to_dict(telemetry_event_from_record(rec))
            if again != rec or orjson.dumps(again) != line:  # dumps: checks key order
                raise ValueError(f"{path}: {kind} record does not round-trip via stormlog")
            checked += 1
    return checked


def write_job(
    root: Path, *, ranks: int = 8, samples: int = 20_000, seed: int = 0, hidden: bool = False,
    null_contexts: bool = False,
) -> list[Path]:
    """Write ``root/rank_{r}/telemetry.jsonl`` for every rank; return the paths.

    ``hidden``: model memory outside the caching allocator (see the module docstring).
    ``null_contexts``: samples carry ``"context": null`` (trackers that leave it unset), so the
    collective markers of samples come from their metadata and custom events only.
    """
    if ranks < 1 or samples < 200:
        raise ValueError("need ranks >= 1 and samples >= 200")
    root = Path(root)
    job_id = f"stormwatch-bench-{seed:04d}"
    paths: list[Path] = []
    for rank in range(ranks):
        path = root / f"rank_{rank}" / "telemetry.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_rank_lines(rank, ranks, samples, seed, job_id, hidden=hidden, null_contexts=null_contexts))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="job folder to write (rank_N/telemetry.jsonl)")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=20_000, help="sample events per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden-memory", action="store_true", help="memory outside the allocator (see above)")
    parser.add_argument("--null-contexts", action="store_true", help='samples carry "context": null')
    parser.add_argument("--no-validate", action="store_true", help="skip the stormlog check")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    paths = write_job(args.out, ranks=args.ranks, samples=args.samples, seed=args.seed, hidden=args.hidden_memory,
                      null_contexts=args.null_contexts)
    elapsed = time.perf_counter() - t0
    size_mb = sum(p.stat().st_size for p in paths) / 1e6
    lines = sum(p.read_bytes().count(b"\n") for p in paths)
    print(f"wrote {len(paths)} files, {lines:,} records, {size_mb:.1f} MB in {elapsed:.2f} s")
    print(f"job folder: {args.out}")
    if not args.no_validate:
        checked = validate_job(paths)
        print(f"stormlog check: {f'{checked} records round-trip OK' if checked else 'skipped'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
