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
from tests.stormlog43_writers import SCRIPTED_COLLECTOR, TORCH_STANDIN

#: PyTorch's wording of the error the OOM rank raises: 2 GiB asked for, 1.1 GiB free of 80 GiB.
OOM_MESSAGE = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU {rank} has a total capacity of 80.00 GiB "
               "of which 1.10 GiB is free.")

#: One rank: the shared scripted collector (a climbing sawtooth, reserved 0.5 GiB above), a sink, a dump.
_WRITER = SCRIPTED_COLLECTOR + r'''
import json, sys, time
from pathlib import Path
args = json.loads(sys.argv[1])
from stormlog.telemetry_sink import TelemetrySinkConfig
from stormlog.tracker import MemoryTracker
import torch
root = Path(args["folder"])
values = [int((10 + (i % 7) + i * 0.5) * GIB) for i in range(args["samples"])]
sink = TelemetrySinkConfig(root_dir=root / "telemetry") if args["sink"] else None
collector = Scripted(values, [GIB // 2] * len(values), args["rank"])
tracker = MemoryTracker(collector=collector, sampling_interval=0.01, enable_oom_flight_recorder=True,
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
    (standin / "__init__.py").write_text(TORCH_STANDIN)
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
