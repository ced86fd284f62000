"""stormlog 0.4.3's files that are not telemetry (inference records, run catalogs, reports), written
by 0.4.3's own code beside real telemetry, are left alone without a word; a run catalog's session
identity is taken by a session that states none."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from stormwatch.events.sessions import SessionSummary
from stormwatch.load.discover import discover
from stormwatch.load.loader import load_sessions, load_tree
from stormwatch.load.non_telemetry import DOCUMENT_LOOK_BYTES, HEAD_BYTES, NotTelemetry, not_telemetry
from stormwatch.load.tree import LocalTree, MemoryTree
from tests import builders as b
from tests.reference_model import _clean_env, canonical_model, model_differences, our_model, reference_model

#: Runs stormlog 0.4.3's writers (PYTHONPATH on its copy); stdin: a list of writes, each
#: {"writer": ..., "path": ..., **arguments}. The server-telemetry lines are serialised as
#: stormlog.infer.server_collector._collect_loop does (json.dumps(sample.to_record(), sort_keys=True)).
_WRITER = r"""
import json, sys
from pathlib import Path
from stormlog.diagnose_report import write_verdict_report
from stormlog.infer.correlation_capture import append_inference_capture
from stormlog.infer.events import (InferenceDispatchEvent, InferencePhaseStartEvent, InferenceRequestEvent,
                                   InferenceSummaryEvent, InferenceSystemSample, JsonlEventWriter)
from stormlog.infer.telemetry import ServerIdentity, TelemetrySample
from stormlog.report import build_report, write_report
from stormlog.session import create_session_summary

START_NS = 1_700_000_000_000_000_000

def inference(path, session_id, requests):
    with JsonlEventWriter(path) as writer:
        writer.append(InferencePhaseStartEvent(session_id=session_id, case_id="c0", phase="measured",
                                               arrival_mode="closed", started_at_ns=START_NS).to_record())
        for index in range(requests):
            at_ns = START_NS + index * 10**7
            writer.append(InferenceDispatchEvent(session_id=session_id, request_id=f"r{index}", x_request_id=None,
                                                 case_id="c0", phase="measured", intended_at_ns=None,
                                                 started_at_ns=at_ns).to_record())
            writer.append(InferenceRequestEvent(
                session_id=session_id, request_id=f"r{index}", case_id="c0", phase="measured", started_at_ns=at_ns,
                ended_at_ns=at_ns + 5 * 10**6, endpoint="http://127.0.0.1:8000/v1", model="m", concurrency=1,
                target_input_tokens=8, target_output_tokens=8, stream=False, status="ok", e2e_latency_ms=5.0,
                ttft_ms=None, first_chunk_latency_ms=None).to_record())
        writer.append(InferenceSystemSample(session_id=session_id, timestamp_ns=START_NS, sampler="psutil",
                                            process_rss_bytes=1 << 30).to_record())
        writer.append(InferenceSummaryEvent(session_id=session_id, timestamp_ns=START_NS + 10**9,
                                            summary={"requests": requests}).to_record())

def catalog(path, session_id, job_id, rank, world_size):
    session = create_session_summary(source="stormlog.infer", session_id=session_id, started_at_ns=START_NS,
                                     host="infer-host", pid=1, job_id=job_id, rank=rank, local_rank=rank,
                                     world_size=world_size)
    append_inference_capture(path, run_id="run-1", session=session)

def server_telemetry(path, samples):
    identity = ServerIdentity(host="infer-host", pid=2, process_start_ns=START_NS)
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(samples):
            sample = TelemetrySample(run_id="run-1", identity=identity, observed_at_ns=START_NS + index * 10**8,
                                     metric="process_rss_bytes", value_bytes=1 << 30, state="valid",
                                     source="psutil", interval_ms=100)
            handle.write(json.dumps(sample.to_record(), sort_keys=True) + "\n")

def diagnose_report(path, session_id):
    path.mkdir(parents=True, exist_ok=True)
    write_verdict_report(Path(path), tool_name="stormlog", summary={"backend": "cuda", "suggestions": []},
                         exit_code=0, session_id=session_id, files=["diagnostic_summary.json"])

def report(path, session_id):
    write_report(Path(path), build_report(report_kind="infer_profile", tool_name="stormlog",
                                          command="infer profile", exit_code=0, summary="ok",
                                          session_id=session_id))

for write in json.load(sys.stdin):
    arguments = dict(write)
    writer, path = arguments.pop("writer"), Path(arguments.pop("path"))
    path.parent.mkdir(parents=True, exist_ok=True)
    globals()[writer](path, **arguments)
"""


def write_with_stormlog43(stormlog43: Path, writes: Sequence[Mapping[str, Any]]) -> None:
    done = subprocess.run([sys.executable, "-c", _WRITER], input=json.dumps(list(writes)), text=True,
                          capture_output=True, check=False, env={**_clean_env(), "PYTHONPATH": str(stormlog43)})
    if done.returncode != 0:
        raise RuntimeError(f"stormlog 0.4.3 writer failed:\n{done.stderr}")


@dataclass(frozen=True)
class Extra:
    """Non-telemetry files one 0.4.3 writer run leaves (relative to the job folder) and their kind."""

    writes: tuple[dict[str, Any], ...]
    files: tuple[str, ...]
    kind: NotTelemetry


# 25 requests: 53 lines, as in the field report (20 warnings and "33 more").
_INFER = {"writer": "inference", "path": "inference/infer.jsonl", "session_id": "infer-0", "requests": 25}
EXTRAS = {
    "inference-records": Extra(writes=(_INFER,), files=("inference/infer.jsonl",), kind=NotTelemetry.INFERENCE_RECORDS),
    "inference-server-telemetry": Extra(
        writes=({"writer": "server_telemetry", "path": "inference/server_telemetry.jsonl", "samples": 8},),
        files=("inference/server_telemetry.jsonl",), kind=NotTelemetry.INFERENCE_RECORDS),
    "run-catalog": Extra(
        writes=(_INFER, {"writer": "catalog", "path": "inference/infer.jsonl", "session_id": "infer-0",
                         "job_id": "job-1", "rank": 0, "world_size": 1}),
        files=("inference/stormlog_run.json",), kind=NotTelemetry.RUN_CATALOG),
    "diagnose-report": Extra(writes=({"writer": "diagnose_report", "path": "diag", "session_id": "job-1-rank0"},),
                             files=("diag/report.json",), kind=NotTelemetry.REPORT),
    # --report takes any path: one named like an export, found by discovery, known by its format.
    "report-named-like-an-export": Extra(
        writes=({"writer": "report", "path": "infer_events_report.json", "session_id": "infer-0"},),
        files=("infer_events_report.json",), kind=NotTelemetry.REPORT),
}
TELEMETRY_FORMATS = ("jsonl", "sink")  # the rank files' format: one JSONL file, or a sink folder, per rank


@pytest.fixture(scope="module")
def extras(stormlog43: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each extra's files, written once by 0.4.3 into a folder of its own."""
    base = tmp_path_factory.mktemp("stormlog43-extras")
    writes = [{**write, "path": str(base / name / write["path"])} for name, extra in EXTRAS.items()
              for write in extra.writes]
    write_with_stormlog43(stormlog43, writes)
    return {name: base / name for name in EXTRAS}


def _job(root: Path, fmt: str) -> list[Path]:
    return b.write_multi_rank_job(root, world_size=4, fmt=fmt, missing_ranks=(2,), phases=b.DEFAULT_PHASES,
                                  alerts=b.DEFAULT_ALERTS)


def _sorted_events(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["session_id", "timestamp_ns", "event_type"], kind="stable").reset_index(drop=True)


@pytest.mark.parametrize("fmt", TELEMETRY_FORMATS)
@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_non_telemetry_beside_telemetry_is_left_alone(extra: str, fmt: str, extras: dict[str, Path],
                                                      tmp_path: Path) -> None:
    plain, mixed = tmp_path / "plain" / "job", tmp_path / "mixed" / "job"
    paths = _job(plain, fmt)
    shutil.copytree(plain, mixed)  # the same bytes (records carry the writer's thread ids)
    shutil.copytree(extras[extra], mixed, dirs_exist_ok=True)
    for name in EXTRAS[extra].files:
        assert (mixed / name).is_file()
        assert not_telemetry(LocalTree(mixed), name) is EXTRAS[extra].kind

    without, with_extra = load_sessions([plain]), load_sessions([mixed])
    assert with_extra.warnings == without.warnings == ()
    assert [unit.key for unit in discover(LocalTree(mixed))] == [unit.key for unit in discover(LocalTree(plain))]
    assert [s.session_id for s in with_extra.sessions] == [s.session_id for s in without.sessions]
    assert [_identity(s) for s in with_extra.sessions] == [_identity(s) for s in without.sessions]
    assert with_extra.default_session_id == without.default_session_id
    pd.testing.assert_frame_equal(_sorted_events(with_extra.result_for().events),
                                  _sorted_events(without.result_for().events))
    # The telemetry is schema v3, so stormlog 0.3.5 is its reference (given each rank, as a job folder merges them).
    expected = canonical_model(reference_model(paths))
    assert not model_differences(expected, canonical_model(our_model([mixed], job_folder=True)))


def test_non_telemetry_is_left_alone_in_an_object_store_tree(extras: dict[str, Path], tmp_path: Path) -> None:
    """The same rules over a tree read into memory (an S3 prefix): every extra at once, no word."""
    root = tmp_path / "job"
    _job(root, "jsonl")
    for folder in extras.values():
        shutil.copytree(folder, root, dirs_exist_ok=True)
    objects = {path.relative_to(root).as_posix(): path.read_bytes() for path in root.rglob("*") if path.is_file()}
    loaded = load_tree(MemoryTree(objects, name="s3://bucket/jobs/job"))
    assert loaded.warnings == ()
    assert sorted(loaded.events["rank"].unique().tolist()) == [0, 1, 3]


def _identity(summary: SessionSummary) -> tuple[str | None, int, int, int]:
    return summary.job_id, summary.rank, summary.local_rank, summary.world_size


@dataclass(frozen=True)
class IdentityCase:
    """A catalog naming ``session_id`` with ``catalog`` (job, rank, world size); ``expected``: that
    session's (job, rank, local rank, world size) after the load."""

    session_id: str
    catalog: tuple[str, int, int]
    expected: tuple[str | None, int, int, int]
    group_ranks: tuple[int, ...]  # the ranks of the job's rank group (): none forms


IDENTITY_CASES = {
    # Rank 1's telemetry states no identity: the catalog's is taken, and rank 1 joins job-1's group.
    "taken-where-missing": IdentityCase(session_id="job-1-rank1", catalog=("job-1", 1, 2),
                                        expected=("job-1", 1, 1, 2), group_ranks=(0, 1)),
    # Rank 0 states its own: the catalog never overrides it; rank 1 stays alone, as without a catalog.
    "never-overrides": IdentityCase(session_id="job-1-rank0", catalog=("other-job", 3, 4),
                                    expected=("job-1", 0, 0, 2), group_ranks=()),
}


@pytest.mark.parametrize("case", sorted(IDENTITY_CASES))
def test_run_catalog_identity_is_taken_where_a_session_lacks_one(case: str, stormlog43: Path, tmp_path: Path) -> None:
    spec = IDENTITY_CASES[case]
    root = tmp_path / "job"
    b.write_jsonl(root / "rank_0" / "events.jsonl",
                  b.timeline_records(samples=6, session_id="job-1-rank0", rank=0, world_size=2, job_id="job-1"))
    b.write_jsonl(root / "rank_1" / "events.jsonl",  # a tracker without distributed identity
                  b.timeline_records(samples=6, session_id="job-1-rank1", host="node-1", pid=1001))
    before = load_sessions([root])
    job_id, rank, world_size = spec.catalog
    infer = root / "rank_1" / "inference" / "infer.jsonl"
    write_with_stormlog43(stormlog43, [
        {"writer": "inference", "path": str(infer), "session_id": spec.session_id, "requests": 3},
        {"writer": "catalog", "path": str(infer), "session_id": spec.session_id, "job_id": job_id, "rank": rank,
         "world_size": world_size}])
    assert (infer.parent / "stormlog_run.json").is_file()

    job = load_sessions([root])
    assert job.warnings == ()
    summaries = {s.session_id: s for s in job.sessions}
    assert _identity(summaries[spec.session_id]) == spec.expected
    events = job.result_for(spec.session_id).events
    assert {(j, r, lr, w) for j, r, lr, w in events[["job_id", "rank", "local_rank", "world_size"]].itertuples(
        index=False)} == {spec.expected}
    groups = [part for part in job.parts if part.members]
    assert [sorted(job.part(m).summary.rank for m in g.members) for g in groups] == ([list(spec.group_ranks)]
                                                                                     if spec.group_ranks else [])
    if not spec.group_ranks:
        assert [_identity(s) for s in job.sessions] == [_identity(s) for s in before.sessions]


_SAMPLE = json.dumps(b.make_record(session_id="s-0"), sort_keys=True).encode() + b"\n"
_REPORT = json.dumps({"schema_version": 1, "format": "stormlog.report", "report_kind": "x"}).encode()
SHAPES: dict[str, tuple[str, bytes, NotTelemetry | None]] = {
    "named-run-catalog": ("a/stormlog_run.json", b"not even JSON", NotTelemetry.RUN_CATALOG),
    "named-report": ("a/report.json", b"{}", NotTelemetry.REPORT),
    "inference-after-blank-lines-and-bom": ("x.jsonl", b"\xef\xbb\xbf\n\n{\"event_type\": \"infer.request\"}\n",
                                            NotTelemetry.INFERENCE_RECORDS),
    "telemetry-jsonl": ("rank0.jsonl", _SAMPLE * 3, None),
    "inference-line-past-the-head": ("x.jsonl", b"{\"event_type\": \"infer.request\", \"pad\": \""
                                     + b"p" * HEAD_BYTES + b"\"}\n", None),
    "report-format-any-name": ("my_events.json", _REPORT, NotTelemetry.REPORT),
    "report-too-long-to-look-at": ("my_events.json", _REPORT[:-1] + b", \"pad\": \"" + b"p" * DOCUMENT_LOOK_BYTES
                                   + b"\"}", None),
    "events-object": ("events.json", json.dumps({"format": "mine", "events": []}).encode(), None),
    "array-export": ("events.json", b"[" + _SAMPLE.strip() + b"]", None),
    "csv-export": ("events.csv", b"timestamp,memory_allocated\n1,2\n", None),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_not_telemetry_by_name_or_shape(case: str) -> None:
    key, data, expected = SHAPES[case]
    tree = MemoryTree({key: data})
    assert not_telemetry(tree, key, size_bytes=len(data)) is expected
    assert not_telemetry(tree, key) is expected  # size unknown: the look is bounded all the same


def test_a_withheld_file_is_left_to_the_loader() -> None:
    tree = MemoryTree({}, withheld={"big.jsonl": 10**12, "big_events.json": 10**12})
    assert not_telemetry(tree, "big.jsonl") is None
    assert not_telemetry(tree, "big_events.json", size_bytes=10**12) is None


@pytest.mark.parametrize(("damage", "said"), [
    (lambda data: data[: len(data) // 2], "not a JSON object"),
    (lambda data: b'{"format": "something.else"}', "not a version-1 run catalog"),
], ids=["cut short", "another format"])
def test_an_unreadable_run_catalog_is_named_and_the_rest_loads(extras: dict[str, Path], tmp_path: Path,
                                                               damage: Any, said: str) -> None:
    plain, mixed = tmp_path / "plain" / "job", tmp_path / "mixed" / "job"
    _job(plain, TELEMETRY_FORMATS[0])
    shutil.copytree(plain, mixed)
    shutil.copytree(extras["run-catalog"], mixed, dirs_exist_ok=True)
    (found,) = mixed.rglob("stormlog_run.json")
    found.write_bytes(damage(found.read_bytes()))
    loaded = load_sessions([mixed])
    assert loaded.warnings == (f"run catalog {found}: {said}; its session identities not used",)
    pd.testing.assert_frame_equal(_sorted_events(loaded.result_for().events),
                                  _sorted_events(load_sessions([plain]).result_for().events))
