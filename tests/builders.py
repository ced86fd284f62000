"""Test-artifact builders that write files with stormlog 0.3.5's own writer code.

Units everywhere: memory in bytes, ``*_ns`` in integer nanoseconds since the Unix
epoch, ``*_s`` / ``t_s`` in float seconds *relative to* ``start_ns`` (offsets).
Records come from stormlog's own dataclasses (validated on construction) and
``telemetry_event_to_dict``; CPU exports come from ``CPUMemoryTracker.export_events``;
sinks from ``AppendOnlyTelemetrySink``; phase boundaries from ``PhaseRecorder``.
Exceptions (hand-serialised because stormlog has no importable writer for them)
are named in each docstring: plain ``.jsonl`` files, diagnose bundles (stormlog.diagnose
imports torch) and schema v4 records (stormlog 0.4.3 is not installed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from stormlog import cpu_profiler, telemetry_sink
from stormlog.phases import PhaseRecorder
from stormlog.session import create_session_summary, session_summary_to_dict
from stormlog.telemetry import TelemetryEventV2, TelemetryEventV3, telemetry_event_to_dict

START_NS = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z
GIB, MIB = 1024**3, 1024**2
_ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
             "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
             "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS")


@dataclass(frozen=True)
class Sample:
    """One memory sample at ``t_s`` seconds after start; bytes. None = derived default."""

    t_s: float
    allocated: int
    reserved: int | None = None  # default: allocated
    device_used: int | None = None  # default: reserved (records) / allocated (CPU tracker)
    device_total: int | None = None  # records only; the CPU tracker never reports a total


@dataclass(frozen=True)
class Phase:
    """A phase from ``start_s`` to ``end_s`` (seconds), entered on thread ``thread``.

    ``thread="main"`` runs on the calling thread; any other name runs the enter/exit on a
    dedicated worker thread named ``f"{thread}_0"``. Same-thread phases must nest.
    """

    name: str
    start_s: float
    end_s: float
    thread: str = "main"
    attrs: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Alert:
    """A point event (``warning``/``critical``/``error``) at ``t_s`` seconds."""

    t_s: float
    event_type: str = "warning"
    context: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


def oom_alert(t_s: float, reason: str = "allocator_fragmentation") -> Alert:
    """The ``error`` event the CUDA tracker emits on OOM (metadata ``oom_reason``)."""
    return Alert(t_s, "error", f"OOM detected ({reason})", {"oom_reason": reason})


def ramp(n: int, *, base: int = GIB, step: int = 8 * MIB, interval_s: float = 0.5,
         overhead: int = 256 * MIB, slack: int = 64 * MIB,
         device_total: int | None = 80 * GIB) -> list[Sample]:
    """``n`` samples every ``interval_s`` s; allocated grows by ``step`` bytes per sample,
    reserved = allocated + ``slack``, device_used = reserved + ``overhead``."""
    out = []
    for i in range(n):
        alloc = base + i * step
        out.append(Sample(i * interval_s, alloc, alloc + slack, alloc + slack + overhead,
                          device_total))
    return out


DEFAULT_PHASES = (Phase("train", 0.25, 4.25), Phase("forward", 0.5, 1.5),
                  Phase("backward", 1.5, 3.0, attrs={"step": 1}),
                  Phase("dataloader", 0.75, 2.25, thread="loader"))
DEFAULT_ALERTS = (Alert(2.0, "warning", "Memory usage above 80%"),
                  Alert(3.5, "critical", "Memory usage above 95%"), oom_alert(4.0))


@contextmanager
def distributed_env(*, rank: int | None, world_size: int | None,
                    local_rank: int | None = None, job_id: str | None = None,
                    job_id_env: str = "TORCHELASTIC_RUN_ID") -> Iterator[None]:
    """Set RANK/LOCAL_RANK/WORLD_SIZE and ``job_id_env`` (TORCHELASTIC_RUN_ID or
    SLURM_JOB_ID) for the block, clearing every other identity variable; restores
    ``os.environ`` exactly afterwards. ``None`` leaves a variable unset."""
    saved = {key: os.environ.get(key) for key in _ENV_KEYS}
    wanted = {"RANK": rank, "LOCAL_RANK": local_rank, "WORLD_SIZE": world_size,
              job_id_env: job_id}
    try:
        for key in _ENV_KEYS:
            os.environ.pop(key, None)
        for key, value in wanted.items():
            if value is not None:
                os.environ[key] = str(value)
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def _swapped(module: Any, **attrs: Any) -> Iterator[None]:
    old = {name: getattr(module, name) for name in attrs}
    try:
        for name, value in attrs.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in old.items():
            setattr(module, name, value)


class _OsWithPid:
    def __init__(self, pid: int) -> None:
        self._pid = pid

    def getpid(self) -> int:
        return self._pid

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


@dataclass
class _Step:
    offset_ns: int
    event_type: str
    context: str | None
    allocated: int
    reserved: int
    change: int
    device_used: int | None
    device_total: int | None
    metadata: dict[str, Any]


def _script(samples: int | Sequence[Sample], phases: Sequence[Phase],
            alerts: Sequence[Alert], *, lifecycle: bool, emit_deltas: bool,
            recorder: PhaseRecorder, session_id: str, rank: int) -> list[_Step]:
    """Merge samples, phase boundaries and alerts into time order (ties: start,
    phase exits, phase enters outer-first, deltas+sample, alerts, stop)."""
    seq = ramp(samples) if isinstance(samples, int) else list(samples)
    if not seq:
        raise ValueError("at least one sample is required")
    ops: list[tuple[float, int, float, int, str, Any]] = []
    for i, s in enumerate(seq):
        ops.append((s.t_s, 3, 0.0, i, "sample", s))
    for i, p in enumerate(phases):
        ops.append((p.start_s, 2, -(p.end_s - p.start_s), i, "enter", p))
        ops.append((p.end_s, 1, p.end_s - p.start_s, i, "exit", p))
    for i, a in enumerate(alerts):
        ops.append((a.t_s, 4, 0.0, i, "alert", a))
    if lifecycle:
        ops.append((min(o[0] for o in ops), 0, 0.0, 0, "start", None))
        ops.append((max(o[0] for o in ops), 5, 0.0, 0, "stop", None))
    ops.sort(key=lambda o: o[:4])
    fmt = cpu_profiler.CPUMemoryTracker._format_bytes
    cur = seq[0]
    prev_alloc, peak = seq[0].allocated, -1
    tokens: dict[int, Any] = {}
    pools: dict[str, ThreadPoolExecutor] = {}
    steps: list[_Step] = []

    def emit(t_s: float, kind: str, ctx: str | None, change: int = 0,
             meta: Mapping[str, Any] | None = None) -> None:
        reserved = cur.allocated if cur.reserved is None else cur.reserved
        steps.append(_Step(round(t_s * 1e9), kind, ctx, cur.allocated, reserved, change,
                           cur.device_used, cur.device_total, dict(meta or {})))

    def on_thread(name: str, fn: Callable[[], Any]) -> Any:
        if name == "main":
            return fn()
        pool = pools.setdefault(name, ThreadPoolExecutor(1, thread_name_prefix=name))
        return pool.submit(fn).result()

    try:
        for t_s, _, _, idx, kind, item in ops:
            if kind == "start":
                emit(t_s, "start", "CPU memory tracking started")
            elif kind == "stop":
                emit(t_s, "stop", "CPU memory tracking stopped")
            elif kind == "sample":
                cur, change = item, item.allocated - prev_alloc
                if emit_deltas and item.allocated > peak:
                    emit(t_s, "peak", f"New CPU peak RSS: {fmt(item.allocated)}", change)
                if emit_deltas and change:
                    word = "increased" if change > 0 else "decreased"
                    emit(t_s, "allocation" if change > 0 else "deallocation",
                         f"RSS {word} by {fmt(abs(change))}", change)
                emit(t_s, "sample", "Collected CPU telemetry sample.",
                     0 if emit_deltas else change)
                prev_alloc, peak = item.allocated, max(peak, item.allocated)
            elif kind == "alert":
                emit(t_s, item.event_type, item.context, 0, item.metadata)
            elif kind == "enter":
                token, boundary = on_thread(item.thread, lambda p=item: recorder.enter(
                    session_id=session_id, rank=rank, name=p.name, attrs=p.attrs))
                tokens[idx] = token
                emit(t_s, boundary.event_type, boundary.context, 0, boundary.metadata)
            else:
                boundary = on_thread(item.thread, lambda i=idx: recorder.exit(tokens.pop(i)))
                emit(t_s, boundary.event_type, boundary.context, 0, boundary.metadata)
    finally:
        for pool in pools.values():
            pool.shutdown()
    return steps


def write_cpu_tracker_export(
    path: str | Path, *, fmt: str = "json", samples: int | Sequence[Sample] = 10,
    rank: int = 0, world_size: int = 1, job_id: str | None = None,
    local_rank: int | None = None, alerts: Sequence[Alert] = (),
    phases: Sequence[Phase] = (), start_ns: int = START_NS,
    session_id: str | None = None, lifecycle: bool = True, emit_deltas: bool = False,
    sampling_interval_s: float = 0.5, host: str | None = None, pid: int | None = None,
    job_id_env: str = "TORCHELASTIC_RUN_ID",
) -> Path:
    """Write ``path`` with ``CPUMemoryTracker.export_events(path, fmt)`` (fmt json|csv).

    Identity comes from env vars set via :func:`distributed_env` while the tracker is
    constructed. Events are ``TrackingEvent`` objects with fixed values appended to
    ``tracker.events`` (no sampling of this machine); phase boundaries come from the
    tracker's own ``PhaseRecorder``. Timestamps: the tracker stores float seconds
    ``(start_ns + t_s*1e9) / 1e9`` and writes ``int(that * 1e9)``, so written
    ``timestamp_ns`` are float-rounded (multiples of 256 ns near 1.7e18).
    host/pid: ``socket.gethostname()``/``os.getpid()`` unless given (then the
    tracker module's ``socket``/``os`` names are swapped during the export only).
    ``lifecycle`` adds the tracker's start/stop events (stop => "completed" session).
    CSV: metadata is written as a Python ``repr`` (stormlog's DictWriter behaviour).
    """
    with distributed_env(rank=rank, world_size=world_size, local_rank=local_rank,
                         job_id=job_id, job_id_env=job_id_env):
        tracker = cpu_profiler.CPUMemoryTracker(sampling_interval=sampling_interval_s,
                                                max_events=1_000_000)
    ident = tracker.distributed_identity
    sid = session_id or f"cpu-{ident['job_id'] or 'local'}-rank{ident['rank']}"
    for st in _script(samples, phases, alerts, lifecycle=lifecycle, emit_deltas=emit_deltas,
                      recorder=tracker._phase_state, session_id=sid, rank=ident["rank"]):
        tracker.events.append(cpu_profiler.TrackingEvent(
            timestamp=(start_ns + st.offset_ns) / 1e9, event_type=st.event_type,
            memory_allocated=st.allocated, memory_reserved=st.reserved,
            memory_change=st.change, device_id=-1, session_id=sid, context=st.context,
            job_id=ident["job_id"], rank=ident["rank"], local_rank=ident["local_rank"],
            world_size=ident["world_size"], metadata=st.metadata))
    swaps: dict[str, Any] = {}
    if host is not None:
        swaps["socket"] = SimpleNamespace(gethostname=lambda: host)
    if pid is not None:
        swaps["os"] = _OsWithPid(pid)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _swapped(cpu_profiler, **swaps):
        tracker.export_events(str(path), format=fmt)
    return path


def make_record(
    *, rank: int = 0, world_size: int = 1, local_rank: int | None = None,
    job_id: str | None = None, session_id: str = "s-0", timestamp_ns: int = START_NS,
    event_type: str = "sample", allocated: int = GIB, reserved: int | None = None,
    active: int | None = None, inactive: int | None = None, change: int = 0,
    device_used: int | None = None, device_total: int | None = None,
    device_free: int | None = None, context: str | None = None,
    metadata: Mapping[str, Any] | None = None, schema_version: int = 3,
    collector: str = "stormlog.cuda_tracker", sampling_interval_ms: int = 100,
    pid: int = 4242, host: str = "node-0", device_id: int = 0,
) -> dict[str, Any]:
    """A record built as ``TelemetryEventV3`` (or ``V2``, which has no session_id) and
    serialised by ``telemetry_event_to_dict``. Bytes; defaults: reserved=allocated,
    device_used=reserved, device_free=total-used when total is given, local_rank=rank."""
    reserved = allocated if reserved is None else reserved
    device_used = reserved if device_used is None else device_used
    if device_free is None and device_total is not None:
        device_free = max(device_total - device_used, 0)
    kwargs = dict(
        timestamp_ns=timestamp_ns, event_type=event_type, collector=collector,
        sampling_interval_ms=sampling_interval_ms, pid=pid, host=host, device_id=device_id,
        allocator_allocated_bytes=allocated, allocator_reserved_bytes=reserved,
        allocator_active_bytes=active, allocator_inactive_bytes=inactive,
        allocator_change_bytes=change, device_used_bytes=device_used,
        device_free_bytes=device_free, device_total_bytes=device_total, context=context,
        job_id=job_id, rank=rank, local_rank=rank if local_rank is None else local_rank,
        world_size=world_size, metadata=dict(metadata or {}))
    if schema_version == 2:
        return telemetry_event_to_dict(TelemetryEventV2(schema_version=2, **kwargs))
    if schema_version == 3:
        return telemetry_event_to_dict(
            TelemetryEventV3(schema_version=3, session_id=session_id, **kwargs))
    raise ValueError("make_record writes schema 2 or 3; use make_v4_record for 4")


def make_legacy_record(*, timestamp_s: float, allocated: int, reserved: int | None = None,
                       event_type: str = "sample", change: int = 0, device_id: int = 0,
                       context: str | None = None, **identity: Any) -> dict[str, Any]:
    """A permissive-legacy record: ``dataclasses.asdict`` of stormlog's ``TrackingEvent``
    (float ``timestamp`` in epoch seconds, ``memory_*`` bytes, session_id None,
    metadata None). ``identity``: job_id/rank/local_rank/world_size."""
    return asdict(cpu_profiler.TrackingEvent(
        timestamp=timestamp_s, event_type=event_type, memory_allocated=allocated,
        memory_reserved=allocated if reserved is None else reserved, memory_change=change,
        device_id=device_id, context=context, **identity))


def timeline_records(
    *, samples: int | Sequence[Sample] = 10, phases: Sequence[Phase] = (),
    alerts: Sequence[Alert] = (), lifecycle: bool = True, session_id: str = "s-0",
    start_ns: int = START_NS, rank: int = 0, world_size: int = 1,
    local_rank: int | None = None, job_id: str | None = None, schema_version: int = 3,
    **record_kwargs: Any,
) -> list[dict[str, Any]]:
    """Time-ordered :func:`make_record` records for samples, phase boundaries (from a
    fresh ``PhaseRecorder``, worker-thread phases really run on a worker thread),
    alerts and start/stop. Exact ``timestamp_ns = start_ns + round(t_s * 1e9)``."""
    recorder = PhaseRecorder()
    steps = _script(samples, phases, alerts, lifecycle=lifecycle, emit_deltas=False,
                    recorder=recorder, session_id=session_id, rank=rank)
    return [make_record(
        rank=rank, world_size=world_size, local_rank=local_rank, job_id=job_id,
        session_id=session_id, timestamp_ns=start_ns + st.offset_ns,
        event_type=st.event_type, allocated=st.allocated, reserved=st.reserved,
        change=st.change, device_used=st.device_used, device_total=st.device_total,
        context=st.context, metadata=st.metadata, schema_version=schema_version,
        **record_kwargs) for st in steps]


def write_json(path: str | Path, records: Sequence[Mapping[str, Any]], *,
               wrapper: Mapping[str, Any] | None = None) -> Path:
    """A JSON array (``json.dump(records, indent=2, default=str)`` as the trackers'
    ``export_events`` writes), or with ``wrapper`` an object ``{**wrapper, "events": [...]}``
    as the TensorFlow/JAX CLIs write (pass ``{}`` for a bare ``{"events": [...]}``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload: Any = list(records) if wrapper is None else {**wrapper, "events": list(records)}
    path.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    return path


def write_jsonl(path: str | Path, records: Sequence[Mapping[str, Any]]) -> Path:
    """One ``json.dumps(record, sort_keys=True)`` line per record: the sink's line
    format, hand-written here because stormlog only writes JSONL inside a sink."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(dict(r), sort_keys=True) + "\n" for r in records),
                    encoding="utf-8")
    return path


def write_phase_events(path: str | Path, *, phases: Sequence[Phase] = DEFAULT_PHASES,
                       alerts: Sequence[Alert] = DEFAULT_ALERTS, samples: int = 10,
                       **kwargs: Any) -> Path:
    """JSON array with nested phases (train > forward/backward), a ``dataloader`` phase on
    a second thread, warning + critical alerts and an OOM ``error`` event."""
    return write_json(path, timeline_records(samples=samples, phases=phases, alerts=alerts,
                                             **kwargs))


def write_sink(path: str | Path, *, records: Sequence[Mapping[str, Any]],
               rollover_max_events: int = 4, retention_max_files: int = 3,
               close_status: str | None = "completed",
               source: str = "stormlog.cuda_tracker",
               ended_at_ns: int | None = None) -> Path:
    """An ``AppendOnlyTelemetrySink`` directory: ``manifest.json`` + ``segment-NNNNNN.jsonl``.

    Consecutive records with the same session_id form one session, started with
    ``start_session(create_session_summary(...))`` (identity from its first record) and
    closed "completed" -- except the last, closed with ``close_status`` (None: flushed
    but never closed, i.e. the writer died; status stays "running"). One segment per
    ``rollover_max_events`` records; older closed segments beyond
    ``retention_max_files`` are deleted (their sessions stay in the manifest). The
    sink's clock (``now_ns``, used for ended_at_ns) is pinned to ``ended_at_ns``
    (default: last record's timestamp_ns). Writing to an existing sink appends, and
    turns its "running" sessions into "interrupted" ones.
    """
    if not records:
        raise ValueError("write_sink needs at least one record")
    groups: list[list[Mapping[str, Any]]] = []
    for record in records:
        if groups and groups[-1][0].get("session_id") == record.get("session_id"):
            groups[-1].append(record)
        else:
            groups.append([record])
    clock = [records[-1]["timestamp_ns"] if ended_at_ns is None else ended_at_ns]
    config = telemetry_sink.TelemetrySinkConfig(
        root_dir=Path(path), flush_every_events=rollover_max_events,
        flush_every_seconds=3600.0, rollover_max_events=rollover_max_events,
        retention_max_files=retention_max_files)
    final_clock = clock[0]
    with _swapped(telemetry_sink, now_ns=lambda: clock[0]):
        sink = telemetry_sink.AppendOnlyTelemetrySink(config)
        for number, group in enumerate(groups, start=1):
            first, last = group[0], number == len(groups)
            sink.start_session(create_session_summary(
                source=source, session_id=first.get("session_id") or f"sink-session-{number}",
                started_at_ns=first["timestamp_ns"], host=first["host"], pid=first["pid"],
                job_id=first.get("job_id"), rank=first.get("rank", 0),
                local_rank=first.get("local_rank", 0),
                world_size=first.get("world_size", 1)))
            for record in group:
                sink.append(record)
            clock[0] = final_clock if last else group[-1]["timestamp_ns"]
            if not last or close_status is not None:
                sink.close(session_status=close_status if last else "completed")
        if close_status is None:
            sink.flush(force=True)
            sink._stop_flush_thread()  # simulate the process dying after its last flush
            if sink._handle is not None:
                sink._handle.close()
    return Path(path)


def write_diagnose_bundle(
    path: str | Path, *, timestamps_s: Sequence[float], allocated: Sequence[int],
    reserved: Sequence[int] | None = None, rank: int | None = None,
    rank_field: str = "rank", local_rank: int | None = None, world_size: int | None = None,
    manifest: str | None = "new", session_id: str = "diagnose-0", status: str = "completed",
    created_iso: str = "2023-11-14T22:14:00.000000Z", started_at_ns: int | None = None,
    ended_at_ns: int | None = None, host: str = "diag-host", pid: int = 777,
) -> Path:
    """A ``stormlog diagnose`` bundle directory ``path``: environment.json,
    telemetry_timeline.json, diagnostic_summary.json and (unless ``manifest`` is None)
    manifest.json. ``timestamps_s`` are absolute epoch seconds (floats), memory bytes.

    stormlog.diagnose imports torch, so the files are written here in the exact shapes of
    ``run_diagnose``/``_write_manifest`` (json.dump indent=2). With ``reserved=None`` the
    timeline is ``CPUMemoryTracker.get_memory_timeline()`` over injected events (the CPU
    capture path: float values, reserved == allocated); otherwise the CUDA tracker's
    shape (int values). ``rank`` (diagnose never writes one) goes to the top level, to
    ``metadata`` or to ``distributed_identity`` per ``rank_field``, with local_rank and
    world_size when given. manifest "new": top-level session_id/session_status/
    created_iso plus a "session" summary object; "old": without "session" (version 1).
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if reserved is None:
        tracker = cpu_profiler.CPUMemoryTracker()
        for ts, alloc in zip(timestamps_s, allocated, strict=True):
            tracker.events.append(cpu_profiler.TrackingEvent(
                timestamp=ts, event_type="sample", memory_allocated=alloc,
                memory_reserved=alloc, memory_change=0, device_id=-1))
        timeline: dict[str, Any] = tracker.get_memory_timeline()
    else:
        timeline = {"timestamps": [float(t) for t in timestamps_s],
                    "allocated": [int(a) for a in allocated],
                    "reserved": [int(r) for r in reserved]}
    if rank is not None:
        ident = {k: v for k, v in (("rank", rank), ("local_rank", local_rank),
                                   ("world_size", world_size)) if v is not None}
        if rank_field == "rank":
            timeline.update(ident)
        else:
            timeline[rank_field] = ident
    files = {
        "environment.json": {"system": {"platform": "Linux", "detected_backend": "cpu"},
                             "gpu": {"error": "CUDA is not available"},
                             "fragmentation": {"error": "CUDA is not available"}},
        "telemetry_timeline.json": timeline,
        "diagnostic_summary.json": {
            "backend": "cpu", "allocated_bytes": 0, "reserved_bytes": 0, "peak_bytes": 0,
            "total_bytes": 0, "allocator_gap_bytes": 0, "utilization_ratio": 0.0,
            "fragmentation_ratio": 0.0, "num_ooms": 0,
            "risk_flags": {"oom_occurred": False, "high_utilization": False,
                           "fragmentation_warning": False}, "suggestions": []},
    }
    for name, payload in files.items():
        (path / name).write_text(json.dumps(payload, indent=2), encoding="utf-8")
    if manifest is not None:
        first, last = round(timestamps_s[0] * 1e9), round(timestamps_s[-1] * 1e9)
        summary = create_session_summary(
            source="gpumemprof diagnose", status=status, session_id=session_id,
            started_at_ns=first if started_at_ns is None else started_at_ns,
            ended_at_ns=(ended_at_ns if ended_at_ns is not None
                         else None if status == "running" else last),
            host=host, pid=pid)
        version = 2 if manifest == "new" else 1
        doc: dict[str, Any] = {
            "schema_version": version, "version": version, "created_iso": created_iso,
            "command_line": f"stormlog diagnose --output {path}",
            "native_history_enabled": False, "files": [*files, "manifest.json"],
            "exit_code": 0, "risk_detected": False, "session_id": summary.session_id,
            "session_status": summary.status}
        if manifest == "new":
            doc["session"] = session_summary_to_dict(summary)
        (path / "manifest.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def training(rank: int, *, leak_bytes_per_hour: float) -> list[Sample]:
    """Two hours at a sample per 30 s: a 10-minute warm-up ramp, then 3-minute steps whose
    activations rise and are freed (a sawtooth), plus ``leak_bytes_per_hour`` of steady growth."""
    out = []
    for i in range(240):
        t_s = i * 30.0
        warm = min(1.0, t_s / 600)
        allocated = int(8 * GIB * warm + (i % 6) * 512 * MIB + rank * 16 * MIB
                        + leak_bytes_per_hour * t_s / 3600)
        reserved = allocated + 3 * 512 * MIB - (i % 6) * 256 * MIB
        out.append(Sample(t_s, allocated, reserved, reserved + 256 * MIB, 80 * GIB))
    return out


def write_multi_rank_job(
    root: str | Path, *, world_size: int = 8, samples: int | Callable[[int], Sequence[Sample]] = 12,
    layout: str = "rank_dirs", fmt: str = "jsonl", missing_ranks: Sequence[int] = (),
    job_id: str = "job-1", gpus_per_node: int = 8, start_ns: int = START_NS,
    json_via: str = "records", phases: Sequence[Phase] = (), alerts: Sequence[Alert] = (),
    host_of: Callable[[int], str] | None = None, alerts_of: Callable[[int], Sequence[Alert]] | None = None,
) -> list[Path]:
    """One artifact per present rank sharing ``job_id``; returns their paths in rank order
    (pass them separately to the reference to get its distributed merge).

    layout "rank_dirs": ``root/rank_{r}/events.{json,csv,jsonl}`` or sink dir
    ``root/rank_{r}/telemetry/``; "flat": ``root/rank{r}_events.{json,csv,jsonl}`` or
    ``root/sink_rank{r}/``. csv (and json with ``json_via="tracker"``) use
    :func:`write_cpu_tracker_export`; jsonl/sink/json use :func:`timeline_records`.
    Rank r: session ``f"{job_id}-rank{r}"``, host ``node-{r // gpus_per_node}``,
    pid ``1000 + r``, local_rank/device ``r % gpus_per_node``; default samples are
    :func:`ramp` with base ``1 GiB + r * 16 MiB``. ``host_of(r)`` and ``alerts_of(r)``, when
    given, set a rank's host and alerts instead.
    """
    root = Path(root)
    paths: list[Path] = []
    for rank in range(world_size):
        if rank in missing_ranks:
            continue
        seq = samples(rank) if callable(samples) else ramp(samples, base=GIB + rank * 16 * MIB)
        local, host, pid = rank % gpus_per_node, f"node-{rank // gpus_per_node}", 1000 + rank
        host = host_of(rank) if host_of is not None else host
        rank_alerts = alerts_of(rank) if alerts_of is not None else alerts
        ident = dict(rank=rank, world_size=world_size, local_rank=local, job_id=job_id,
                     session_id=f"{job_id}-rank{rank}", start_ns=start_ns)
        base, stem = ((root / f"rank_{rank}", "events") if layout == "rank_dirs"
                      else (root, f"rank{rank}_events"))
        if fmt == "csv" or (fmt == "json" and json_via == "tracker"):
            paths.append(write_cpu_tracker_export(
                base / f"{stem}.{fmt}", fmt=fmt, samples=seq, host=host, pid=pid,
                phases=phases, alerts=rank_alerts, **ident))
            continue
        records = timeline_records(samples=seq, phases=phases, alerts=rank_alerts, host=host,
                                   pid=pid, device_id=local, **ident)
        if fmt == "json":
            paths.append(write_json(base / f"{stem}.json", records))
        elif fmt == "jsonl":
            paths.append(write_jsonl(base / f"{stem}.jsonl", records))
        elif fmt == "sink":
            sink_dir = base / "telemetry" if layout == "rank_dirs" else root / f"sink_rank{rank}"
            paths.append(write_sink(sink_dir, records=records, rollover_max_events=8,
                                    retention_max_files=10_000))
        else:
            raise ValueError(f"unknown fmt {fmt!r}")
    return paths



def write_attempt(
    root: str | Path, *, job_id: str, world_size: int = 4, start_ns: int = START_NS,
    close_status: str | None = "completed", samples: int = 12, attempt: str = "attempt-1",
    alerts_of: Callable[[int], Sequence[Alert]] | None = None,
) -> list[Path]:
    """One attempt of a job that may be restarted: per rank an ``AppendOnlyTelemetrySink`` at
    ``root/rank_{r}/{attempt}/`` holding the one session ``f"{job_id}-rank{r}"`` (so each rank is a
    single-session input and stormlog merges the attempt's ranks into one rank group; a restart
    gets a new ``job_id``: new sessions, a group of its own). ``close_status``: how every rank's sink
    closed its session ("completed"; "interrupted" as a writer stopped by a signal; None: never
    closed, "running"); only a completed capture ends with a ``stop`` event. Ranks run on
    ``node-{r // 2}``, samples are :func:`ramp` with base ``1 GiB + r * 16 MiB``; ``alerts_of(r)``
    gives a rank's alerts (``oom_alert(t)`` for an OOM). Returns the sink folders in rank order."""
    paths = []
    for rank in range(world_size):
        records = timeline_records(
            samples=ramp(samples, base=GIB + rank * 16 * MIB), alerts=alerts_of(rank) if alerts_of else (),
            lifecycle=close_status == "completed", session_id=f"{job_id}-rank{rank}", start_ns=start_ns,
            rank=rank, world_size=world_size, job_id=job_id, host=f"node-{rank // 2}", pid=1000 + rank,
            device_id=rank % 2)
        paths.append(write_sink(Path(root) / f"rank_{rank}" / attempt, records=records, rollover_max_events=8,
                                retention_max_files=10_000, close_status=close_status))
    return paths


def write_restarted_job(root: str | Path, *, world_size: int = 4, oom_rank: int = 3,
                        restart_after_s: float = 60.0) -> tuple[list[Path], list[Path]]:
    """A job whose first attempt hit an OOM on ``oom_rank`` (at +3 s) and was interrupted, restarted
    ``restart_after_s`` seconds after it began with a new run id (``train-run1`` then ``train-run2``)
    and new session ids, completing cleanly. Returns (attempt 1's, attempt 2's) sink folders."""
    first = write_attempt(root, job_id="train-run1", world_size=world_size, close_status="interrupted",
                          attempt="attempt-1", alerts_of=lambda rank: (oom_alert(3.0),) if rank == oom_rank else ())
    second = write_attempt(root, job_id="train-run2", world_size=world_size, attempt="attempt-2",
                           start_ns=START_NS + round(restart_after_s * 1e9))
    return first, second

# --- schema v4 (stormlog 0.4.3, stormlog/telemetry.py; not installable next to 0.3.5) ---
# Field lists copied by hand from 0.4.3: REQUIRED_V4_FIELDS == REQUIRED_V3_FIELDS,
# OPTIONAL_V4_FIELDS, _MEMORY_CAPABILITY_{STRING,BOOLEAN}_FIELDS, _COUNTER_CAPABILITY_FIELDS.
V4_REQUIRED_FIELDS = (
    "schema_version", "session_id", "timestamp_ns", "event_type", "collector",
    "sampling_interval_ms", "pid", "host", "device_id", "allocator_allocated_bytes",
    "allocator_reserved_bytes", "allocator_active_bytes", "allocator_inactive_bytes",
    "allocator_change_bytes", "device_used_bytes", "device_free_bytes",
    "device_total_bytes", "context", "metadata")
V4_OPTIONAL_FIELDS = ("job_id", "rank", "local_rank", "world_size")
V4_COUNTER_CAPABILITY = {
    "allocator_allocated_bytes": "supports_allocator_allocated",
    "allocator_reserved_bytes": "supports_allocator_reserved",
    "allocator_active_bytes": "supports_allocator_active",
    "allocator_inactive_bytes": "supports_allocator_inactive",
    "device_used_bytes": "supports_device_used",
    "device_free_bytes": "supports_device_free",
    "device_total_bytes": "supports_device_total"}
CAPABILITY_STRING_FIELDS = ("backend", "telemetry_collector", "sampling_source")
CAPABILITY_BOOLEAN_FIELDS = (
    *V4_COUNTER_CAPABILITY.values(), "supports_native_allocator_history",
    "supports_fragmentation_analysis", "supports_allocator_attribution",
    "supports_bounded_profiling")
CUDA_CAPABILITIES = {  # CudaDeviceCollector.capabilities().to_metadata()
    "backend": "cuda", "telemetry_collector": "stormlog.cuda_tracker",
    "sampling_source": "torch.cuda.memory_allocated/reserved",
    **dict.fromkeys(CAPABILITY_BOOLEAN_FIELDS, True)}
CPU_CAPABILITIES = {  # cpu_profiler._CPU_MEMORY_CAPABILITIES
    "backend": "cpu", "telemetry_collector": "stormlog.cpu_tracker",
    "sampling_source": "legacy", **dict.fromkeys(CAPABILITY_BOOLEAN_FIELDS, False),
    "supports_allocator_allocated": True, "supports_allocator_reserved": True,
    "supports_device_used": True, "supports_allocator_attribution": True}


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_v4_record(record: Mapping[str, Any]) -> None:
    """Raise ValueError unless ``record`` passes 0.4.3's ``validate_telemetry_record``
    for schema 4 (re-stated from its source; see the field lists above)."""
    def need(ok: bool, message: str) -> None:
        if not ok:
            raise ValueError(message)
    need(record.get("schema_version") == 4 and _int(record.get("schema_version")),
         "schema_version must be 4")
    missing = [name for name in V4_REQUIRED_FIELDS if name not in record]
    need(not missing, f"missing fields: {missing}")
    unknown = set(record) - set(V4_REQUIRED_FIELDS) - set(V4_OPTIONAL_FIELDS)
    need(not unknown, f"unknown fields: {sorted(unknown)}")
    for name in ("session_id", "event_type", "collector", "host"):
        need(isinstance(record[name], str) and bool(record[name].strip()), f"bad {name}")
    for name, low in (("timestamp_ns", 0), ("sampling_interval_ms", 0), ("pid", -1)):
        need(_int(record[name]) and record[name] >= low, f"bad {name}")
    need(_int(record["device_id"]), "bad device_id")
    job_id = record.get("job_id")
    need(job_id is None or (isinstance(job_id, str) and bool(job_id.strip())), "bad job_id")
    rank, world = record.get("rank", 0), record.get("world_size", 1)
    local = record.get("local_rank", rank)
    rank, world, local = (0 if rank is None else rank), (1 if world is None else world), (
        rank if local is None else local)
    need(_int(rank) and _int(local) and _int(world) and rank >= 0 and local >= 0
         and world >= 1, "bad rank/local_rank/world_size")
    need(rank < world and local < world, "rank and local_rank must be < world_size")
    for name in (*V4_COUNTER_CAPABILITY, "allocator_change_bytes"):
        value = record[name]
        need(value is None or _int(value), f"{name} must be an integer or null")
        if name != "allocator_change_bytes":
            need(value is None or value >= 0, f"{name} must be >= 0")
    total = record["device_total_bytes"]
    if total is not None:
        for name in ("device_used_bytes", "device_free_bytes"):
            need(record[name] is None or record[name] <= total, f"{name} exceeds total")
    need(record["context"] is None or isinstance(record["context"], str), "bad context")
    need(isinstance(record["metadata"], dict), "metadata must be an object")
    caps = record["metadata"].get("memory_capabilities")
    need(isinstance(caps, Mapping), "metadata.memory_capabilities must be an object")
    need(set(caps) == set(CAPABILITY_STRING_FIELDS + CAPABILITY_BOOLEAN_FIELDS),
         "memory_capabilities fields do not match")
    for name in CAPABILITY_STRING_FIELDS:
        need(isinstance(caps[name], str) and bool(caps[name].strip()), f"bad caps.{name}")
    for name in CAPABILITY_BOOLEAN_FIELDS:
        need(isinstance(caps[name], bool), f"caps.{name} must be a boolean")
    for name, cap in V4_COUNTER_CAPABILITY.items():
        need(record[name] is None or caps[cap], f"{name} must be null when {cap} is false")
    need(record["allocator_change_bytes"] is None or caps["supports_allocator_allocated"],
         "allocator_change_bytes must be null without allocator allocated support")


def make_v4_record(
    *, capabilities: Mapping[str, Any] = CUDA_CAPABILITIES, session_id: str = "s-0",
    timestamp_ns: int = START_NS, event_type: str = "sample",
    collector: str | None = None, sampling_interval_ms: int = 100, pid: int = 4242,
    host: str = "node-0", device_id: int = 0, allocated: int | None = None,
    reserved: int | None = None, active: int | None = None, inactive: int | None = None,
    change: int | None = None, device_used: int | None = None, device_free: int | None = None,
    device_total: int | None = None, context: str | None = None, job_id: str | None = None,
    rank: int = 0, local_rank: int | None = None, world_size: int = 1,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A schema-4 record as 0.4.3's ``telemetry_event_to_dict(TelemetryEventV4(...))``
    lays it out (same key order as v3). Counters are bytes and ``None`` means null
    (unsupported); ``metadata.memory_capabilities`` = ``capabilities``. Checked with
    :func:`check_v4_record`. stormlog 0.3.5 rejects these ("Unsupported schema_version")."""
    record = {
        "schema_version": 4, "session_id": session_id, "timestamp_ns": timestamp_ns,
        "event_type": event_type, "collector": collector or capabilities["telemetry_collector"],
        "sampling_interval_ms": sampling_interval_ms, "pid": pid, "host": host,
        "job_id": job_id, "rank": rank, "local_rank": rank if local_rank is None else local_rank,
        "world_size": world_size, "device_id": device_id,
        "allocator_allocated_bytes": allocated, "allocator_reserved_bytes": reserved,
        "allocator_active_bytes": active, "allocator_inactive_bytes": inactive,
        "allocator_change_bytes": change, "device_used_bytes": device_used,
        "device_free_bytes": device_free, "device_total_bytes": device_total,
        "context": context,
        "metadata": {**(metadata or {}), "memory_capabilities": dict(capabilities)}}
    check_v4_record(record)
    return record
