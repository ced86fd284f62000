"""model.json and fleet.json documents for the report tests.

Job documents come from real diagnoses of artifacts written by stormlog's own writer
code (tests/builders.py, tests/model_builders.py); the fleet documents use the shape the
pipeline writes (see reports/fleetview.py), built here by :func:`make_fleet`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from stormwatch.diagnose import diagnose
from stormwatch.outputs.document import JobDocument
from tests import builders as b

SCRIPT_PAYLOAD = "<script>alert(1)</script>"
IMG_PAYLOAD = '"><img src=x onerror=alert(1)>'
HOSTILE = f"{SCRIPT_PAYLOAD}{IMG_PAYLOAD}"


def diagnosed(root: Path, *, job_id: str, source_name: str | None = None) -> dict[str, Any]:
    """Diagnose the job folder ``root`` and return its parsed model.json."""
    result = diagnose([root], job_id=job_id, source_name=source_name or str(root))
    return orjson.loads(result.model_json())


def read(document: Mapping[str, Any]) -> JobDocument:
    """A parsed model.json (as a test built or changed it) as the pipeline reads it back."""
    return JobDocument.from_data(document, name=f"{document.get('job_id')}/model.json")


def write_hostile_job(root: Path, *, world_size: int = 2) -> list[Path]:
    """Ranks whose host, job id, session id, alert contexts, alert metadata and phase names
    carry markup payloads; rank 1 also has an OOM whose reason is a payload."""
    paths = []
    alerts = [
        b.Alert(1.0, "warning", f"ctx {SCRIPT_PAYLOAD}", {"note": IMG_PAYLOAD, SCRIPT_PAYLOAD: 1}),
        b.Alert(2.0, "error", f"ctx {IMG_PAYLOAD}", {"oom_reason": HOSTILE}),
    ]
    phases = [b.Phase("train", 0.25, 4.0), b.Phase(f"step {SCRIPT_PAYLOAD}", 0.5, 1.5)]
    for rank in range(world_size):
        records = b.timeline_records(
            samples=b.ramp(10, base=b.GIB + rank * 16 * b.MIB), phases=phases, alerts=alerts,
            session_id=f"{HOSTILE}-rank{rank}", rank=rank, world_size=world_size, job_id=HOSTILE,
            host=f"node-{IMG_PAYLOAD}", pid=1000 + rank, device_id=rank,
        )
        paths.append(b.write_jsonl(root / f"rank_{rank}" / "events.jsonl", records))
    return paths


# --- synthetic large model.json -----------------------------------------------------------

def large_document(*, ranks: int = 16, samples: int = 100_000, seed: int = 7) -> dict[str, Any]:
    """A model.json dict of ``ranks`` x ``samples`` timelines (numpy-generated, lists as after
    JSON), a hidden-gap spike on rank 5, drift on rank 11, phases, alerts and an OOM marker."""
    rng = np.random.default_rng(seed)
    start = b.START_NS
    stamps = start + np.arange(samples, dtype=np.int64) * 10_000_000  # 100 Hz, 1000 s
    spike = samples * 61 // 100
    rows, timelines, markers = [], {}, {}
    for rank in range(ranks):
        allocated = (8 * b.GIB + rank * 64 * b.MIB + np.cumsum(rng.integers(-2, 3, samples)) * b.MIB).astype(np.int64)
        reserved = allocated + 512 * b.MIB + rng.integers(0, 64, samples) * b.MIB
        gap = (256 * b.MIB + rng.integers(-8, 8, samples) * b.MIB).astype(np.int64)
        if rank == 5:
            gap[spike] = 9 * b.GIB
        if rank == 11:
            gap += np.linspace(0, 4 * b.GIB, samples).astype(np.int64)
        timelines[str(rank)] = {"timestamps_ns": stamps.tolist(), "allocated": allocated.tolist(),
                                "reserved": reserved.tolist(), "gap": gap.tolist()}
        markers[str(rank)] = [
            _marker(start + 400 * 10**9, "alert", "warning", "Memory usage above 80%", rank),
            _marker(start + 700 * 10**9, "oom", "critical", "OOM detected", rank),
            *[_marker(start + step * 10**10, "phase", "info", f"Phase: train / step {step}", rank,
                      end_ns=start + (step + 1) * 10**10 - 10**8, path=["train", f"step {step}"])
              for step in range(100)],
        ]
        rows.append({"rank": rank, "availability": "present", "samples": samples,
                     "allocated_delta_bytes": int(allocated[-1] - allocated[0]),
                     "reserved_delta_bytes": int(reserved[-1] - reserved[0]),
                     "hidden_gap_latest_bytes": int(gap[-1]), "hidden_gap_peak_abs_bytes": int(np.abs(gap).max()),
                     "has_anomaly": rank == 5, "first_anomaly_timestamp_ns": int(stamps[spike]) if rank == 5 else None,
                     "first_anomaly_signal": "gap:transient_spike" if rank == 5 else None,
                     "first_anomaly_phase_path": "train / step 61" if rank == 5 else None})
    indicator = {"rank": 5, "severity": "critical", "timestamp_ns": int(stamps[spike]),
                 "signal": "gap:transient_spike", "details": "Hidden gap spike.", "confidence": None,
                 "reason_codes": [], "phase_path": "train / step 61"}
    return {
        "schema_version": 1, "job_id": "big-job", "source": "/data/big-job",
        "generated_at": "2026-11-30T12:00:00+00:00", "engine_version": "0.1.0", "input_fingerprint": "sha256:0",
        "selected_session_id": "big",
        "sessions": [], "sources_loaded": [f"/data/big-job/rank_{r}/events.jsonl" for r in range(ranks)],
        "warnings": [],
        "verdict": {"status": "critical", "exit_code": 0, "summary": f"critical: {ranks}/{ranks} ranks present"},
        "model": {"rows": rows, "indicators": [{"kind": "earliest", **indicator}, {"kind": "most_severe", **indicator}],
                  "expected_ranks": list(range(ranks)), "present_ranks": list(range(ranks)), "missing_ranks": [],
                  "per_rank_timelines": timelines, "warnings": [], "markers_by_rank": markers},
    }


def _marker(start_ns: int, kind: str, severity: str, label: str, rank: int, *, end_ns: int | None = None,
            path: Sequence[str] | None = None) -> dict[str, Any]:
    return {"session_id": "big", "start_ns": start_ns, "end_ns": end_ns, "kind": kind, "source": "telemetry_event",
            "severity": severity, "label": label, "rank": rank, "local_rank": rank % 8, "world_size": 16,
            "event_type": "phase" if kind == "phase" else "error",
            "metadata": {"phase_path": list(path)} if path else {}}


# --- fleet.json -----------------------------------------------------------------------------

def make_indicator(*, rank: int = 0, signal: str = "gap:transient_spike", severity: str = "critical",
                   timestamp_ns: int = b.START_NS, phase_path: str | None = None,
                   confidence: float | None = None) -> dict[str, Any]:
    return {"rank": rank, "signal": signal, "severity": severity, "timestamp_ns": timestamp_ns,
            "phase_path": phase_path, "confidence": confidence}


def make_fleet_job(*, job_id: str = "job-1", status: str = "diagnosed", verdict: str | None = "clean",
                   exit_code: int | None = 0, summary: str | None = None, earliest: Mapping[str, Any] | None = None,
                   most_severe: Mapping[str, Any] | None = None, ranks_present: int | None = 8,
                   ranks_expected: int | None = 8, missing_ranks: Sequence[int] = (),
                   diagnosed_at: str | None = "2026-11-30T12:00:00+00:00", report: str | None = "",
                   error: str | None = None) -> dict[str, Any]:
    """One ``jobs[]`` entry; ``report=""`` means the default ``<job_id>/report.html``."""
    failed = status in ("failed", "refused")
    return {
        "job_id": job_id, "status": status, "verdict": None if failed else verdict,
        "exit_code": None if failed else exit_code,
        "summary": None if failed else (summary or f"{verdict}: {ranks_present}/{ranks_expected} ranks present"),
        "earliest": dict(earliest) if earliest else None, "most_severe": dict(most_severe) if most_severe else None,
        "ranks_present": None if failed else ranks_present, "ranks_expected": None if failed else ranks_expected,
        "missing_ranks": list(missing_ranks), "diagnosed_at": None if failed else diagnosed_at,
        "input_fingerprint": None if failed else f"sha256:{job_id}",
        "report": None if failed else (f"{job_id}/report.html" if report == "" else report), "error": error,
    }


def fleet_job_from_document(document: Mapping[str, Any], *, diagnosed_at: str) -> dict[str, Any]:
    """The fleet entry the pipeline derives from a job's model.json."""
    model, verdict = document["model"], document["verdict"]
    keys = ("rank", "signal", "severity", "timestamp_ns", "phase_path", "confidence")
    by_kind = {item["kind"]: {key: item[key] for key in keys} for item in model["indicators"]}
    return make_fleet_job(
        job_id=document["job_id"], verdict=verdict["status"], exit_code=verdict["exit_code"],
        summary=verdict["summary"],
        earliest=by_kind.get("earliest"), most_severe=by_kind.get("most_severe"),
        ranks_present=len(model["present_ranks"]), ranks_expected=len(model["expected_ranks"]),
        missing_ranks=model["missing_ranks"], diagnosed_at=diagnosed_at,
    )


def make_fleet(*, jobs: Sequence[Mapping[str, Any]], storage: str = "/srv/stormwatch",
               generated_at: str = "2026-11-30T12:30:00+00:00") -> dict[str, Any]:
    """A fleet.json with its summary counted from ``jobs``."""
    summary = {"jobs": len(jobs)}
    for key in ("diagnosed", "skipped", "failed", "refused"):
        summary[key] = sum(job["status"] == key for job in jobs)
    for key in ("clean", "info", "warning", "critical"):
        summary[key] = sum(job["verdict"] == key for job in jobs)
    return {"schema_version": 1, "generated_at": generated_at, "storage": storage, "summary": summary,
            "jobs": [dict(job) for job in jobs]}


HOSTILE_JOB_IDS = ("</script><!--<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "<!-- &amp; \u2028",
                   "it's (quoted)!*")


def make_large_fleet(count: int) -> dict[str, Any]:
    """A fleet.json of ``count`` jobs in job id order, as the pipeline writes it: diagnosed jobs of
    every verdict (with indicators, missing ranks), skipped, failed and refused ones, and job ids
    carrying markup (one in 97; ids starting ``zz-`` sort onto the last page, ``!`` onto the first)."""
    verdicts = ("clean", "clean", "info", "warning", "critical", "empty")
    jobs = []
    for index in range(count):
        job_id = f"team-{index % 7}-pretrain-run-{index:05d}"
        if index % 97 == 0:
            job_id = f"{'zz-' if index % 2 else '!-'}{index:05d}-{HOSTILE_JOB_IDS[index % len(HOSTILE_JOB_IDS)]}"
        if index % 31 == 5:
            jobs.append(make_fleet_job(job_id=job_id, status="failed" if index % 2 else "refused",
                                       error=f"OSError: truncated segment-{index:06d}.jsonl"))
            continue
        verdict = verdicts[index % len(verdicts)]
        indicator = None if verdict in ("clean", "empty") else make_indicator(
            rank=index % 8, signal=("gap:transient_spike", "gap:persistent_drift")[index % 2], severity=verdict,
            timestamp_ns=b.START_NS + index * 10**9, phase_path=f"train / step {index}", confidence=0.5)
        missing = [index % 8] if verdict == "critical" and index % 3 == 0 else []
        jobs.append(make_fleet_job(
            job_id=job_id, status="skipped" if index % 10 == 9 else "diagnosed", verdict=verdict,
            earliest=indicator, most_severe=indicator, ranks_present=8 - len(missing), missing_ranks=missing,
            diagnosed_at=f"2026-11-{1 + index % 28:02d}T{index % 24:02d}:00:00+00:00",
            report=None if index % 53 == 7 else "",
        ))
    return make_fleet(jobs=sorted(jobs, key=lambda job: job["job_id"]))
