"""Jobs written by stormlog 0.4.3's own ``MemoryTracker``: a telemetry sink per rank and, on the rank
that runs out of memory, the ``OOMFlightRecorder``'s dump (``handle_exception`` with a CUDA OOM error).

0.4.3 runs in a subprocess with ``PYTHONPATH`` on its private copy (:func:`tests.reference_model.ensure_stormlog43`)
and on an import-only ``torch`` stand-in: the tracker imports torch, but with a ``collector`` given it
samples through that collector alone (a scripted, climbing sawtooth of allocated memory on an 80 GiB
device). Times are the wall clock's, so a job differs from run to run; compare models, not bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.reference_model import _clean_env, ensure_stormlog43

#: PyTorch's wording of the error the OOM rank raises: 2 GiB asked for, 1.1 GiB free of 80 GiB.
OOM_MESSAGE = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU {rank} has a total capacity of 80.00 GiB "
               "of which 1.10 GiB is free.")

_TORCH_STANDIN = '''
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

_WRITER = r'''
import json, sys, time
from pathlib import Path
args = json.loads(sys.argv[1])
from stormlog.device_collectors import (DeviceMemoryCapabilities, DeviceMemoryCollector, DeviceMemorySample,
                                        DeviceMemorySampleResult)
from stormlog.telemetry_sink import TelemetrySinkConfig
from stormlog.tracker import MemoryTracker
import torch
GIB = 1 << 30
TOTAL = 80 * GIB
class Scripted(DeviceMemoryCollector):
    telemetry_collector = "stormlog.cuda_collector"
    def __init__(self, values):
        self.values, self.i = values, 0
    def name(self):
        return "cuda"
    def is_available(self):
        return True
    def sample(self):
        allocated = self.values[min(self.i, len(self.values) - 1)]
        self.i += 1
        return DeviceMemorySample(allocated_bytes=allocated, reserved_bytes=allocated + GIB // 2,
                                  used_bytes=allocated + GIB, free_bytes=TOTAL - allocated - GIB, total_bytes=TOTAL,
                                  active_bytes=allocated, inactive_bytes=0, device_id=args["rank"])
    def sample_with_diagnostics(self):
        return DeviceMemorySampleResult(sample=self.sample())
    def capabilities(self):
        return DeviceMemoryCapabilities(backend="cuda", telemetry_collector=self.telemetry_collector,
                                        sampling_source="scripted", supports_allocator_allocated=True,
                                        supports_allocator_reserved=True, supports_allocator_active=True,
                                        supports_allocator_inactive=True, supports_device_used=True,
                                        supports_device_free=True, supports_device_total=True)
root = Path(args["folder"])
values = [int((10 + (i % 7) + i * 0.5) * GIB) for i in range(args["samples"])]
sink = TelemetrySinkConfig(root_dir=root / "telemetry") if args["sink"] else None
tracker = MemoryTracker(collector=Scripted(values), sampling_interval=0.01, enable_oom_flight_recorder=True,
                        oom_dump_dir=str(root / "oom_dumps"), oom_buffer_size=args["buffer"], job_id=args["job_id"],
                        rank=args["rank"], local_rank=args["rank"], world_size=args["world"],
                        telemetry_sink_config=sink)
tracker.start_tracking()
time.sleep(args["seconds"])
if args["oom"]:
    error = torch.cuda.OutOfMemoryError(args["message"])
    if tracker.handle_exception(error, context="train/backward") is None:
        raise SystemExit("the flight recorder wrote no dump")
tracker.stop_tracking()
'''


@dataclass(frozen=True)
class RankSpec:
    """One rank of a job: ``sink``: a telemetry sink under ``rank_<n>/telemetry``; ``oom``: it raises a
    CUDA OOM at the end, which the flight recorder dumps under ``rank_<n>/oom_dumps/`` (its ring
    buffer holds the last ``buffer`` events)."""

    rank: int
    sink: bool = True
    oom: bool = False
    buffer: int = 64


def write_oom_job(folder: Path, ranks: list[RankSpec], *, job_id: str = "job-oom", seconds: float = 0.6) -> Path:
    """``folder/rank_<n>/`` for each of ``ranks``, written side by side by 0.4.3's tracker; returns ``folder``."""
    standin = folder.parent / f"{folder.name}-torch-standin" / "torch"
    standin.mkdir(parents=True, exist_ok=True)
    (standin / "__init__.py").write_text(_TORCH_STANDIN)
    env = {**_clean_env(), "PYTHONPATH": f"{standin.parent}:{ensure_stormlog43()}"}
    runs = []
    for spec in ranks:
        args = {**asdict(spec), "folder": str(folder / f"rank_{spec.rank}"), "world": len(ranks), "job_id": job_id,
                "samples": 60, "seconds": seconds, "message": OOM_MESSAGE.format(rank=spec.rank)}
        runs.append(subprocess.Popen([sys.executable, "-c", _WRITER, json.dumps(args)], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for run in runs:
        out, err = run.communicate(timeout=120)
        if run.returncode != 0:
            raise RuntimeError(f"stormlog 0.4.3 writer failed ({run.returncode}):\n{err}")
    return folder
