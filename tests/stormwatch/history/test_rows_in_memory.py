"""History rows from a document as the engine built it equal those from its model.json read back."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from stormwatch.diagnose import diagnose
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.rows import history_rows
from stormwatch.outputs.document import JobDocument
from tests import builders as b


def test_rows_of_the_document_in_memory_equal_those_of_its_json(tmp_path: Path) -> None:
    b.write_multi_rank_job(tmp_path / "job", world_size=4, alerts=b.DEFAULT_ALERTS, missing_ranks=(2,))
    diagnosis = diagnose([tmp_path / "job"], job_id="train-a-0042", source_name="job")
    when = datetime(2026, 11, 30, 2, tzinfo=UTC)
    in_memory = history_rows([diagnosis.document], job_names=JobNamePattern(), audit_time=when)
    read = JobDocument.from_json(diagnosis.model_json(), name="train-a-0042/model.json")
    parsed = history_rows([read], job_names=JobNamePattern(), audit_time=when)
    assert in_memory.num_rows == 4 and in_memory.equals(parsed)
    assert set(in_memory.column("job_name").to_pylist()) == {"train-a"}
    assert in_memory.column("peak_reserved_bytes").null_count == 1  # the missing rank only
