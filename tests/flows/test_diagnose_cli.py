"""``stormwatch diagnose``: exit codes, summary, model.json, and no Prefect import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main
from tests import builders as b


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 ranks, rank 2 missing, alerts (warning, critical, OOM) and phases on every rank."""
    root = tmp_path_factory.mktemp("job") / "train-42"
    b.write_multi_rank_job(root, world_size=4, missing_ranks=[2], phases=b.DEFAULT_PHASES,
                           alerts=b.DEFAULT_ALERTS)
    return root


@pytest.fixture(scope="module")
def quiet_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 healthy ranks: no alerts, a small steady hidden gap."""
    root = tmp_path_factory.mktemp("quiet") / "quiet-1"
    b.write_multi_rank_job(root, world_size=2, samples=12)
    return root


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ([], 0),
        (["--fail-on", "never"], 0),
        (["--fail-on", "warning"], 3),
        (["--fail-on", "critical"], 3),
        (["--ranks", "0,2-3", "--fail-on", "critical"], 3),
        (["--ranks", "3-1"], 2),
        (["--ranks", "x"], 2),
        (["--session", "no-such-session"], 2),
        (["--preset", "extreme"], 2),
        (["--fail-on", "sometimes"], 2),
    ],
)
def test_exit_codes(job: Path, tmp_path: Path, extra: list[str], code: int) -> None:
    assert main(["diagnose", str(job), "--out", str(tmp_path / "out"), *extra]) == code


def test_clean_job_passes_even_failing_on_warning(quiet_job: Path, tmp_path: Path, capsys) -> None:
    assert main(["diagnose", str(quiet_job), "--out", str(tmp_path), "--fail-on", "warning"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("quiet-1: CLEAN: no anomaly (exit 0)\n")
    assert "2/2 present" in out


def test_nothing_loadable_and_missing_source(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not telemetry")
    assert main(["diagnose", str(empty), "--out", str(tmp_path / "o")]) == 5
    document = orjson.loads((tmp_path / "o" / "model.json").read_bytes())
    assert document["verdict"] == {"status": "empty", "exit_code": 5,
                                   "summary": "No telemetry events could be loaded."}
    assert main(["diagnose", str(tmp_path / "absent")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_summary_and_model_json(job: Path, tmp_path: Path, capsys) -> None:
    assert main(["diagnose", str(job), "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "train-42: CRITICAL: out of memory on ranks 0-1,3 (exit 0)"
    assert lines[1].split() [:4] == ["earliest", "cause", "rank", "0"]
    assert "alert:warning | warning | +2.000 s" in lines[1]
    assert "most severe" in lines[2] and "alert:critical | critical | +3.500 s | phase train" in lines[2]
    assert "3/4 present, missing 2" in lines[3]
    assert lines[-3].endswith(str(tmp_path / "model.json")) and lines[-2].endswith(str(tmp_path / "report.html"))
    assert lines[-1].endswith(str(tmp_path / "sessions"))
    page = (tmp_path / "report.html").read_text()
    assert page.lower().startswith("<!doctype html>") and "train-42" in page

    document = orjson.loads((tmp_path / "model.json").read_bytes())
    assert document["schema_version"] == 1
    assert document["job_id"] == "train-42"
    assert document["input_fingerprint"].startswith("sha256:")
    assert document["verdict"]["status"] == "critical" and document["verdict"]["exit_code"] == 0
    assert [s["rank"] for s in document["sessions"] if s["world_size"] == 4][:3] == [0, 1, 3]
    assert all(isinstance(s["events"], int) for s in document["sessions"])
    model = document["model"]
    assert model["expected_ranks"] == [0, 1, 2, 3] and model["missing_ranks"] == [2]
    assert set(model["per_rank_timelines"]) == {"0", "1", "3"}
    timeline = model["per_rank_timelines"]["0"]
    assert set(timeline) == {"timestamps_ns", "allocated", "reserved", "gap"}
    assert len(timeline["timestamps_ns"]) == 12
    assert [i["kind"] for i in model["indicators"]] == ["earliest", "most_severe"]
    row_fields = {"rank", "availability", "samples", "allocated_delta_bytes", "reserved_delta_bytes",
                  "hidden_gap_latest_bytes", "hidden_gap_peak_abs_bytes", "has_anomaly",
                  "first_anomaly_timestamp_ns", "first_anomaly_signal", "first_anomaly_phase_path"}
    assert all(set(row) == row_fields for row in model["rows"])


def test_fingerprint_changes_with_inputs_only(job: Path, tmp_path: Path, tmp_path_factory) -> None:
    copy = tmp_path_factory.mktemp("copy") / "train-42"
    b.write_multi_rank_job(copy, world_size=4, missing_ranks=[2], phases=b.DEFAULT_PHASES,
                           alerts=b.DEFAULT_ALERTS)

    def fingerprint(source: Path, out: str) -> str:
        main(["diagnose", str(source), "--out", str(tmp_path / out)])
        return orjson.loads((tmp_path / out / "model.json").read_bytes())["input_fingerprint"]

    first = fingerprint(copy, "a")
    assert fingerprint(copy, "b") == first
    extra = copy / "rank_3" / "events.jsonl"
    extra.write_bytes(extra.read_bytes() + b"\n")
    assert fingerprint(copy, "c") != first


def test_diagnose_does_not_import_prefect(job: Path, tmp_path: Path) -> None:
    code = (
        "import sys; from stormwatch.flows.cli import main; "
        f"rc = main(['diagnose', {str(job)!r}, '--out', {str(tmp_path)!r}]); "
        "assert 'prefect' not in sys.modules, 'prefect imported'; sys.exit(rc)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 ranks: attempt 1 ran out of memory on rank 3 and was interrupted, the restart completed cleanly."""
    root = tmp_path_factory.mktemp("restarted") / "train-7b"
    b.write_restarted_job(root)
    return root


@pytest.mark.parametrize("every", [[], ["--all-sessions"]])
def test_diagnose_judges_every_session_as_the_audit_does(
        restarted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], every: list[str]) -> None:
    assert main(["diagnose", str(restarted), "--out", str(tmp_path / "all"), *every, "--fail-on", "critical"]) == 3
    lines = capsys.readouterr().out.splitlines()
    job = orjson.loads((tmp_path / "all" / "model.json").read_bytes())
    first, second = job["attempts"]
    assert lines[0] == "train-7b: CRITICAL, from attempt 1 of 2: out of memory on rank 3 (exit 3)"
    assert lines[1] == f"  attempt 1 of 2, interrupted, OOM on rank 3 - session {first['session_id']} [verdict]"
    assert lines[2] == f"  attempt 2 of 2, completed, no anomaly - session {second['session_id']} [shown]"
    assert lines[3].startswith("  earliest cause  rank 3 | alert:error | critical") and lines[3].endswith(
        "(attempt 1)")  # the causes printed are those of the attempt the verdict comes from
    for attempt in (first, second):
        folder = tmp_path / "all" / "sessions" / attempt["session_id"]
        session = orjson.loads((folder / "model.json").read_bytes())
        assert session["selected_session_id"] == attempt["session_id"]
        assert session["verdict"]["status"] == attempt["verdict"] and (folder / "report.html").is_file()
    assert job["options"]["all_sessions"] is True and job["options"]["max_sessions"] == 64
    assert job["selected_session_id"] == second["session_id"] and job["worst_session"] == first["session_id"]


def test_one_session_on_request(restarted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(restarted), "--out", str(tmp_path / "all")]) == 0
    second = orjson.loads((tmp_path / "all" / "model.json").read_bytes())["attempts"][1]["session_id"]
    capsys.readouterr()
    assert main(["diagnose", str(restarted), "--out", str(tmp_path / "one"), "--session", second,
                 "--fail-on", "critical"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("train-7b: CLEAN: no anomaly (exit 0)\n")
    assert f"  sessions        2 attempts found; this is session {second} only (without --session" in out
    assert "attempts" not in orjson.loads((tmp_path / "one" / "model.json").read_bytes())


def test_all_sessions_records_a_session_it_could_not_write(restarted: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["diagnose", str(restarted), "--out", str(tmp_path / "probe")]) == 0
    first = orjson.loads((tmp_path / "probe" / "model.json").read_bytes())["attempts"][0]["session_id"]
    (out / "sessions").mkdir(parents=True)
    (out / "sessions" / first).write_text("in the way")
    assert main(["diagnose", str(restarted), "--out", str(out), "--all-sessions", "--fail-on", "critical"]) == 3
    failed, written = orjson.loads((out / "model.json").read_bytes())["attempts"]
    assert failed["report"] is None and "its outputs were not written" in failed["error"]
    assert written["error"] is None and (out / "sessions" / written["session_id"] / "report.html").is_file()


@pytest.mark.parametrize("extra", [["--max-sessions", "2", "--session", "x"], ["--all-sessions", "--session", "x"],
                                   ["--max-sessions", "0"]])
def test_session_flags_that_do_not_go_together_are_usage_errors(restarted: Path, tmp_path: Path,
                                                                 extra: list[str]) -> None:
    assert main(["diagnose", str(restarted), "--out", str(tmp_path), *extra]) == 2


def test_max_sessions_keeps_the_default_session(restarted: Path, tmp_path: Path) -> None:
    assert main(["diagnose", str(restarted), "--out", str(tmp_path), "--max-sessions", "1",
                 "--fail-on", "critical"]) == 0  # only the clean restart is diagnosed
    job = orjson.loads((tmp_path / "model.json").read_bytes())
    assert [a["verdict"] for a in job["attempts"]] == [None, "clean"] and job["session_count"] == 2
    assert any("1 of 2 sessions not diagnosed (over --max-sessions 1)" in w for w in job["warnings"])
