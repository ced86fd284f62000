"""MLX capture bundles written by stormlog 0.4.3's own ``CaptureBundle`` / ``MemoryTracker``.

MLX is not installed here (it needs Apple Silicon), so the writer runs 0.4.3 in a
subprocess (``PYTHONPATH``: the private 0.4.3 copy, :func:`tests.reference_model.ensure_stormlog43`)
next to a stand-in ``mlx`` package written to a temporary folder: ``mlx.core``
with exactly what 0.4.3's ``MLXRuntime`` and ``MLXCollector`` call (``metal.is_available``,
``get_active_memory`` / ``get_cache_memory`` / ``get_peak_memory`` / ``get_memory_limit``,
``reset_peak_memory``, ``eval``, ``synchronize``, ``default_stream``, ``gpu``,
``device_info``) plus an ``mlx`` dist-info, since 0.4.3 checks the installed version.
Active memory is a deterministic sawtooth per read; a cache read may be told to
fail, so the tracker emits its ``collector_degraded`` / ``collector_recovered`` events.

Three things are pinned so that a bundle is the same on every run: the platform
(``MLXRuntime(platform_system="Darwin", platform_machine="arm64")``, its own seam);
the collector's clock (ranks are written one after another in one process, yet their
samples should line up in time as a job's would); and the sample count (the writer
takes each sample itself; the sampler thread only waits to be stopped).

A bundle holds ``tracking.json`` (``{"session_summary": ..., "telemetry_events": [...]}``),
the tracker's sink under ``telemetry/``, and ``environment.json``, ``diagnostic_summary.json``,
``manifest.json``, ``report.json``. Units: memory in bytes, times in ns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.builders import GIB, MIB, START_NS

MLX_STANDIN_VERSION = "0.32.3"  # the oldest MLX 0.4.3 accepts
JOB_ID = "mlx-job-7"
SAMPLE_INTERVAL_NS = 500_000_000

_STANDIN_CORE = r'''
"""A stand-in for mlx.core: what stormlog 0.4.3's MLX tracker reads, nothing more."""
import types

_state = {"reads": 0, "cache_reads": 0, "base_bytes": 0, "step_bytes": 0, "period": 1, "cache_failures": (),
          "spikes": {}}


def _standin_reset(*, base_bytes, step_bytes, period, cache_failures, spikes):
    _state.update(reads=0, cache_reads=0, base_bytes=base_bytes, step_bytes=step_bytes, period=period,
                  cache_failures=tuple(cache_failures), spikes={int(read): extra for read, extra in spikes.items()})


def get_active_memory():
    _state["reads"] += 1
    reads = _state["reads"]
    return _state["base_bytes"] + (reads % _state["period"]) * _state["step_bytes"] + _state["spikes"].get(reads, 0)


def get_cache_memory():
    _state["cache_reads"] += 1
    if _state["cache_reads"] in _state["cache_failures"]:
        raise RuntimeError("[metal] cache counter unavailable")
    return 256 * 1024**2


def get_peak_memory():
    return _state["base_bytes"] + _state["period"] * _state["step_bytes"]


def get_memory_limit():
    return 48 * 1024**3


def reset_peak_memory():
    pass


def eval(*roots):
    pass


def synchronize(stream=None):
    pass


gpu = "gpu"


def default_stream(device):
    return "stream"


def device_info(device):
    return {"architecture": "applegpu_g15s", "memory_size": 64 * 1024**3,
            "max_recommended_working_set_size": 48 * 1024**3}


metal = types.SimpleNamespace(is_available=lambda: True, get_active_memory=get_active_memory,
                              get_cache_memory=get_cache_memory, get_peak_memory=get_peak_memory)
'''

_WRITER = r"""
import json, sys, time, types
import mlx.core as core
from stormlog.mlx import collector as mlx_collector
from stormlog.mlx import sampling
from stormlog.mlx.artifacts import CaptureBundle, CaptureOptions, Outcome
from stormlog.mlx.runtime import MLXRuntime

sampling.Sampler._run = lambda self: self._stop.wait()  # samples are taken below, one by one
spec = json.load(sys.stdin)
for item in spec["bundles"]:
    core._standin_reset(**item["memory"])
    ticks = iter(range(10**9))
    mlx_collector.time = types.SimpleNamespace(
        time_ns=lambda: spec["start_ns"] + next(ticks) * spec["interval_ns"], perf_counter_ns=time.perf_counter_ns)
    options = CaptureOptions(interval=spec["interval_ns"] / 1e9, job_id=spec["job_id"], rank=item["rank"],
                             local_rank=item["rank"], world_size=spec["world_size"])
    bundle = CaptureBundle(item["path"], "track", options)
    bundle.start(MLXRuntime(platform_system="Darwin", platform_machine="arm64"))
    tracker = bundle.tracker
    phases = {int(index): name for index, name in item["phases"].items()}  # JSON keys are strings
    for index in range(item["samples"]):
        if index in phases:
            with tracker.phase(phases[index]):
                tracker._sample()
        else:
            tracker._sample()
    bundle.finish(Outcome())
"""


@dataclass(frozen=True)
class MLXRank:
    """One rank's bundle: ``samples`` samples after the tracker's ``start`` sample; active
    memory ``base_bytes + (read % period) * step_bytes`` plus ``spikes[read]`` (reads count
    from 1: the ``start`` sample, then one per sample and phase boundary); ``phases``:
    sample index -> the phase that sample is taken in (its enter and exit are samples too);
    ``cache_failures``: 1-based cache reads that fail."""

    rank: int
    samples: int = 24
    base_bytes: int = GIB
    step_bytes: int = 64 * MIB
    period: int = 8
    phases: dict[int, str] = field(default_factory=dict)
    cache_failures: tuple[int, ...] = ()
    spikes: dict[int, int] = field(default_factory=dict)


def write_standin_mlx(folder: Path) -> Path:
    """The stand-in ``mlx`` package and its dist-info under ``folder``; returns ``folder``."""
    core = folder / "mlx" / "core"
    core.mkdir(parents=True)
    (folder / "mlx" / "__init__.py").write_text('"""A stand-in for MLX (import only)."""\n')
    (core / "__init__.py").write_text(_STANDIN_CORE)
    info = folder / f"mlx-{MLX_STANDIN_VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: mlx\nVersion: {MLX_STANDIN_VERSION}\n")
    return folder


def write_mlx_bundles(root: Path, ranks: Sequence[MLXRank], *, stormlog43: Path, world_size: int | None = None,
                      job_id: str = JOB_ID) -> list[Path]:
    """One 0.4.3 MLX capture bundle per rank, at ``root / f"rank_{rank}"``; returns those
    folders in the order given. ``world_size`` defaults to the number of ranks."""
    bundles = []
    for spec in ranks:
        memory = {"base_bytes": spec.base_bytes, "step_bytes": spec.step_bytes, "period": spec.period,
                  "cache_failures": list(spec.cache_failures),
                  "spikes": {str(read): extra for read, extra in spec.spikes.items()}}
        bundles.append({"rank": spec.rank, "path": str(root / f"rank_{spec.rank}"), "samples": spec.samples,
                        "phases": {str(k): v for k, v in spec.phases.items()}, "memory": memory})
    payload = {"bundles": bundles, "job_id": job_id, "world_size": world_size or len(ranks),
               "start_ns": START_NS, "interval_ns": SAMPLE_INTERVAL_NS}
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mlx-standin-") as standin:
        write_standin_mlx(Path(standin))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
        env["PYTHONPATH"] = os.pathsep.join([str(stormlog43), standin])
        done = subprocess.run([sys.executable, "-c", _WRITER], input=json.dumps(payload), text=True,
                              capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"stormlog 0.4.3 MLX writer failed:\n{done.stderr}")
    return [Path(item["path"]) for item in bundles]
