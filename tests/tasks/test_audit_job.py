"""One job of an audit diagnosed session by session, on a local folder and an S3 prefix (moto over
HTTP): every session's model.json and report.html beside the job's, the fleet row and history rows
per session, a session whose outputs cannot be written recorded while the others are, and the
reports of sessions the job no longer has removed."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import orjson

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.load.loader import load_sessions
from stormwatch.outputs.document import DocumentError, JobDocument
from stormwatch.outputs.fleet import FleetRow, JobStatus, rank_table
from stormwatch.outputs.session_paths import session_folder
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.tasks.audit_job import AuditOptions, _previous, audit_one, diagnose_inputs
from stormwatch.tasks.commit_outcomes import commit_outcomes
from stormwatch.tasks.plan import migrated_rows
from tests import builders as b
from tests.tasks.storage.backends import Backend, local_backend

OPTIONS = AuditOptions(diagnose=DiagnoseOptions(all_sessions=True))


def upload_restarted(tmp_path: Path, backend: Backend, job_id: str = "train-7b") -> list[str]:
    """The restarted job (OOM in attempt 1) uploaded; its session groups' folders, in time order."""
    b.write_restarted_job(tmp_path / job_id)
    backend.upload(tmp_path / job_id, f"jobs/{job_id}")
    groups = sorted(load_sessions([tmp_path / job_id]).groups(), key=lambda part: part.summary.started_at_ns)
    return [session_folder(part.summary.session_id) for part in groups]


def test_each_session_gets_its_outputs_and_the_job_its_worst_verdict(backend: Backend, tmp_path: Path) -> None:
    first, second = upload_restarted(tmp_path, backend)
    outcome = audit_one(backend.storage, "train-7b", options=OPTIONS)

    keys = backend.stored_keys()
    for folder in (first, second):
        assert {f"reports/train-7b/{folder}/model.json", f"reports/train-7b/{folder}/report.html"} <= keys
    job = orjson.loads(backend.get("reports/train-7b/model.json") or b"")
    session = orjson.loads(backend.get(f"reports/train-7b/{first}/model.json") or b"")
    assert job["verdict"]["status"] == "critical" and session["verdict"]["status"] == "critical"
    assert session["selected_session_id"] == job["worst_session"] == job["attempts"][0]["session_id"]
    assert session["options"]["session_id"] == job["worst_session"] and "all_sessions" not in session["options"]
    assert [a["description"] for a in job["attempts"]] == ["attempt 1 of 2, interrupted, OOM on rank 3",
                                                           "attempt 2 of 2, completed, no anomaly"]
    assert job["attempts"][0]["report"] == f"{first}/report.html"
    page = (backend.get("reports/train-7b/report.html") or b"").decode()
    assert f'href="{first}/report.html"' in page and 'id="verdict-cause"' in page
    # the job's page details the attempt its verdict comes from (the OOM), the other one click away
    assert '<tr class="attempt worst shown oom" data-attempt="1"' in page and f'href="{second}/report.html"' in page
    session_page = (backend.get(f"reports/train-7b/{first}/report.html") or b"").decode()
    assert 'href="../../report.html"' in session_page and 'href="../../../index.html"' in session_page

    row = outcome.row
    assert (str(row.verdict), row.session_count, row.worst_session) == ("critical", 2, job["worst_session"])
    assert row.most_severe is not None and (row.most_severe["signal"], row.most_severe["rank"]) == ("alert:error", 3)
    table = rank_table([row])
    assert len(table) == 8 and table.groupby("session_id").size().tolist() == [4, 4]
    assert set(table.loc[table["session_verdict"] == "critical", "session_id"]) == {job["worst_session"]}
    assert outcome.history is not None and outcome.history.num_rows == 8
    assert set(outcome.history.column("verdict").to_pylist()) == {"critical"}

    again = audit_one(backend.storage, "train-7b", options=OPTIONS)  # reports, but never committed
    assert again.history is not None and str(again.row.status) == "diagnosed"
    assert again.row.output_bytes == {"model.json": len(backend.get("reports/train-7b/model.json") or b""),
                                      "report.html": len(backend.get("reports/train-7b/report.html") or b"")}
    commit_outcomes(backend.storage, [again], audit="audit-20261001T020000Z-0123abcd",
                    audit_time=datetime(2026, 10, 1, 2, tzinfo=UTC))
    skipped = audit_one(backend.storage, "train-7b", options=OPTIONS)  # committed and unchanged: read back
    assert skipped.history is None and str(skipped.row.status) == "skipped"
    assert (skipped.row.session_count, skipped.row.worst_session) == (2, job["worst_session"])
    assert len(rank_table([skipped.row])) == 8  # every session's ranks, from the job's model.json


def test_a_session_whose_outputs_cannot_be_written_is_recorded_and_the_others_are(tmp_path: Path) -> None:
    backend = local_backend(tmp_path / "fleet")
    first, second = upload_restarted(tmp_path, backend)
    backend.put(f"reports/train-7b/{first}", b"a file where the session's folder should be")
    outcome = audit_one(backend.storage, "train-7b", options=OPTIONS)

    job = orjson.loads(backend.get("reports/train-7b/model.json") or b"")
    failed, written = job["attempts"]
    assert failed["report"] is None and failed["error"].startswith("its outputs were not written: ")
    assert failed["verdict"] == "critical" and job["verdict"]["status"] == "critical"
    assert written["report"] == f"{second}/report.html" and written["error"] is None
    assert backend.get(f"reports/train-7b/{second}/model.json") is not None
    assert any("diagnosed, not written" in warning for warning in job["warnings"])
    assert str(outcome.row.status) == "diagnosed" and len(rank_table([outcome.row])) == 8


def test_a_fleet_parquet_written_before_sessions_still_reads() -> None:
    row = FleetRow(job_id="old-job", status=JobStatus.DIAGNOSED, verdict=VerdictStatus.CLEAN,
                   input_fingerprint="sha256:x", ranks_present=2)
    ranks = FleetRow(job_id="old-job", status=JobStatus.DIAGNOSED,
                     rank_rows=({"rank": 0, "availability": "present"}, {"rank": 1, "availability": "present"}))
    old = rank_table([ranks]).drop(columns=["session_id", "session_verdict"])
    buffer = io.BytesIO()
    old.to_parquet(buffer, index=False)
    document = orjson.dumps({"schema_version": 1, "jobs": [row.as_json()]})
    (migrated,) = migrated_rows(document, buffer.getvalue())
    assert [rank["rank"] for rank in migrated.rank_rows] == [0, 1]
    assert all(rank["session_id"] is None for rank in migrated.rank_rows)
    assert migrated_rows(document, rank_table([]).drop(columns=["rank"]).to_parquet()) == []  # ranks unknown


def test_sessions_the_job_no_longer_has_lose_their_reports(backend: Backend, tmp_path: Path) -> None:
    first, second = upload_restarted(tmp_path, backend)
    audit_one(backend.storage, "train-7b", options=OPTIONS)
    for name in ("model.json", "report.html", "notes.txt"):  # a session folder of an earlier diagnosis
        backend.put(f"reports/train-7b/sessions/gone-session/{name}", b"{}")
    backend.put("reports/train-7b/sessions/readme.txt", b"not a session folder")
    if backend.name == "local":  # a write killed there (S3 writes leave none)
        backend.put("reports/train-7b/sessions/gone-session/.model.json.k1lled.tmp", b"{")
    inventory = backend.storage.take_inventory()
    job = inventory.job("train-7b")
    # S3 lists every report key at once; a local inventory leaves session folders to the job's diagnosis
    expected = None if backend.name == "local" else {first, second, "sessions/gone-session"}
    assert job is not None and job.session_folders == expected

    # attempt 1 is not diagnosed now
    capped = AuditOptions(diagnose=replace(OPTIONS.diagnose, max_sessions=1), force=True)
    diagnose_inputs(backend.storage, job, options=capped)

    keys = backend.stored_keys()
    assert {f"reports/train-7b/{second}/model.json", f"reports/train-7b/{second}/report.html"} <= keys
    assert not any(key.startswith(f"reports/train-7b/{first}/") for key in keys)
    assert "reports/train-7b/sessions/gone-session/model.json" not in keys
    assert "reports/train-7b/sessions/gone-session/report.html" not in keys
    assert {"reports/train-7b/sessions/gone-session/notes.txt", "reports/train-7b/sessions/readme.txt"} <= keys
    assert not any(key.endswith(".tmp") for key in keys)  # swept by the diagnosis
    stored = orjson.loads(backend.get("reports/train-7b/model.json") or b"")
    assert [attempt["report"] for attempt in stored["attempts"]] == [None, f"{second}/report.html"]

    backend.put("reports/train-7b/sessions/gone-again/report.html", b"<html></html>")
    # lists them itself
    audit_one(backend.storage, "train-7b", options=AuditOptions(diagnose=OPTIONS.diagnose, force=True))
    keys = backend.stored_keys()
    assert {f"reports/train-7b/{folder}/report.html" for folder in (first, second)} <= keys
    assert "reports/train-7b/sessions/gone-again/report.html" not in keys


def test_a_damaged_model_json_is_told_from_an_absent_one_and_the_job_diagnosed_again(tmp_path: Path) -> None:
    backend = local_backend(tmp_path / "fleet")
    upload_restarted(tmp_path, backend)
    assert _previous(backend.storage, "train-7b") is None
    audit_one(backend.storage, "train-7b", options=OPTIONS)
    stored = _previous(backend.storage, "train-7b")
    assert isinstance(stored, JobDocument) and stored.session_count == 2

    backend.put("reports/train-7b/model.json", (backend.get("reports/train-7b/model.json") or b"")[:-40])  # cut
    damaged = _previous(backend.storage, "train-7b")
    assert isinstance(damaged, DocumentError) and damaged.name == "train-7b/model.json" and damaged.member is None
    again = audit_one(backend.storage, "train-7b", options=OPTIONS)  # the inputs did not change: damage alone
    assert str(again.row.status) == "diagnosed" and again.history is not None
    assert JobDocument.from_json(backend.get("reports/train-7b/model.json") or b"", name="x").to_json() == (
        backend.get("reports/train-7b/model.json"))
