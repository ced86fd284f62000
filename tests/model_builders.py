"""Scenario builders for the diagnostics-model differential suite (issue 3).

Every builder writes one job's artifacts under ``root`` (so ``root`` is also the job
folder) and returns the paths to hand the reference one by one, in rank order.
Writers are stormlog's own: ``TelemetryEventV3`` + ``telemetry_event_to_dict``
(:func:`tests.builders.timeline_records`), ``AppendOnlyTelemetrySink``,
``CPUMemoryTracker.export_events`` and, for schema v4, stormlog 0.4.3's
``TelemetryEventV4`` / ``CPUMemoryTracker`` run in a subprocess (0.4.3 cannot be
imported next to 0.3.5). Rank identities come from RANK / LOCAL_RANK / WORLD_SIZE
and a shared TORCHELASTIC_RUN_ID, resolved by stormlog's
``resolve_distributed_identity(env=os.environ)`` as its trackers do.

File names are ones a folder search finds (stormlog's ``*events*.json`` / ``*track*.json``
patterns; stormwatch's job folder also finds ``*.jsonl`` and sinks at any depth), so the
job folder holds exactly the artifacts of the path list.

Units: memory in bytes, ``t_s`` float seconds after :data:`tests.builders.START_NS`.
Sample counts stay small: the reference is quadratic in places.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stormlog.telemetry import resolve_distributed_identity

from tests.builders import (
    DEFAULT_ALERTS,
    DEFAULT_PHASES,
    GIB,
    MIB,
    START_NS,
    Alert,
    Phase,
    Sample,
    distributed_env,
    make_legacy_record,
    ramp,
    timeline_records,
    write_cpu_tracker_export,
    write_json,
    write_jsonl,
    write_sink,
)

JOB_ID = "elastic-run-7"
DEVICE_TOTAL_BYTES = 80 * GIB
RECORD_FORMATS = ("jsonl", "json", "sink")
PerRank = Callable[[int], Sequence[Any]]


def env_identity(rank: int, world_size: int, *, local_rank: int | None = None,
                 job_id: str | None = JOB_ID) -> dict[str, Any]:
    """``job_id``/``rank``/``local_rank``/``world_size`` as stormlog's trackers resolve
    them from RANK, LOCAL_RANK, WORLD_SIZE and TORCHELASTIC_RUN_ID."""
    with distributed_env(rank=rank, world_size=world_size, local_rank=local_rank, job_id=job_id):
        return dict(resolve_distributed_identity(env=os.environ))


def gap_samples(gaps_bytes: Sequence[int], *, interval_s: float = 0.5, offset_s: float = 0.0,
                allocated: int | Sequence[int] = GIB, slack_bytes: int = 64 * MIB,
                reserved: Sequence[int] | None = None,
                device_total: int | None = DEVICE_TOTAL_BYTES) -> list[Sample]:
    """One sample per hidden gap (``device_used - reserved``, bytes) every ``interval_s``
    seconds from ``offset_s``; reserved = allocated + ``slack_bytes`` unless given."""
    out = []
    for i, gap in enumerate(gaps_bytes):
        alloc = allocated if isinstance(allocated, int) else allocated[i]
        res = alloc + slack_bytes if reserved is None else reserved[i]
        out.append(Sample(offset_s + i * interval_s, alloc, res, res + gap, device_total))
    return out


def _no_items(_rank: int) -> Sequence[Any]:
    return ()


def write_rank(root: Path, rank: int, world_size: int, *, fmt: str, samples: Sequence[Sample],
               phases: Sequence[Phase] = (), alerts: Sequence[Alert] = (), job_id: str | None = JOB_ID,
               start_ns: int = START_NS, gpus_per_node: int = 8) -> Path:
    """One rank's artifact under ``root/rank_{rank}/``. ``fmt``: ``jsonl``/``json`` (records),
    ``sink`` (sink directory) or ``cpu`` (``CPUMemoryTracker.export_events`` JSON).
    Session ``f"{job_id}-rank{rank}"``, host ``node-{rank // gpus_per_node}``, pid 1000+rank."""
    local = rank % gpus_per_node
    folder, host, pid = root / f"rank_{rank}", f"node-{rank // gpus_per_node}", 1000 + rank
    session_id = f"{job_id or 'local'}-rank{rank}"
    if fmt == "cpu":
        return write_cpu_tracker_export(
            folder / "cpu_events.json", fmt="json", samples=samples, phases=phases, alerts=alerts,
            rank=rank, world_size=world_size, local_rank=local, job_id=job_id, session_id=session_id,
            host=host, pid=pid, start_ns=start_ns)
    ident = env_identity(rank, world_size, local_rank=local, job_id=job_id)
    records = timeline_records(samples=samples, phases=phases, alerts=alerts, session_id=session_id,
                               start_ns=start_ns, host=host, pid=pid, device_id=local, **ident)
    if fmt == "jsonl":
        return write_jsonl(folder / "events.jsonl", records)
    if fmt == "json":
        return write_json(folder / "events.json", records)
    if fmt == "sink":
        return write_sink(folder / "telemetry", records=records, rollover_max_events=8,
                          retention_max_files=10_000)
    raise ValueError(f"unknown fmt {fmt!r}")


def write_job(root: Path, *, world_size: int, samples: PerRank, ranks: Sequence[int] | None = None,
              phases: PerRank = _no_items, alerts: PerRank = _no_items,
              fmts: Sequence[str] = RECORD_FORMATS, job_id: str | None = JOB_ID) -> list[Path]:
    """Ranks ``ranks`` (default: all) of a ``world_size`` job; rank r written as
    ``fmts[r % len(fmts)]``. Returns the paths in rank order."""
    wanted = range(world_size) if ranks is None else ranks
    return [write_rank(root, rank, world_size, fmt=fmts[rank % len(fmts)], samples=samples(rank),
                       phases=phases(rank), alerts=alerts(rank), job_id=job_id) for rank in wanted]


# --- single rank --------------------------------------------------------------------------

def build_single_rank_alerts(root: Path) -> list[Path]:
    """World 1: nested phases train > forward/backward, ``dataloader`` on a second thread,
    warning (2.0 s) and critical (3.5 s) alerts and an OOM ``error`` (4.0 s)."""
    return [write_rank(root, 0, 1, fmt="json", samples=ramp(10), phases=DEFAULT_PHASES,
                       alerts=DEFAULT_ALERTS)]


def build_gap_transient_spike(root: Path) -> list[Path]:
    """20 samples, hidden gap ~256 MiB with one 8 GiB (10 % of the device) spike at
    sample 12: z-score ~4.2 > 2 * 2.0, a critical ``transient_spike``."""
    gaps = [256 * MIB + (i % 3) * MIB for i in range(20)]
    gaps[12] = 8 * GIB
    return [write_rank(root, 0, 1, fmt="jsonl", samples=gap_samples(gaps))]


def build_gap_persistent_drift(root: Path) -> list[Path]:
    """12 samples, gap rising linearly 512 MiB -> 6 GiB (R^2 = 1): critical drift."""
    gaps = [512 * MIB * (i + 1) for i in range(12)]
    return [write_rank(root, 0, 1, fmt="jsonl", samples=gap_samples(gaps))]


def build_gap_fragmentation(root: Path) -> list[Path]:
    """12 samples, reserved = 3 x allocated (fragmentation exactly 2/3 on every sample,
    critical) and a steady 5 GiB gap (6.25 %): no spike (std 0), no drift (slope 0).
    Equal ratios: the finding's timestamp is argmax's first sample, tied with the
    first ``gap_ratio_breach``."""
    allocated = [GIB + i * 40 * MIB + (i * i) % 7 for i in range(12)]
    reserved = [3 * a for a in allocated]
    samples = gap_samples([5 * GIB] * 12, allocated=allocated, reserved=reserved)
    return [write_rank(root, 0, 1, fmt="json", samples=samples)]


# --- collective attribution ---------------------------------------------------------------

SPIKE_T_S = 3.0
COLLECTIVE_SPIKE_BYTES = 3584 * MIB  # 4.375 % of 80 GiB: >= min_gap_ratio 0.04, < gap ratio 0.05


def _baseline_gaps(rank: int, n: int) -> list[int]:
    return [192 * MIB + ((i * 7 + rank * 3) % 5) * 4 * MIB for i in range(n)]


def _spiky_samples(rank: int, *, spike_at: Sequence[int], n: int = 12, skew_s: float = 0.015) -> list[Sample]:
    """``n`` samples every 0.5 s, rank-skewed by ``rank * skew_s``; spikes at indices."""
    gaps = _baseline_gaps(rank, n)
    for index in spike_at:
        gaps[index] = COLLECTIVE_SPIKE_BYTES
    return gap_samples(gaps, offset_s=rank * skew_s, allocated=GIB + rank * 16 * MIB)


def _collective_marker(rank: int, t_s: float) -> tuple[list[Phase], list[Alert]]:
    """Even ranks: a PhaseRecorder phase ``all_reduce`` (token in boundary metadata) inside
    ``train``; odd ranks: an ``allocation`` event whose context/metadata name NCCL."""
    if rank % 2 == 0:
        return [Phase("train", 0.1, 5.8), Phase("all_reduce", t_s - 0.05, t_s + 0.05)], []
    return [Phase("train", 0.1, 5.8)], [Alert(t_s, "allocation", "NCCL all_reduce workspace",
                                              {"collective": "allreduce", "bucket": 3})]


def build_collective_synchronized(root: Path, *, world_size: int = 8,
                                  ranks: Sequence[int] | None = None,
                                  alerts: PerRank = _no_items) -> list[Path]:
    """All present ranks spike at ~3.0 s (skewed 15 ms per rank) next to a collective
    marker: ``collective_confident`` with ``cross_rank_synchrony``."""
    def spike_time(rank: int) -> float:
        return SPIKE_T_S + rank * 0.015
    return write_job(
        root, world_size=world_size, ranks=ranks,
        samples=lambda r: _spiky_samples(r, spike_at=[6]),
        phases=lambda r: _collective_marker(r, spike_time(r))[0],
        alerts=lambda r: [*_collective_marker(r, spike_time(r))[1], *alerts(r)])


def build_collective_single_rank(root: Path) -> list[Path]:
    """8 ranks; only rank 5 spikes (at 4.5 s), next to a marker: single_rank_only,
    confidence 0.51 (``collective_suspect``, info) under medium/high, dropped under low."""
    def samples(rank: int) -> list[Sample]:
        return _spiky_samples(rank, spike_at=[9] if rank == 5 else [], skew_s=0.0)

    def alerts(rank: int) -> list[Alert]:
        return [Alert(4.5, "allocation", "nccl broadcast buffer", {"op": "broadcast"})] if rank == 5 else []
    return write_job(root, world_size=8, samples=samples, alerts=alerts)


def build_collective_unmarked(root: Path) -> list[Path]:
    """8 ranks spike together without any collective marker: ``weak_marker_signal`` +
    ``cross_rank_synchrony``, confidence 0.51 (suspect)."""
    return write_job(root, world_size=8, samples=lambda r: _spiky_samples(r, spike_at=[6], skew_s=0.005))


def build_collective_merged_intervals(root: Path) -> list[Path]:
    """8 ranks sampled every 0.1 s; every rank spikes at 0.8 s next to an ``all_reduce``
    allocation event (confident) and again at 1.0 s, 200 ms from any marker (weak,
    suspect). The two intervals overlap and merge: confident, reasons of both."""
    def samples(rank: int) -> list[Sample]:
        gaps = _baseline_gaps(rank, 16)
        gaps[8] = gaps[10] = COLLECTIVE_SPIKE_BYTES
        return gap_samples(gaps, interval_s=0.1, allocated=GIB + rank * 16 * MIB)

    def alerts(rank: int) -> list[Alert]:
        return [Alert(0.8, "allocation", "all-reduce bucket", {"collective": "all_reduce"})]
    return write_job(root, world_size=8, samples=samples, alerts=alerts)


def build_collective_early_spike(root: Path) -> list[Path]:
    """8 ranks (skewed 15 ms each) spike together on their first sample next to a marker:
    the interval start clamps to the trace start (rank 0's first event), then each rank's
    candidate to its own first sample."""
    def samples(rank: int) -> list[Sample]:
        return _spiky_samples(rank, spike_at=[0])

    def alerts(rank: int) -> list[Alert]:
        return [Alert(rank * 0.015, "allocation", "NCCL all_reduce workspace", {"op": "all_reduce"})]
    return write_job(root, world_size=8, samples=samples, alerts=alerts)


def build_missing_ranks(root: Path) -> list[Path]:
    """World 8 with ranks 0-5 present: the synchronised collective spike (synchrony 5/7),
    a warning alert on rank 1 at 1.0 s and a critical one on rank 4 at 2.0 s."""
    extra = {1: [Alert(1.0, "warning", "rank 1 memory above 80%")],
             4: [Alert(2.0, "critical", "rank 4 memory above 95%")]}
    return build_collective_synchronized(root, ranks=range(6), alerts=lambda r: extra.get(r, []))


# --- other inputs --------------------------------------------------------------------------

def build_cpu_only(root: Path) -> list[Path]:
    """Two ranks of ``CPUMemoryTracker`` JSON exports (no device totals; device_used =
    allocated). At 2.0 s allocated jumps 1 GiB above reserved inside an ``all_gather``
    phase on both ranks: a collective spike with no gap ratio (-0.05); alerts, OOM."""
    def samples(rank: int) -> list[Sample]:
        out = []
        for i in range(10):
            alloc = 2 * GIB + rank * 32 * MIB + i * 8 * MIB
            reserved = alloc + 512 * MIB if i != 4 else alloc - GIB
            out.append(Sample(i * 0.5, alloc, reserved))
        return out
    phases = (Phase("step", 0.2, 4.4), Phase("all_gather", 1.95, 2.05))
    alerts = {0: [Alert(1.0, "warning", "RSS above 80%")], 1: [DEFAULT_ALERTS[2]]}
    return write_job(root, world_size=2, samples=samples, phases=lambda r: phases,
                     alerts=lambda r: alerts[r], fmts=("cpu",))


def build_legacy_job(root: Path) -> list[Path]:
    """Four sessionless legacy flat JSON files (``TrackingEvent`` dicts; one per rank of a
    world-4 job), merged by the reference into one ``legacy-…`` session. reserved =
    2 x allocated (fragmentation exactly 0.5: warning, not > 0.5), device_total 16 GiB so
    |gap| / total >= 5 %; rank 2 has a critical alert."""
    paths = []
    for rank in range(4):
        ident = env_identity(rank, 4)
        records = []
        for i in range(8):
            alloc = GIB + rank * 64 * MIB + i * 16 * MIB
            records.append(make_legacy_record(
                timestamp_s=START_NS / 1e9 + 0.25 * i + 0.001 * rank, allocated=alloc, reserved=2 * alloc,
                device_id=rank, device_total=16 * GIB, **ident))
            if rank == 2 and i == 5:
                records.append(make_legacy_record(
                    timestamp_s=START_NS / 1e9 + 0.25 * i + 0.1, allocated=alloc, reserved=2 * alloc,
                    event_type="critical", context="legacy critical alert", device_id=rank,
                    device_total=16 * GIB, **ident))
        paths.append(write_json(root / f"legacy_rank{rank}_events.json", records))
    return paths


def build_inconsistent_world_size(root: Path) -> list[Path]:
    """An elastic job scaled from 2 to 4 ranks, written as legacy flat files (which the
    reference merges regardless of world size): events carry world_size 2 and 4, so the
    model warns and expects ranks 0-3."""
    paths = []
    for world, ranks, t0 in ((2, (0, 1), 0.0), (4, (0, 1, 2, 3), 10.0)):
        for rank in ranks:
            ident = env_identity(rank, world)
            records = [make_legacy_record(timestamp_s=START_NS / 1e9 + t0 + 0.5 * i,
                                          allocated=GIB + i * 8 * MIB, device_id=rank, **ident)
                       for i in range(6)]
            paths.append(write_json(root / f"ws{world}_rank{rank}_events.json", records))
    return paths


def build_ordering_ties(root: Path) -> list[Path]:
    """World 4 sampled at identical timestamps; every rank's gap jumps to 5 GiB (6.25 %)
    at 1.0 s, so four ``gap_ratio_breach`` candidates share the earliest timestamp;
    rank 2 also has a warning alert at exactly 1.0 s, ranks 1 and 3 critical alerts at
    exactly 2.0 s. Ties resolve to candidate order: rank order, alerts before breaches."""
    gaps = [256 * MIB, 256 * MIB] + [5 * GIB] * 8
    alerts = {2: [Alert(1.0, "warning", "tie warning")],
              1: [Alert(2.0, "critical", "tie critical (rank 1)")],
              3: [Alert(2.0, "critical", "tie critical (rank 3)")]}
    return write_job(root, world_size=4, samples=lambda r: gap_samples(gaps),
                     alerts=lambda r: alerts.get(r, []))


# --- schema v4 (stormlog 0.4.3, in a subprocess) -------------------------------------------

_CAPABILITY_FLAGS = ("allocator_allocated", "allocator_reserved", "allocator_active", "allocator_inactive",
                     "device_used", "device_free", "device_total", "native_allocator_history",
                     "fragmentation_analysis", "allocator_attribution", "bounded_profiling")


def capabilities(backend: str, collector: str, source: str, *supported: str) -> dict[str, Any]:
    """A ``metadata.memory_capabilities`` object (``DeviceMemoryCapabilities.to_metadata()``
    layout; that class imports torch, so it is restated here): ``supported`` flags true."""
    unknown = set(supported) - set(_CAPABILITY_FLAGS)
    if unknown:
        raise ValueError(f"unknown capability flags {sorted(unknown)}")
    return {"backend": backend, "telemetry_collector": collector, "sampling_source": source,
            **{f"supports_{flag}": flag in supported for flag in _CAPABILITY_FLAGS}}


#: device counters only (an NVML-style collector): every allocator counter is null.
DEVICE_ONLY_CAPABILITIES = capabilities("cuda", "stormlog.device_tracker", "nvml device memory",
                                        "device_used", "device_free", "device_total")
#: stormlog 0.4.3's MLXCollector with get_active_memory: allocated only.
MLX_CAPABILITIES = capabilities("metal", "stormlog.mlx.memory_tracker", "mlx_allocator", "allocator_allocated")
#: CudaDeviceCollector.capabilities(): everything.
CUDA_CAPABILITIES = capabilities("cuda", "stormlog.cuda_tracker", "torch.cuda.memory_allocated/reserved",
                                 *_CAPABILITY_FLAGS)

_V4_WRITER = r"""
import json, os, sys
from stormlog.telemetry import TelemetryEventV4, resolve_distributed_identity, telemetry_event_to_dict
spec = json.load(sys.stdin)
for item in spec:
    os.environ.update(item["env"])
    if item["kind"] == "cpu_tracker":
        from stormlog import cpu_profiler
        tracker = cpu_profiler.CPUMemoryTracker(sampling_interval=0.5)
        ident = tracker.distributed_identity
        for ev in item["events"]:
            tracker.events.append(cpu_profiler.TrackingEvent(**ev, **ident))
        saved = cpu_profiler.socket.gethostname, cpu_profiler.os.getpid
        cpu_profiler.socket.gethostname = lambda: item["host"]
        cpu_profiler.os.getpid = lambda: item["pid"]
        try:
            tracker.export_events(item["path"], format="json")
        finally:
            cpu_profiler.socket.gethostname, cpu_profiler.os.getpid = saved
        continue
    ident = resolve_distributed_identity(env=os.environ)
    records = [telemetry_event_to_dict(TelemetryEventV4(**ev, **ident)) for ev in item["events"]]
    with open(item["path"], "w") as handle:
        json.dump(records, handle, indent=2, default=str)
"""


def _run_v4_writer(stormlog43: Path, spec: list[dict[str, Any]]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = str(stormlog43)
    done = subprocess.run([sys.executable, "-c", _V4_WRITER], input=json.dumps(spec), text=True,
                          capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"stormlog 0.4.3 writer failed:\n{done.stderr}")


def _rank_env(rank: int, world_size: int) -> dict[str, str]:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
            "TORCHELASTIC_RUN_ID": JOB_ID}


_V4_COUNTERS = ("allocator_allocated_bytes", "allocator_reserved_bytes", "allocator_active_bytes",
                "allocator_inactive_bytes", "allocator_change_bytes", "device_used_bytes",
                "device_free_bytes", "device_total_bytes")


Counters = Callable[[int, int], dict[str, int | None]]  # (rank, sample index) -> counter fields


def _v4_job(root: Path, stormlog43: Path, *, caps: dict[str, Any], counters: Counters,
            alerts: dict[int, tuple[int, str, str]], world_size: int = 2, n: int = 8) -> list[Path]:
    """``world_size`` ranks of ``n`` 0.4.3 ``TelemetryEventV4`` samples every 0.5 s (JSON
    arrays as ``export_events`` writes them); ``alerts[rank] = (after sample i, type, text)``
    adds an alert 1 ns after that sample with the same counters."""
    spec, paths = [], []
    for rank in range(world_size):
        events = []
        for i in range(n):
            values = counters(rank, i)
            kinds: list[tuple[str, str | None, int]] = [("sample", None, 0)]
            if rank in alerts and alerts[rank][0] == i:
                kinds.append((alerts[rank][1], alerts[rank][2], 1))
            for event_type, context, delay_ns in kinds:
                events.append({
                    "schema_version": 4, "session_id": f"{JOB_ID}-rank{rank}",
                    "timestamp_ns": START_NS + i * 500_000_000 + delay_ns, "event_type": event_type,
                    "collector": caps["telemetry_collector"], "sampling_interval_ms": 500,
                    "pid": 2000 + rank, "host": "node-0", "device_id": rank,
                    **{name: values.get(name) for name in _V4_COUNTERS}, "context": context,
                    "metadata": {"memory_capabilities": caps}})
        path = root / f"rank_{rank}" / "events_v4.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        spec.append({"kind": "events", "env": _rank_env(rank, world_size), "path": str(path), "events": events})
        paths.append(path)
    _run_v4_writer(stormlog43, spec)
    return paths


def build_v4_device_only(root: Path, *, stormlog43: Path) -> list[Path]:
    """Two ranks of device-only v4 samples (allocator counters null, capabilities say so):
    device used ramps; rank 1 has a warning. 0.4.3: device-used timelines, null row
    deltas, one "device memory usage only" warning."""
    def counters(rank: int, i: int) -> dict[str, int | None]:
        used = 4 * GIB + rank * 256 * MIB + i * 96 * MIB
        return {"device_used_bytes": used, "device_free_bytes": DEVICE_TOTAL_BYTES - used,
                "device_total_bytes": DEVICE_TOTAL_BYTES}
    return _v4_job(root, stormlog43, caps=DEVICE_ONLY_CAPABILITIES, counters=counters,
                   alerts={1: (5, "warning", "device memory high")})


def build_v4_allocated_only(root: Path, *, stormlog43: Path) -> list[Path]:
    """Two ranks of MLX-style v4 samples: allocated (and change) only. 0.4.3: allocator
    timelines with null reserved/gap, "available allocator memory counters" warning."""
    def counters(rank: int, i: int) -> dict[str, int | None]:
        return {"allocator_allocated_bytes": GIB + rank * 64 * MIB + i * 24 * MIB,
                "allocator_change_bytes": 24 * MIB if i else 0}
    return _v4_job(root, stormlog43, caps=MLX_CAPABILITIES, counters=counters,
                   alerts={0: (2, "critical", "unified memory critical")})


def build_v4_cuda_inactive_fragmentation(root: Path, *, stormlog43: Path) -> list[Path]:
    """Two ranks of full-capability v4 samples, reserved = 1.25 x allocated (0.3.5's
    (reserved - allocated) / reserved = 0.2: no finding) but inactive split blocks = 60 %
    of reserved, with a steady 5 GiB gap: 0.4.3's fragmentation (inactive / reserved)
    is critical."""
    def counters(rank: int, i: int) -> dict[str, int | None]:
        alloc = 8 * GIB + rank * 512 * MIB + i * 32 * MIB
        reserved = alloc * 5 // 4
        used = reserved + 5 * GIB
        return {"allocator_allocated_bytes": alloc, "allocator_reserved_bytes": reserved,
                "allocator_active_bytes": alloc, "allocator_inactive_bytes": reserved * 3 // 5,
                "allocator_change_bytes": 32 * MIB if i else 0, "device_used_bytes": used,
                "device_free_bytes": DEVICE_TOTAL_BYTES - used, "device_total_bytes": DEVICE_TOTAL_BYTES}
    return _v4_job(root, stormlog43, caps=CUDA_CAPABILITIES, counters=counters, alerts={})


def build_v4_cpu_tracker(root: Path, *, stormlog43: Path) -> list[Path]:
    """Two ranks of 0.4.3 ``CPUMemoryTracker.export_events`` JSON (schema 4, CPU
    capabilities: fragmentation analysis disabled) with a critical alert on rank 0."""
    spec, paths = [], []
    for rank in range(2):
        events = []
        for i in range(8):
            alloc = GIB + rank * 32 * MIB + i * 8 * MIB
            events.append({"timestamp": START_NS / 1e9 + 0.5 * i, "event_type": "sample",
                           "memory_allocated": alloc, "memory_reserved": alloc + 64 * MIB,
                           "memory_change": 8 * MIB if i else 0, "device_id": -1,
                           "session_id": f"cpu-{JOB_ID}-rank{rank}", "context": "sample"})
            if rank == 0 and i == 3:
                events.append({"timestamp": START_NS / 1e9 + 0.5 * i + 0.25, "event_type": "critical",
                               "memory_allocated": alloc, "memory_reserved": alloc + 64 * MIB,
                               "memory_change": 0, "device_id": -1,
                               "session_id": f"cpu-{JOB_ID}-rank{rank}", "context": "RSS critical"})
        path = root / f"rank_{rank}" / "cpu_v4_events.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        spec.append({"kind": "cpu_tracker", "env": _rank_env(rank, 2), "path": str(path),
                     "events": events, "host": f"cpu-node-{rank}", "pid": 3000 + rank})
        paths.append(path)
    _run_v4_writer(stormlog43, spec)
    return paths
