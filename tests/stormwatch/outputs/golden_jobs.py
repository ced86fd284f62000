"""Fixture jobs whose model.json and report.html bytes are kept under ``golden/``.

Each fixture's inputs were written once with stormlog's own writer code (:mod:`tests.builders`,
:mod:`tests.cut_short_builders`) and are kept under ``golden/inputs/<fixture>/``: the writer puts
its thread ids in phase metadata, so writing them again would give other bytes. :func:`outputs`
diagnoses them as the pipeline does and returns every file it writes, by name:
``<fixture>/model.json`` and ``report.html`` for the job, and ``<fixture>/sessions/<folder>/...``
for each session of a job diagnosed session by session; ``golden/outputs/`` holds those bytes as
the code before :class:`~stormwatch.outputs.document.JobDocument` wrote them.

What would differ between runs is pinned: ``generated_at`` (:data:`GENERATED_AT`), the inputs'
keys (read into a :class:`~stormwatch.load.tree.MemoryTree`, so sources are relative names and
versions empty) and, for the audit fixture, which runs through local storage, the inputs' mtimes
(:data:`MTIME_NS`) and the storage root (replaced by :data:`ROOT_PLACEHOLDER`). The engine version
is part of the bytes; :func:`expected` puts the running one in place of :data:`GOLDEN_VERSION`.

``python -m tests.stormwatch.outputs.golden_jobs`` writes the inputs again and the outputs from the
current code (only when the format is meant to change); ``... golden_jobs --outputs`` writes only the
outputs, from the kept inputs (a report's layout changed, the documents did not).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import JobDiagnosis, diagnose_job
from stormwatch.history.frame import history_frame, job_runs
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.rows import history_rows
from stormwatch.load.tree import MemoryTree
from stormwatch.reports.jobattempts import PageNav
from stormwatch.reports.jobdetail import detail_document
from stormwatch.reports.render import render_job
from stormwatch.tasks.audit_job import AuditOptions, diagnose_inputs
from stormwatch.tasks.storage.inventory import JobInputs
from stormwatch.tasks.storage.open import open_storage
from stormwatch.tasks.storage.protocol import StorageSettings
from stormwatch.version import ENGINE_VERSION
from tests import builders as b
from tests.cut_short_builders import killed_sink_job
from tests.reports.builders import write_hostile_job

GOLDEN = Path(__file__).parent / "golden"
INPUTS = GOLDEN / "inputs"
OUTPUTS = GOLDEN / "outputs"
GENERATED_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
GOLDEN_VERSION = "0.1.0"
MTIME_NS = 1_750_000_000_000_000_000
ROOT_PLACEHOLDER = "/srv/golden-root"


def _tree(root: Path, name: str) -> MemoryTree:
    files = sorted(path for path in root.rglob("*") if path.is_file())
    return MemoryTree({path.relative_to(root).as_posix(): path.read_bytes() for path in files}, name=name)


def _outputs(diagnosis: JobDiagnosis, name: str) -> dict[str, bytes]:
    """What ``stormwatch diagnose`` writes for ``diagnosis``, ``generated_at`` pinned."""
    out: dict[str, bytes] = {}
    labels = {attempt.session_id: attempt.describe() for attempt in diagnosis.attempts}
    for result in diagnosis.sessions:
        if not result.written or result.diagnosis is None or result.folder is None:
            continue
        document = result.diagnosis.document.with_generated_at(GENERATED_AT)
        nav = PageNav.for_session(depth=result.folder.count("/") + 1, attempt=labels.get(result.session_id))
        out[f"{name}/{result.folder}/model.json"] = document.to_json()
        out[f"{name}/{result.folder}/report.html"] = render_job(document, nav=nav).encode("utf-8")
    document = diagnosis.document.with_generated_at(GENERATED_AT)
    out[f"{name}/model.json"] = document.to_json()
    detail = detail_document(diagnosis)  # the page details the verdict's attempt, as the pipeline's does
    out[f"{name}/report.html"] = render_job(document, detail=detail and detail.with_generated_at(GENERATED_AT)
                                            ).encode("utf-8")
    return out


def one_session(inputs: Path) -> None:
    """Four ranks, rank 2 missing, phases (one on a loader thread), alerts and an OOM: one session."""
    b.write_multi_rank_job(inputs, world_size=4, fmt="jsonl", missing_ranks=(2,), phases=b.DEFAULT_PHASES,
                           alerts=b.DEFAULT_ALERTS, job_id="one-session")


def restarted(inputs: Path) -> None:
    """An OOM on rank 3 interrupts the first attempt; the restart completes."""
    b.write_restarted_job(inputs, world_size=4, oom_rank=3)


def cut_short(inputs: Path) -> None:
    """A first attempt whose writers died, rank 1's file cut mid-record after an OOM, then a restart."""
    killed_sink_job(inputs, world_size=2, torn_rank=1, oom=True)
    b.write_attempt(inputs, job_id="run-2", world_size=2, attempt="attempt-2", start_ns=b.START_NS + 60 * 10**9)


def hostile(inputs: Path) -> None:
    """Markup in hosts, ids, contexts and phase names (:func:`~tests.reports.builders.write_hostile_job`),
    and a session of its own whose alert carries what only :func:`~stormwatch.outputs.model_json.json_safe`
    writes: an integer beyond 64 bits, lone surrogates in its metadata, metadata nested
    deeper than :data:`~stormwatch.outputs.model_json.MAX_NESTING`."""
    write_hostile_job(inputs, world_size=2)
    records = b.timeline_records(samples=b.ramp(6), alerts=[b.Alert(0.75, "warning", "hot", {"step": 3})],
                                 session_id="json-safe-rank0", rank=0, world_size=1, job_id="json-safe",
                                 host="node-9", pid=1009, device_id=0)
    lines = [json.dumps(record, sort_keys=True) for record in records]
    at = next(index for index, record in enumerate(records) if record["event_type"] == "warning")
    blob = '{"step": 3, "big": ' + str(2**70) + ', "s": "a\\udfffb", "\\ud800": 1, "deep": ' + "[" * 80 + "]" * 80 + "}"
    lines[at] = lines[at].replace('{"step": 3}', blob)
    path = inputs / "json-safe" / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


LEVELS_GIB = (1.0, 1.01, 0.99, 1.0, 1.02, 1.6)  # the last run regresses against the five before it


def _night_id(night: int) -> str:
    return f"train-x-{night:04d}"


def regression(inputs: Path) -> None:
    """A storage root's ``jobs/``: runs of one job name, the last one's peaks well above the others'."""
    for night, level in enumerate(LEVELS_GIB):
        b.write_multi_rank_job(inputs / "jobs" / _night_id(night), world_size=2, job_id=_night_id(night),
                               samples=lambda rank, level=level: b.ramp(4, base=int(level * b.GIB) + rank * 16 * b.MIB))


def _diagnosed(inputs: Path, name: str) -> dict[str, bytes]:
    """What ``stormwatch diagnose`` writes (every session, as it does by default) for the job ``inputs``."""
    diagnosis = diagnose_job(_tree(inputs, name), job_id=name, source_name=f"jobs/{name}",
                             options=DiagnoseOptions(all_sessions=name != "one-session"))
    return _outputs(diagnosis, name)


def _audited(inputs: Path, work: Path) -> dict[str, bytes]:
    """The audit's path (local storage, :func:`diagnose_inputs`) for the last run of ``inputs``, the
    earlier ones in its history, so its model.json's ``fleet.regression`` is filled."""
    earlier = []
    for night in range(len(LEVELS_GIB) - 1):
        job = diagnose_job(_tree(inputs / "jobs" / _night_id(night), _night_id(night)), job_id=_night_id(night),
                           source_name=_night_id(night))
        earlier.append(history_rows(job.session_documents, job_names=JobNamePattern(),
                                    audit_time=GENERATED_AT - timedelta(days=len(LEVELS_GIB) - 1 - night)))
    runs = job_runs(pd.concat([history_frame(table) for table in earlier], ignore_index=True))
    job_id = _night_id(len(LEVELS_GIB) - 1)
    root = work / "fleet"
    shutil.copytree(inputs / "jobs" / job_id, root / "jobs" / job_id)
    for path in (root / "jobs").rglob("*"):
        os.utime(path, ns=(MTIME_NS, MTIME_NS))
    storage = open_storage(StorageSettings(uri=str(root)))
    options = AuditOptions(audit_time=GENERATED_AT, diagnose=DiagnoseOptions(all_sessions=True))
    diagnose_inputs(storage, JobInputs(job_id, tuple(storage.job_entries(job_id))), options=options, earlier=runs)
    reports = root / "reports" / job_id
    real, placeholder = str(root.resolve()).encode("utf-8"), ROOT_PLACEHOLDER.encode("utf-8")
    return {f"regression/{path.relative_to(reports).as_posix()}": path.read_bytes().replace(real, placeholder)
            for path in sorted(reports.rglob("*")) if path.is_file()}


def outputs(name: str, work: Path) -> dict[str, bytes]:
    """Every file the fixture ``name`` writes from its stored inputs (``work``: a scratch folder)."""
    inputs = INPUTS / name
    return _audited(inputs, work) if name == "regression" else _diagnosed(inputs, name)


#: Each fixture's inputs, written by stormlog's writer code (kept: phase metadata names the writer's thread ids).
FIXTURES: dict[str, Callable[[Path], None]] = {
    "one-session": one_session, "restarted": restarted, "cut-short": cut_short, "hostile": hostile,
    "regression": regression}


def expected(name: str) -> bytes:
    """A golden file's bytes with the running engine version in place of the one they were written with."""
    data = (OUTPUTS / name).read_bytes()
    pattern = '"engine_version":"{}"' if name.endswith(".json") else " · engine {}</dd>"
    return data.replace(pattern.format(GOLDEN_VERSION).encode(), pattern.format(ENGINE_VERSION).encode())


def golden_names() -> list[str]:
    """Every golden output file, relative to :data:`OUTPUTS`."""
    return sorted(path.relative_to(OUTPUTS).as_posix() for path in OUTPUTS.rglob("*") if path.is_file())


def write_golden() -> None:
    """Write every fixture's inputs (replacing what is there), then its outputs from them."""
    for name, fixture in FIXTURES.items():
        shutil.rmtree(INPUTS / name, ignore_errors=True)
        fixture(INPUTS / name)
        with tempfile.TemporaryDirectory() as work:
            for key, data in outputs(name, Path(work)).items():
                path = OUTPUTS / key
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)


def write_golden_outputs() -> None:
    """Write every fixture's outputs from its kept inputs (the inputs unchanged)."""
    for name in FIXTURES:
        with tempfile.TemporaryDirectory() as work:
            for key, data in outputs(name, Path(work)).items():
                path = OUTPUTS / key
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)


if __name__ == "__main__":
    import sys

    write_golden_outputs() if sys.argv[1:] == ["--outputs"] else write_golden()
