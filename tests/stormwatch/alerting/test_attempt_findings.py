"""A job diagnosed as several sessions is told by its worst attempt: the first causes of that
attempt, the attempt named, an earlier attempt's OOM even when the latest is clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.alerting.findings import JobFinding, finding_from_json, finding_to_json
from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import diagnose_job
from stormwatch.severity import Severity
from tests import builders as b

DESCRIPTION = "attempt 1 of 2, interrupted, OOM on rank 3"


def attempt_document(root: Path, *, all_sessions: bool = True) -> dict[str, Any]:
    diagnosis = diagnose_job([root], job_id="train", source_name="jobs/train",
                             options=DiagnoseOptions(all_sessions=all_sessions))
    return orjson.loads(diagnosis.document.to_json())


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("restarted") / "train"
    b.write_restarted_job(root)
    return root


def test_the_worst_attempts_first_causes_and_name_stand_for_the_job(restarted: Path) -> None:
    document = attempt_document(restarted)
    default = next(item for item in document["attempts"] if item["default"])
    assert default["verdict"] == "clean"  # the job's own model is the clean restart's

    finding = JobFinding.from_document(document, report_url=None)

    assert finding.verdict == "critical"
    assert finding.attempt is not None
    assert (finding.attempt.number, finding.attempt.of, finding.attempt.status) == (1, 2, "interrupted")
    assert finding.attempt.description == DESCRIPTION
    assert finding.indicators and all(DESCRIPTION in fact.details for fact in finding.indicators)
    assert {fact.rank for fact in finding.indicators} == {3}
    assert finding.worst() is Severity.CRITICAL
    assert finding.oom is not None and finding.oom.rank == 3
    assert finding_from_json(orjson.loads(orjson.dumps(finding_to_json(finding)))) == finding


def test_a_job_of_one_session_names_no_attempt(restarted: Path) -> None:
    finding = JobFinding.from_document(attempt_document(restarted, all_sessions=False), report_url=None)
    assert finding.attempt is None and finding.verdict == "clean" and not finding.indicators
