"""Issue 23's table: what a new user does at the command line, and the plain answer each gets.

Each row runs the real ``stormwatch`` front door (:func:`stormwatch.flows.cli.main`) on jobs written
by stormlog's own writers and asserts the exit code and that the message names the file, the
ranks, the ids or the root at fault. Rows that start Prefect (``post-job``, an audit that runs)
live in the flow tests; the refusals here must come before Prefect is imported.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.flows.cli import main
from stormwatch.version import ENGINE_VERSION
from tests import builders as b
from tests.cut_short_builders import tear_last_line


@dataclass(frozen=True)
class Fleet:
    """A folder of hand-made jobs: ``one_rank`` (1 rank), ``restarted`` (attempt 1 OOM on rank 3,
    the restart clean), ``empty`` (an empty folder), ``texts`` (a folder of text files)."""

    root: Path

    def job(self, name: str) -> str:
        return str(self.root / name)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    root = tmp_path_factory.mktemp("answers")
    b.write_multi_rank_job(root / "one_rank", world_size=1, samples=12)
    b.write_restarted_job(root / "restarted")
    (root / "empty").mkdir()
    texts = root / "texts"
    texts.mkdir()
    (texts / "notes.txt").write_text("not telemetry\n")
    (texts / "README.md").write_text("# nothing here\n")
    return Fleet(root)


@dataclass(frozen=True)
class Row:
    """One row of the table: the command (a function of the fleet), its exit code, and what its
    output (stdout + stderr) must say."""

    name: str
    argv: Callable[[Fleet, Path], list[str]]
    code: int
    says: tuple[str, ...]
    stream: str = "err"  # where the answer is printed: "out" or "err"


ROWS = [
    Row("ranks-none", lambda f, out: ["diagnose", f.job("one_rank"), "--ranks", "5", "--out", str(out)], 2,
        ("error: --ranks '5' selects none of the job's ranks: present 0",)),
    Row("ranks-none-range", lambda f, out: ["diagnose", f.job("restarted"), "--ranks", "8-9", "--out", str(out)], 2,
        ("selects none of the job's ranks: present 0-3",)),
    Row("restarted", lambda f, out: ["diagnose", f.job("restarted"), "--out", str(out), "--fail-on", "critical"], 3,
        ("restarted: CRITICAL, from attempt 1 of 2: out of memory on rank 3 (exit 3)",), "out"),
    Row("session-nope", lambda f, out: ["diagnose", f.job("restarted"), "--session", "nope", "--out", str(out)], 2,
        ("error: no session 'nope' in", "train-run1-rank3  started 20", "train-run2-rank0  started 20")),
    Row("load-session-nope", lambda f, out: ["load", f.job("one_rank"), "--session", "nope"], 2,
        ("error: no session 'nope' in", "  started 20")),
    Row("empty-folder", lambda f, out: ["diagnose", f.job("empty"), "--out", str(out)], 5,
        ("empty: EMPTY: nothing loaded (exit 5)", "warning         No telemetry artifacts found under"), "out"),
    Row("text-files", lambda f, out: ["diagnose", f.job("texts"), "--out", str(out)], 5,
        ("texts: EMPTY: nothing loaded (exit 5)", "warning         No telemetry artifacts found under"), "out"),
    Row("version", lambda f, out: ["--version"], 0, (f"stormwatch {ENGINE_VERSION}",), "out"),
    Row("missing-source", lambda f, out: ["diagnose", str(f.root / "absent")], 2,
        ("error: no such file or folder:", "absent")),
    Row("session-and-all", lambda f, out: ["diagnose", f.job("restarted"), "--session", "x", "--all-sessions"], 2,
        ("--session ID diagnoses one session and --all-sessions every one",)),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_the_command_line_answers_plainly(row: Row, fleet: Fleet, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(row.argv(fleet, tmp_path / "out")) == row.code
    captured = capsys.readouterr()
    text = captured.out if row.stream == "out" else captured.err
    for phrase in row.says:
        assert phrase in text, f"{phrase!r} not in:\n{text}"
    if row.code == 2:  # a usage error is said on stderr, first line first, and writes nothing
        assert text.startswith("error: ") and not (tmp_path / "out").exists()


def test_a_file_cut_mid_record_is_named_in_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What an OOM-killed writer leaves: the last line of rank 0's file cut partway, no newline."""
    job = tmp_path / "killed"
    b.write_multi_rank_job(job, world_size=2, samples=12)
    telemetry = sorted(job.rglob("*.jsonl"))[0]
    torn = tear_last_line(telemetry)
    left, stamp = telemetry.read_bytes(), telemetry.stat().st_mtime_ns
    assert main(["diagnose", str(job), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    relative = telemetry.relative_to(job).as_posix()
    assert f"  warning         rank 0: {relative} ends mid-record " in out
    assert "s into the job; the writer stopped abruptly" in out
    assert (telemetry.read_bytes(), telemetry.stat().st_mtime_ns) == (left, stamp)  # the input is left as it is
    assert not left.endswith(b"\n") and torn.partial_bytes > 0


def test_audit_of_job_folders_directly_under_the_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table's first row: not 'audited 0 jobs', exit 0, but the layout expected and what is there."""
    for name in ("train-a", "train-b"):
        b.write_multi_rank_job(tmp_path / name, world_size=1, samples=4)
    assert main(["audit", "--storage", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: no jobs/ folder under {tmp_path} (expected {tmp_path}/jobs/<job_id>/…)")
    assert f"2 folders with telemetry directly under {tmp_path} (train-a, train-b)" in err


def test_a_usage_error_lists_at_most_20_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "many"
    for attempt in range(25):
        b.write_attempt(job, job_id=f"run{attempt:02d}", world_size=1, attempt=f"attempt-{attempt:02d}",
                        start_ns=b.START_NS + attempt * 100 * 10**9)
    assert main(["diagnose", str(job), "--session", "nope", "--out", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("error: no session 'nope' in") and "it has 25" in lines[0]
    assert len(lines) == 1 + 20 + 1 and lines[-1].startswith("  ... 5 more")
    assert lines[1].split()[0] < lines[20].split()[0]  # earliest first


def test_a_restarted_job_keeps_the_reference_model_and_says_its_worst_attempt(
        fleet: Fleet, tmp_path: Path) -> None:
    """The verdict is the worst attempt's; ``model`` stays the default session's, as stormlog shows it."""
    assert main(["diagnose", fleet.job("restarted"), "--out", str(tmp_path)]) == 0
    document = orjson.loads((tmp_path / "model.json").read_bytes())
    first, second = document["attempts"]
    assert document["verdict"]["status"] == "critical" and document["worst_session"] == first["session_id"]
    assert document["selected_session_id"] == second["session_id"]
    assert document["model"]["indicators"] == []  # the clean restart, stormlog's default session


def test_warnings_name_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "bad-lines"
    b.write_multi_rank_job(job, world_size=1, samples=12)
    telemetry = next(job.rglob("*.jsonl"))
    telemetry.write_bytes(telemetry.read_bytes() + b"{not json}\n")
    assert main(["diagnose", str(job), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert f"  warning         {telemetry}:" in out and "malformed JSON" in out


def test_load_reads_s3_as_diagnose_does(tmp_path: Path, s3_bucket: str, moto_client: Any, moto_endpoint: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "train-3"
    b.write_multi_rank_job(job, world_size=2, samples=12)
    for path in sorted(p for p in job.rglob("*") if p.is_file()):
        moto_client.put_object(Bucket=s3_bucket, Key=f"fleet/jobs/train-3/{path.relative_to(job).as_posix()}",
                               Body=path.read_bytes())
    uri = f"s3://{s3_bucket}/fleet/jobs/train-3"
    assert main(["load", str(job)]) == 0
    local = capsys.readouterr().out
    assert main(["load", uri, "--endpoint-url", moto_endpoint]) == 0
    remote = capsys.readouterr().out
    assert remote.startswith(f"{uri}: ") and " events, ranks [0, 1], " in remote
    assert remote.split(":", 2)[2].split(", selected")[0] == local.split(":", 1)[1].split(", selected")[0]
    assert main(["load", uri, str(job)]) == 2
    assert "must be the only SOURCE" in capsys.readouterr().err


def test_silence_commands_name_their_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "fleet"
    (root / "jobs").mkdir(parents=True)
    assert main(["silence", "list", "--storage", str(root)]) == 0
    assert capsys.readouterr().out == f"0 silence(s) in reports/silences.json under {root}\n"
    assert main(["silence", "add", "--storage", str(root), "--match", "job=llama-*", "--until", "2999-01-01",
                 "--reason", "known"]) == 0
    added = capsys.readouterr().out
    assert added.startswith("added s-") and added.endswith(f"(in reports/silences.json under {root})\n")
    identifier = added.split()[1]
    assert main(["silence", "expire", identifier, "--storage", str(root)]) == 0
    assert capsys.readouterr().out == f"expired {identifier} (in reports/silences.json under {root})\n"


def test_silence_refuses_a_root_that_is_no_storage_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``silence list --storage demo/reports`` (the reports folder given as the root) names the root and
    the right one, and writes nothing there."""
    reports = tmp_path / "demo" / "reports"
    (reports / "job-a").mkdir(parents=True)
    (reports / "fleet.json").write_text("{}")
    for argv in (["list"], ["add", "--match", "job=x", "--until", "2999-01-01", "--reason", "r"]):
        assert main(["silence", *argv, "--storage", str(reports)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {reports} is not a storage root: it has no jobs/ or reports/")
        assert f"pass {reports.parent} as the storage root" in err
    assert sorted(path.name for path in reports.iterdir()) == ["fleet.json", "job-a"]


def test_debug_prints_the_traceback(tmp_path: Path) -> None:
    """An unexpected error is one line; ``--debug`` adds its traceback (an unreadable file as SOURCE)."""
    code = ("import sys; from stormwatch.flows.cli import main; "
            "import stormwatch.flows.diagnose_cmd as d; "
            "d.diagnose_job = lambda *a, **k: (_ for _ in ()).throw(RuntimeError('boom')); "
            f"sys.exit(main(['diagnose', {str(tmp_path)!r}, '--out', {str(tmp_path / 'o')!r}] + sys.argv[1:]))")
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert plain.returncode == 1 and plain.stderr == "error: boom\n"
    debug = subprocess.run([sys.executable, "-c", code, "--debug"], capture_output=True, text=True, check=False)
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.endswith("error: boom\n")
