"""The history kept per session: rows per (job, session, rank), the job's verdict on each, runs
judged on their worst session, and version-1 files (no session columns) still read."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import diagnose_job
from stormwatch.history.frame import audit_runs, history_frame
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.rows import history_rows
from stormwatch.history.schema import HISTORY_SCHEMA, PARQUET_METADATA_KEY, SESSION_COLUMNS, conform
from stormwatch.outputs.document import JobDocument
from tests import builders as b

AUDIT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def session_documents(tmp_path_factory: pytest.TempPathFactory) -> tuple[JobDocument, ...]:
    """The restarted job's per-session model.json documents, as written and read back."""
    root = tmp_path_factory.mktemp("restarted") / "train-7b-0001"
    b.write_restarted_job(root)
    diagnosis = diagnose_job([root], job_id="train-7b-0001", source_name=str(root),
                             options=DiagnoseOptions(all_sessions=True))
    return tuple(JobDocument.from_json(document.to_json(), name=f"{document.selected_session_id}/model.json")
                 for document in diagnosis.session_documents)


def test_rows_are_kept_per_session_with_the_jobs_verdict(session_documents: tuple[JobDocument, ...]) -> None:
    rows = history_rows(session_documents, job_names=JobNamePattern(), audit_time=AUDIT).to_pylist()

    by_session: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_session.setdefault(row["session_id"], []).append(row)
    assert len(rows) == 8 and len(by_session) == 2 and {len(ranks) for ranks in by_session.values()} == {4}
    verdicts = {session: {row["session_verdict"] for row in ranks} for session, ranks in by_session.items()}
    assert sorted(map(tuple, verdicts.values())) == [("clean",), ("critical",)]
    assert {row["verdict"] for row in rows} == {"critical"}  # the job's: its worst session
    causes = [(row["session_verdict"], row["rank"]) for row in rows if row["first_cause"]]
    assert causes == [("critical", 3)]  # the OOM of attempt 1
    assert len({row["job_started_ns"] for row in rows}) == 1  # the job's first start orders its runs

    again = history_rows([*session_documents, session_documents[0]], job_names=JobNamePattern(), audit_time=AUDIT)
    assert again.num_rows == 8  # one row per (job, session, rank), a repeated document replaces its own


def test_a_run_is_as_bad_as_its_worst_session(session_documents: tuple[JobDocument, ...]) -> None:
    table = history_rows(session_documents, job_names=JobNamePattern(), audit_time=AUDIT)
    mixed = table.set_column(table.schema.get_field_index("verdict"), "verdict",
                             pa.array(["clean", "critical", None, "warning"] * 2))
    runs = audit_runs(history_frame(mixed))
    assert runs["verdict"].tolist() == ["critical"] and runs["job_id"].tolist() == ["train-7b-0001"]


def test_a_version_1_file_reads_with_null_session_columns(session_documents: tuple[JobDocument, ...]) -> None:
    table = history_rows(session_documents, job_names=JobNamePattern(), audit_time=AUDIT)
    old = table.drop_columns(list(SESSION_COLUMNS)).replace_schema_metadata(
        {PARQUET_METADATA_KEY: b'{"schema_version": 1}'})
    sink = io.BytesIO()
    pq.write_table(old, sink)
    read = conform(pq.read_table(pa.BufferReader(sink.getvalue())), name="history/old.parquet")

    assert read.schema.names == HISTORY_SCHEMA.names and read.num_rows == 8
    assert read.column("session_id").null_count == 8 and read.column("session_verdict").null_count == 8
    newer_without = table.drop_columns(["session_id"])  # a version-2 file must have them
    with pytest.raises(ValueError, match="missing columns session_id"):
        conform(newer_without, name="history/bad.parquet")


def test_documents_from_before_sessions_keep_one_row_per_rank(tmp_path: Path) -> None:
    b.write_multi_rank_job(tmp_path / "j", world_size=2)
    diagnosis = diagnose_job([tmp_path / "j"], job_id="bert-1", source_name="x")
    rows = history_rows([diagnosis.document], job_names=JobNamePattern(), audit_time=AUDIT).to_pylist()
    assert [(row["rank"], row["session_id"], row["verdict"], row["session_verdict"]) for row in rows] == [
        (rank, diagnosis.document.selected_session_id, "clean", "clean") for rank in (0, 1)]
