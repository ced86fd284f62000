"""Artifacts cut short the way a writer killed mid-write leaves them, from files stormlog's own
writer code wrote (:mod:`tests.builders`): the last line (or a JSON array) broken off partway, with
no trailing newline. Sizes in bytes; times in ns since the epoch."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tests import builders as b


@dataclass(frozen=True)
class Torn:
    """A file cut short: what is left of its last line (``partial_bytes``: what the loader does not
    read) and the timestamp of the last record left whole (None: no whole record is left)."""

    path: Path
    partial_bytes: int
    last_event_ns: int | None


def tear_last_line(path: Path, *, keep: float = 0.5) -> Torn:
    """Cut ``path``'s last line after ``keep`` of its bytes (at least one), dropping the rest and the
    trailing newline, in place (os.truncate: what a killed writer leaves, nothing rewritten)."""
    data = path.read_bytes()
    body = data[:-1] if data.endswith(b"\n") else data
    start = body.rfind(b"\n") + 1
    partial = max(1, int((len(body) - start) * keep))
    os.truncate(path, start + partial)
    lines = [line for line in body[:start].splitlines() if line.strip()]
    last = json.loads(lines[-1]).get("timestamp_ns") if lines else None
    return Torn(path, partial, last)


def last_segment(sink: Path) -> Path:
    return sorted(sink.glob("segment-*.jsonl"))[-1]


def torn_jsonl_job(root: Path, *, world_size: int = 2, torn_rank: int = 1,
                   samples: int = 40) -> tuple[list[Path], Torn]:
    """A ``world_size``-rank job folder of ``rank_{r}/events.jsonl`` files (session ``job-1-rank{r}``,
    a sample every 0.5 s), rank ``torn_rank``'s file cut in its last line."""
    paths = b.write_multi_rank_job(root, world_size=world_size, samples=samples, fmt="jsonl")
    return paths, tear_last_line(paths[torn_rank])


def killed_sink_job(root: Path, *, world_size: int = 2, torn_rank: int = 1, samples: int = 12,
                    job_id: str = "run-1", attempt: str = "attempt-1", start_ns: int = b.START_NS,
                    oom: bool = False) -> tuple[list[Path], Torn]:
    """One attempt of ``world_size`` ranks, each an ``AppendOnlyTelemetrySink`` whose writer died
    (session never closed: ``running``, no stop event); ``torn_rank``'s last segment cut in its last
    line. ``oom``: ``torn_rank`` reports an OOM at +3 s first."""
    paths = b.write_attempt(root, job_id=job_id, world_size=world_size, close_status=None, samples=samples,
                            attempt=attempt, start_ns=start_ns,
                            alerts_of=lambda rank: (b.oom_alert(3.0),) if oom and rank == torn_rank else ())
    return paths, tear_last_line(last_segment(paths[torn_rank]))


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root``: its bytes and mtime (ns), to show inputs are never modified."""
    return {str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mtime_ns)
            for path in sorted(root.rglob("*")) if path.is_file()}
