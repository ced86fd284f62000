"""Every session of a job, diagnosed from one parse, against stormlog 0.3.5 run with each session id.

Jobs are written with stormlog's own writers (tests/builders.py): a 4-rank job whose first attempt
ran out of memory and was interrupted before a clean restart, a folder of five sessions of mixed
status (two rank groups, a diagnose bundle, a session without a stop, a sink never closed), and
legacy flat files beside a v3 session. For each session, our model (the job folder loaded once,
then split) must equal ``build_distributed_model(load_distributed_artifacts(paths, session_id).events)``,
and the loader's view of it must equal the reference loader's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from stormlog.tui import distributed_diagnostics as dd

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import JobDiagnosis, diagnose_job
from stormwatch.load.discover import discover
from stormwatch.load.loader import load_sessions
from stormwatch.load.tree import LocalTree
from stormwatch.outputs.attempts import AttemptStatus
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.verdict import VerdictStatus
from tests import builders as b
from tests.reference import canonical, ours, plain, reference
from tests.reference_model import canonical_model, model_differences

ALL = DiagnoseOptions(all_sessions=True)
MINUTE_NS = 60 * 10**9


def reference_session_model(paths: Sequence[Path], session_id: str) -> dict[str, Any]:
    """stormlog 0.3.5's model of one session: ``--session ID`` of its distributed diagnostics."""
    loaded = dd.load_distributed_artifacts([Path(p) for p in paths], session_id)
    return canonical_model(plain(dataclasses.asdict(dd.build_distributed_model(loaded.events))))


def our_session_models(diagnosis: JobDiagnosis) -> dict[str, dict[str, Any]]:
    return {result.session_id: canonical_model(plain(dataclasses.asdict(result.diagnosis.model)))
            for result in diagnosis.sessions if result.diagnosis is not None}


def reference_groups(paths: Sequence[Path]) -> list[str]:
    """The reference's sessions less the members of its rank groups (what a job is diagnosed as):
    a group merges the sessions of its (job id, world size)."""
    summaries = [session.summary for session in dd.load_distributed_artifacts([Path(p) for p in paths]).sessions]
    merged = {(s.job_id, s.world_size) for s in summaries if s.source == "stormlog.diagnostics.distributed"}
    return [s.session_id for s in summaries
            if s.source == "stormlog.diagnostics.distributed" or (s.job_id, s.world_size) not in merged]


def assert_each_session_equals_reference(root: Path, paths: Sequence[Path], diagnosis: JobDiagnosis) -> None:
    ours_by_id = our_session_models(diagnosis)
    assert sorted(ours_by_id) == sorted(reference_groups(paths))
    for session_id, model in ours_by_id.items():
        differences = model_differences(reference_session_model(paths, session_id), model)
        assert not differences, f"session {session_id}:\n" + "\n".join(differences)


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[Path]]:
    root = tmp_path_factory.mktemp("restarted") / "train-7b"
    first, second = b.write_restarted_job(root)
    return root, first, second


def test_an_oom_in_the_first_attempt_makes_the_restarted_job_critical(
        restarted: tuple[Path, list[Path], list[Path]]) -> None:
    root, first, second = restarted
    diagnosis = diagnose_job([root], job_id="train-7b", source_name=str(root), options=ALL)

    one, two = diagnosis.attempts
    assert (one.number, one.of, one.status, one.verdict) == (1, 2, AttemptStatus.INTERRUPTED, VerdictStatus.CRITICAL)
    assert (two.number, two.status, two.verdict) == (2, AttemptStatus.COMPLETED, VerdictStatus.CLEAN)
    assert one.describe() == "attempt 1 of 2, interrupted, OOM on rank 3"
    assert one.oom_ranks == (3,) and one.most_severe is not None and one.most_severe.label == "OOM"
    assert (one.ranks_present, one.ranks_expected) == (4, 4) and one.started_at_ns < two.started_at_ns
    assert diagnosis.verdict is not None and diagnosis.verdict.status is VerdictStatus.CRITICAL
    document = diagnosis.document
    assert document.worst_session == one.session_id and document.session_count == 2
    assert document.verdict.summary.startswith(
        f"critical: from attempt 1 of 2, interrupted, OOM on rank 3 (session {one.session_id})")
    # the job document is still the default session's (stormlog's choice: the completed restart)
    assert two.default and document.selected_session_id == two.session_id
    assert document.model.indicators == () and document.model.present_ranks == (0, 1, 2, 3)
    single = diagnose_job([root], job_id="train-7b", source_name=str(root))
    assert single.verdict is not None and single.verdict.status is VerdictStatus.CLEAN  # what the issue is about
    assert_each_session_equals_reference(root, [*first, *second], diagnosis)


def test_the_job_is_parsed_once_and_each_session_equals_the_reference_loader(
        restarted: tuple[Path, list[Path], list[Path]]) -> None:
    root, first, second = restarted
    paths = [*first, *second]
    job = load_sessions([root])
    assert [s.session_id for s in job.sessions] == [s["session_id"] for s in reference(paths)["sessions"]]
    for session_id in [s.session_id for s in job.sessions]:
        expected = canonical(reference(paths, session_id, include_metadata=True))
        actual = canonical(ours(job.result_for(session_id), include_metadata=True))
        assert actual["events"] == expected["events"] and actual["markers"] == expected["markers"]
        assert actual["selected_session_id"] == expected["selected_session_id"]
        assert actual["sessions"] == expected["sessions"] and len(actual["warnings"]) == len(expected["warnings"])


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """Five sessions of one job folder: rank group mix-a (completed), rank group mix-b (interrupted,
    OOM on rank 1), a diagnose bundle (completed), a sink never closed (running) and a JSONL capture
    without a stop (incomplete, a critical alert), the last two side by side."""
    root = tmp_path_factory.mktemp("mixed") / "mixed-job"
    b.write_attempt(root, job_id="mix-a", world_size=2, attempt="a")
    b.write_attempt(root, job_id="mix-b", world_size=2, attempt="b", close_status="interrupted",
                    start_ns=b.START_NS + MINUTE_NS, alerts_of=lambda rank: (b.oom_alert(2.0),) if rank == 1 else ())
    stamps = [b.START_NS / 1e9 + 120 + 0.5 * i for i in range(10)]
    b.write_diagnose_bundle(root / "bundle", timestamps_s=stamps, allocated=[b.GIB + i * b.MIB for i in range(10)],
                            rank=0)
    solo = b.timeline_records(samples=8, alerts=(b.Alert(1.5, "critical", "Memory usage above 95%"),),
                              lifecycle=False, session_id="solo-1", job_id="solo", start_ns=b.START_NS + 3 * MINUTE_NS)
    b.write_jsonl(root / "solo" / "events.jsonl", solo)
    live = b.timeline_records(samples=8, session_id="live-1", job_id="live", start_ns=b.START_NS + 3 * MINUTE_NS,
                              lifecycle=False)
    b.write_sink(root / "live", records=live, close_status=None)
    return root, [root / unit.key for unit in discover(LocalTree(root))]  # the job folder's order


def test_five_sessions_of_mixed_status_each_equal_the_reference(mixed: tuple[Path, list[Path]]) -> None:
    root, paths = mixed
    diagnosis = diagnose_job([root], job_id="mixed-job", source_name=str(root), options=ALL)

    statuses = [(attempt.status.value, attempt.verdict and attempt.verdict.value) for attempt in diagnosis.attempts]
    assert statuses == [("completed", "clean"), ("interrupted", "critical"), ("completed", "warning"),
                        ("running", "clean"), ("incomplete", "critical")]  # the bundle: rank 0 of the job's 2
    assert len(diagnosis.sessions) == 5 and all(result.written for result in diagnosis.sessions)
    assert diagnosis.document.session_count == 5 and diagnosis.document.sessions_diagnosed == 5
    assert_each_session_equals_reference(root, paths, diagnosis)


def test_two_sessions_at_a_time_give_the_same_documents_as_one(mixed: tuple[Path, list[Path]]) -> None:
    root, _ = mixed
    threaded = diagnose_job([root], job_id="mixed-job", source_name="x", options=ALL, workers=2)
    alone = diagnose_job([root], job_id="mixed-job", source_name="x", options=ALL, workers=1)

    def stable(document: JobDocument) -> bytes:
        return document.with_generated_at(alone.document.generated_at).to_json()

    assert [stable(d) for d in threaded.session_documents] == [stable(d) for d in alone.session_documents]
    assert stable(threaded.document) == stable(alone.document)


def test_legacy_flat_files_are_one_session_beside_the_others(tmp_path: Path) -> None:
    root = tmp_path / "legacy-job"
    legacy = [b.write_json(root / f"tracker_{part}.json", [
        b.make_legacy_record(timestamp_s=b.START_NS / 1e9 + part * 10 + i * 0.5, allocated=b.GIB + i * b.MIB,
                             event_type="critical" if (part, i) == (1, 3) else "sample")
        for i in range(8)]) for part in (0, 1)]
    later = b.write_jsonl(root / "v3" / "events.jsonl", b.timeline_records(
        samples=6, session_id="v3-1", start_ns=b.START_NS + 5 * MINUTE_NS))
    paths = sorted([*legacy, later])
    diagnosis = diagnose_job([root], job_id="legacy-job", source_name=str(root), options=ALL)

    first, second = diagnosis.attempts
    assert second.session_id == "v3-1" and first.session_id.startswith("legacy-")
    assert first.verdict is VerdictStatus.CRITICAL and diagnosis.document.worst_session == first.session_id
    # the reference names its legacy session after the absolute paths: compare it by that name
    loaded = dd.load_distributed_artifacts(paths)
    legacy_id = next(s.summary.session_id for s in loaded.sessions if s.summary.source == "stormlog.diagnostics.legacy")
    models = our_session_models(diagnosis)
    assert not model_differences(reference_session_model(paths, legacy_id), models[first.session_id])
    assert not model_differences(reference_session_model(paths, "v3-1"), models["v3-1"])
