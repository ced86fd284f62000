"""Jobs written by stormlog 0.4.3's own code, for shapes the hand-built jobs do not cover:

* :func:`write_cuda_bundle_job`: ``stormlog diagnose`` bundles (``stormlog.diagnose.run_diagnose``), one per rank;
* :func:`write_jax_bundle_job`: the JAX tracker's bundles (``stormlog.jax.diagnose.run_diagnose``), one per rank;
* :func:`write_sink_job`: ``MemoryTracker`` telemetry sinks that roll over, prune by retention and write rollups,
  each rank run twice (a restart: the second session appends to the first one's sink), with the identity
  taken from torchelastic's or SLURM's environment.

0.4.3 runs in subprocesses with ``PYTHONPATH`` on its private copy (:func:`tests.reference_model.ensure_stormlog43`)
and on import-only stand-ins for the frameworks it imports (torch, jax), written to a temporary folder. Memory
comes from scripts, never from a device: the CUDA tracker takes a :class:`DeviceMemoryCollector` (``collector=``);
``run_diagnose`` builds its tracker itself, so the writer hands it a ``MemoryTracker`` subclass that passes the
scripted collector and reports a CUDA runtime; the JAX tracker reads ``device.memory_stats()`` of the jax
stand-in's one device, which replays a script. Times are the wall clock's, so a job differs from run to run:
compare models, not bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from tests.reference_model import _clean_env, ensure_stormlog43

GIB = 1 << 30

#: The torch stand-in: stormlog 0.4.3's trackers import torch; given a ``collector`` they sample through it alone.
TORCH_STANDIN = '''
class device:
    def __init__(self, spec="cpu"):
        self.type = str(spec).split(":")[0]
class _Cuda:
    class OutOfMemoryError(RuntimeError):
        pass
    @staticmethod
    def is_available():
        return False
    @staticmethod
    def device_count():
        return 0
class _Version:
    cuda = None
    hip = None
class _Mps:
    @staticmethod
    def is_available():
        return False
    @staticmethod
    def is_built():
        return False
class _Backends:
    mps = _Mps()
cuda = _Cuda()
version = _Version()
backends = _Backends()
__version__ = "0.0-standin"
'''

#: The jax stand-in: one GPU device whose ``memory_stats()`` replays ``SCRIPT`` (a list of
#: ``(bytes_in_use, bytes_reserved)`` set by the writer), one entry per call, holding the last.
_JAX_STANDIN = '''
__version__ = "0.4.30"
SCRIPT = []
LIMIT_BYTES = 80 * (1 << 30)
class _Ready:
    def block_until_ready(self):
        return self
class Device:
    platform = "gpu"
    device_kind = "stand-in GPU"
    id = 0
    process_index = 0
    client = None
    def __init__(self):
        self.calls = 0
    def memory_stats(self):
        in_use, reserved = SCRIPT[min(self.calls, len(SCRIPT) - 1)]
        self.calls += 1
        return {"bytes_in_use": in_use, "bytes_reserved": reserved, "peak_bytes_in_use": in_use,
                "bytes_limit": LIMIT_BYTES}
_DEVICE = Device()
def local_devices():
    return [_DEVICE]
def devices(backend=None):
    return [_DEVICE]
def default_backend():
    return "gpu"
def clear_caches():
    pass
class numpy:
    @staticmethod
    def zeros(shape, device=None):
        return _Ready()
'''

#: A CUDA collector replaying ``values`` (allocated bytes), one per sample, holding the last; reserved is
#: allocated + ``gap`` bytes, the device's 80 GiB otherwise used by 1 GiB of context.
SCRIPTED_COLLECTOR = r'''
from stormlog.device_collectors import (DeviceMemoryCapabilities, DeviceMemoryCollector, DeviceMemorySample,
                                        DeviceMemorySampleResult)
GIB = 1 << 30
TOTAL = 80 * GIB
class Scripted(DeviceMemoryCollector):
    telemetry_collector = "stormlog.cuda_collector"
    def __init__(self, values, gaps, device_id):
        self.values, self.gaps, self.device_id, self.i = values, gaps, device_id, 0
    def name(self):
        return "cuda"
    def is_available(self):
        return True
    def sample(self):
        at = min(self.i, len(self.values) - 1)
        allocated, reserved = self.values[at], self.values[at] + self.gaps[at]
        self.i += 1
        return DeviceMemorySample(allocated_bytes=allocated, reserved_bytes=reserved, used_bytes=reserved + GIB,
                                  free_bytes=TOTAL - reserved - GIB, total_bytes=TOTAL, active_bytes=allocated,
                                  inactive_bytes=reserved - allocated, device_id=self.device_id)
    def sample_with_diagnostics(self):
        return DeviceMemorySampleResult(sample=self.sample())
    def capabilities(self):
        return DeviceMemoryCapabilities(backend="cuda", telemetry_collector=self.telemetry_collector,
                                        sampling_source="scripted", supports_allocator_allocated=True,
                                        supports_allocator_reserved=True, supports_allocator_active=True,
                                        supports_allocator_inactive=True, supports_device_used=True,
                                        supports_device_free=True, supports_device_total=True)
'''

_CUDA_BUNDLE_WRITER = SCRIPTED_COLLECTOR + r'''
import json, sys, time
args = json.loads(sys.argv[1])
import stormlog.diagnose as diagnose
import stormlog.tracker as tracker_module
class Late(Scripted):
    """The tracking thread's first sample (the second call: the tracker samples once when built) comes two
    intervals late, so the timeline's first bucket holds the start event alone."""
    def sample(self):
        if self.i == 1:
            time.sleep(2 * args["interval"])
        return super().sample()
class ScriptedTracker(tracker_module.MemoryTracker):
    def __init__(self, device=None, **options):
        late = args["first_bucket"] == "start_only"
        super().__init__(collector=(Late if late else Scripted)(args["allocated"], args["gaps"], args["rank"]),
                         **options)
    def _add_event(self, event_type, *rest, **options):
        if event_type == "start" and args["first_bucket"] == "sampled":
            # the start event comes after the first sample, in its bucket, and carries its values
            time.sleep(1.5 * args["interval"])
        super()._add_event(event_type, *rest, **options)
# run_diagnose builds its own tracker: a CUDA runtime is reported and the tracker gets the script
diagnose.detect_torch_runtime_backend = lambda: "cuda"
tracker_module.MemoryTracker = ScriptedTracker
folder, code = diagnose.run_diagnose(output=args["folder"], device=None, duration=args["seconds"],
                                     interval=args["interval"], command_line="stormlog diagnose")
if not (folder / "telemetry_timeline.json").exists():
    raise SystemExit(f"no timeline written (exit code {code})")
'''

_JAX_BUNDLE_WRITER = r'''
import json, sys
args = json.loads(sys.argv[1])
import jax
jax.SCRIPT[:] = [(a, a + g) for a, g in zip(args["allocated"], args["gaps"])]
from stormlog.jax.diagnose import run_diagnose
folder, code = run_diagnose(output=args["folder"], device_index=0, duration=args["seconds"],
                            interval=args["interval"], command_line="stormlog-jax diagnose")
timeline = json.loads((folder / "telemetry_timeline.json").read_text())
if not timeline["timestamps"]:
    raise SystemExit(f"no samples in the timeline (exit code {code}): {timeline}")
'''

_SINK_WRITER = SCRIPTED_COLLECTOR + r'''
import json, sys, time
args = json.loads(sys.argv[1])
from stormlog.telemetry_sink import TelemetrySinkConfig
from stormlog.tracker import MemoryTracker
sink = TelemetrySinkConfig(root_dir=args["folder"], flush_every_events=args["flush_every_events"],
                           rollover_max_events=args["rollover_max_events"],
                           retention_max_files=args["retention_max_files"], write_rollups=True,
                           rollup_window_seconds=1)
# identity from the environment alone (torchelastic's or SLURM's variables)
tracker = MemoryTracker(collector=Scripted(args["allocated"], args["gaps"], args["local_rank"]),
                        sampling_interval=args["interval"], telemetry_sink_config=sink)
tracker.start_tracking()
time.sleep(args["seconds"])
tracker.stop_tracking()
'''


class FirstBucket(Enum):
    """What the first ``interval`` of a CUDA bundle's timeline holds. The tracker's start event carries no
    sample (its allocated and reserved are null) and the tracking thread samples one interval after it starts,
    so which one the first bucket ends with is a race; the writer decides it by a delay."""

    #: the start event alone: the timeline's first allocated and reserved are null
    START_ONLY = "start_only"
    #: the first sample, then the start event carrying that sample's values
    SAMPLED = "sampled"


class Launcher(Enum):
    """Who started the ranks, by the environment variables stormlog reads the identity from."""

    TORCHELASTIC = "torchelastic"
    SLURM = "slurm"

    def environment(self, *, job_id: str, rank: int, world_size: int) -> dict[str, str]:
        """The variables the launcher sets for ``rank`` (one node: local rank = rank)."""
        if self is Launcher.TORCHELASTIC:
            return {"TORCHELASTIC_RUN_ID": job_id, "RANK": str(rank), "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": str(world_size)}
        return {"SLURM_JOB_ID": job_id, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank),
                "SLURM_NTASKS": str(world_size)}


#: Variables of either launcher, removed from the writers' environment so only the chosen one speaks.
_IDENTITY_VARIABLES = ("TORCHELASTIC_RUN_ID", "RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_JOB_ID", "SLURM_PROCID",
                       "SLURM_LOCALID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                       "OMPI_COMM_WORLD_SIZE")


@dataclass(frozen=True)
class SinkPolicy:
    """A sink small enough to roll over and prune within a short run: a segment per
    ``rollover_max_events`` events, at most ``retention_max_files`` kept, flushed every
    ``flush_every_events`` events."""

    flush_every_events: int = 5
    rollover_max_events: int = 15
    retention_max_files: int = 6


def _standins(folder: Path) -> Path:
    """The folder holding the torch and jax stand-ins (written once)."""
    root = folder.parent / f"{folder.name}-standins"
    for name, source in (("torch", TORCH_STANDIN), ("jax", _JAX_STANDIN)):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "__init__.py").write_text(source)
    return root


def _environment(folder: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    clean = {k: v for k, v in _clean_env().items() if k not in _IDENTITY_VARIABLES}
    return {**clean, **(extra or {}), "PYTHONPATH": f"{_standins(folder)}:{ensure_stormlog43()}"}


def _run_all(script: str, runs: list[tuple[dict[str, object], dict[str, str]]]) -> None:
    """Run ``script`` once per (arguments, environment), side by side; raise on any failure."""
    started = [subprocess.Popen([sys.executable, "-c", script, json.dumps(args)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for args, env in runs]
    for process in started:
        _, err = process.communicate(timeout=180)
        if process.returncode != 0:
            raise RuntimeError(f"stormlog 0.4.3 writer failed ({process.returncode}):\n{err}")


def climbing_sawtooth(rank: int, count: int, *, offset: int = 0) -> tuple[list[int], list[int]]:
    """``count`` samples of allocated bytes (a sawtooth of period 7 climbing 0.05 GiB a sample, from
    ``10 + rank`` GiB) and the reserved-minus-allocated gap in bytes (0.5 GiB, 3 GiB every 11th sample so
    the gap ratio breaches); ``offset`` continues the script where an earlier session stopped."""
    steps = range(offset, offset + count)
    allocated = [int((10 + rank + (i % 7) + i * 0.05) * GIB) for i in steps]
    gaps = [3 * GIB if i % 11 == 10 else GIB // 2 for i in steps]
    return allocated, gaps


def write_cuda_bundle_job(folder: Path, first_bucket: FirstBucket, *, world_size: int = 4,
                          duration_s: float = 0.8, interval_s: float = 0.02) -> Path:
    """``folder/rank_<n>/bundle/`` for each rank: 0.4.3's ``stormlog diagnose`` bundle of a ``duration_s``
    long capture sampled (and bucketed) every ``interval_s`` seconds, its first bucket as ``first_bucket``
    says; returns ``folder``."""
    runs = []
    for rank in range(world_size):
        allocated, gaps = climbing_sawtooth(rank, 400)
        args = {"folder": str(folder / f"rank_{rank}" / "bundle"), "rank": rank, "allocated": allocated,
                "gaps": gaps, "seconds": duration_s, "interval": interval_s, "first_bucket": first_bucket.value}
        runs.append((args, _environment(folder)))
    _run_all(_CUDA_BUNDLE_WRITER, runs)
    return folder


def write_jax_bundle_job(folder: Path, *, world_size: int = 4, duration_s: float = 0.8,
                         interval_s: float = 0.02) -> Path:
    """``folder/rank_<n>/bundle/`` for each rank: 0.4.3's JAX ``run_diagnose`` bundle; returns ``folder``."""
    runs = []
    for rank in range(world_size):
        allocated, gaps = climbing_sawtooth(rank, 400)
        args = {"folder": str(folder / f"rank_{rank}" / "bundle"), "allocated": allocated, "gaps": gaps,
                "seconds": duration_s, "interval": interval_s}
        runs.append((args, _environment(folder)))
    _run_all(_JAX_BUNDLE_WRITER, runs)
    return folder


def write_sink_job(folder: Path, launcher: Launcher, *, job_id: str, world_size: int = 4,
                   session_durations_s: tuple[float, ...] = (0.5, 0.15), policy: SinkPolicy | None = None,
                   interval_s: float = 0.01) -> Path:
    """``folder/rank_<n>/telemetry/``: each rank's sink, written by one tracker session per entry of
    ``session_durations_s`` (its length in seconds), one after another: a restart appending to the sink the
    earlier session closed. The identity comes from ``launcher``'s variables. Returns ``folder``."""
    chosen = policy or SinkPolicy()
    per_session = 400
    for session, seconds in enumerate(session_durations_s):
        runs = []
        for rank in range(world_size):
            allocated, gaps = climbing_sawtooth(rank, per_session, offset=session * per_session)
            args = {"folder": str(folder / f"rank_{rank}" / "telemetry"), "local_rank": rank,
                    "allocated": allocated, "gaps": gaps, "seconds": seconds, "interval": interval_s,
                    "flush_every_events": chosen.flush_every_events,
                    "rollover_max_events": chosen.rollover_max_events,
                    "retention_max_files": chosen.retention_max_files}
            runs.append((args, _environment(folder, launcher.environment(job_id=job_id, rank=rank,
                                                                          world_size=world_size))))
        _run_all(_SINK_WRITER, runs)
    return folder
