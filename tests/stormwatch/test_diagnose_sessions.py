"""diagnose_job's limits: at most --max-sessions sessions, a session that cannot be diagnosed or
written recorded with its error while the others are, a job with nothing to diagnose."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import diagnose_job
from stormwatch.outputs.attempts import AttemptStatus
from stormwatch.outputs.verdict import VerdictStatus
from tests import builders as b

MINUTE_NS = 60 * 10**9


@pytest.fixture(scope="module")
def three_attempts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three 2-rank attempts a minute apart: an OOM in the first (interrupted), then two clean ones."""
    root = tmp_path_factory.mktemp("three") / "job-3"
    b.write_attempt(root, job_id="run-1", world_size=2, attempt="1", close_status="interrupted",
                    alerts_of=lambda rank: (b.oom_alert(2.0),) if rank == 1 else ())
    b.write_attempt(root, job_id="run-2", world_size=2, attempt="2", start_ns=b.START_NS + MINUTE_NS)
    b.write_attempt(root, job_id="run-3", world_size=2, attempt="3", start_ns=b.START_NS + 2 * MINUTE_NS)
    return root


def test_max_sessions_keeps_the_default_and_the_most_recent_and_lists_the_rest(three_attempts: Path) -> None:
    everything = diagnose_job([three_attempts], job_id="job-3", source_name="x",
                              options=DiagnoseOptions(all_sessions=True))
    capped = diagnose_job([three_attempts], job_id="job-3", source_name="x",
                          options=DiagnoseOptions(all_sessions=True, max_sessions=2))

    assert [a.verdict for a in everything.attempts] == [VerdictStatus.CRITICAL, VerdictStatus.CLEAN,
                                                        VerdictStatus.CLEAN]
    oldest, middle, latest = capped.attempts
    assert (oldest.verdict, oldest.error) == (None, "not diagnosed: over --max-sessions 2")
    assert oldest.describe() == "attempt 1 of 3, interrupted, not diagnosed"
    assert middle.diagnosed and latest.diagnosed and latest.default
    assert capped.document.session_count == 3 and capped.document.sessions_diagnosed == 2
    assert any("1 of 3 sessions not diagnosed (over --max-sessions 2)" in w for w in capped.document.warnings)
    assert capped.verdict is not None and capped.verdict.status is VerdictStatus.CLEAN
    assert capped.document.options is not None
    assert capped.document.options["max_sessions"] == 2 and capped.document.options["all_sessions"] is True
    assert [r.session_id for r in capped.sessions] == [latest.session_id, middle.session_id]

    one = diagnose_job([three_attempts], job_id="job-3", source_name="x",
                       options=DiagnoseOptions(all_sessions=True, max_sessions=1))
    assert [a.diagnosed for a in one.attempts] == [False, False, True]  # the default one stays


def test_a_session_whose_id_would_escape_its_folder_is_diagnosed_but_gets_no_outputs(tmp_path: Path) -> None:
    root = tmp_path / "job-escape"
    b.write_attempt(root, job_id="run-2", world_size=2, attempt="2", start_ns=b.START_NS + MINUTE_NS)
    hostile = b.timeline_records(samples=6, session_id="../../escape", alerts=(b.Alert(1.0, "critical"),),
                                 lifecycle=False)
    b.write_jsonl(root / "odd" / "events.jsonl", hostile)
    diagnosis = diagnose_job([root], job_id="job-escape", source_name="x", options=DiagnoseOptions(all_sessions=True))

    odd, clean = diagnosis.attempts
    assert odd.session_id == "../../escape" and odd.verdict is VerdictStatus.CRITICAL  # still counted
    assert odd.report is None and odd.model is None
    assert odd.error is not None and "cannot name a report folder" in odd.error and "path separator" in odd.error
    assert clean.report is not None and clean.report.startswith("sessions/") and clean.error is None
    assert [result.written for result in diagnosis.sessions] == [True, False]  # default (clean) first
    assert diagnosis.verdict is not None and diagnosis.verdict.status is VerdictStatus.CRITICAL
    assert any("../../escape (diagnosed, not written)" in w for w in diagnosis.document.warnings)


def test_outputs_that_could_not_be_written_are_recorded_on_their_attempt(three_attempts: Path) -> None:
    diagnosis = diagnose_job([three_attempts], job_id="job-3", source_name="x",
                             options=DiagnoseOptions(all_sessions=True))
    first = diagnosis.attempts[0]
    failed = diagnosis.with_output_errors({first.session_id: "its outputs were not written: OSError: disk full"})

    again = failed.attempts[0]
    assert (again.report, again.model, again.error) == (None, None, "its outputs were not written: OSError: disk full")
    assert again.verdict is VerdictStatus.CRITICAL and failed.attempts[1:] == diagnosis.attempts[1:]
    entry = (failed.document.attempts or ())[0]
    assert entry.attempt == again and entry.ranks
    assert any(first.session_id in w and "disk full" in w for w in failed.document.warnings)
    assert diagnosis.with_output_errors({}) is diagnosis


def test_a_job_with_no_session_is_one_empty_document(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    diagnosis = diagnose_job([tmp_path / "empty"], job_id="empty", source_name="x",
                             options=DiagnoseOptions(all_sessions=True))
    assert diagnosis.attempts == () and diagnosis.sessions == ()
    assert diagnosis.verdict is not None and diagnosis.verdict.status is VerdictStatus.EMPTY
    assert diagnosis.document.attempts is None and diagnosis.session_documents == (diagnosis.document,)


def test_one_session_jobs_keep_their_verdict_word_for_word(tmp_path: Path) -> None:
    b.write_multi_rank_job(tmp_path / "j", world_size=2, alerts=b.DEFAULT_ALERTS)
    single = diagnose_job([tmp_path / "j"], job_id="j", source_name="x")
    every = diagnose_job([tmp_path / "j"], job_id="j", source_name="x", options=DiagnoseOptions(all_sessions=True))
    assert every.verdict == single.verdict and every.document.verdict == single.document.verdict
    assert [a.status for a in every.attempts] == [AttemptStatus.COMPLETED]
    assert every.document.model is every.main.document.model


def test_a_session_id_and_all_sessions_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="exclude each other"):
        DiagnoseOptions.parse(session_id="s-1", all_sessions=True)
    with pytest.raises(ValueError, match="at least 1"):
        DiagnoseOptions.parse(all_sessions=True, max_sessions=0)
    assert "all_sessions" not in DiagnoseOptions.parse().recorded()  # one-session documents stay comparable
