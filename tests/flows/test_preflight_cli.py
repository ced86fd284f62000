"""``audit``, ``serve`` and ``post-job`` check their flags and storage before Prefect is imported
(issue 23): one line naming the thing, exit 2 for the command line's fault, 1 for the store's."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stormwatch.flows.cli import main
from tests import builders as b

SECRET = "s3cr3t-K3Y-QQ"


def a_job(folder: Path) -> None:
    b.write_multi_rank_job(folder, world_size=2, samples=4)


def jobs_flat(root: Path) -> None:
    """Three job folders directly under the root (no jobs/), and a folder of notes."""
    for name in ("job-a", "job-b", "job-c"):
        a_job(root / name)
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not telemetry")


def deep_sink(root: Path) -> None:
    b.write_sink(root / "restarted" / "rank_0" / "attempt-1", records=b.timeline_records(samples=b.ramp(4)))


def only_reports(root: Path) -> None:
    (root / "reports").mkdir()
    (root / "reports" / "index.html").write_text("<html></html>")


def job_as_root(root: Path) -> None:
    b.write_jsonl(root / "events.jsonl", b.timeline_records(samples=b.ramp(4)))


def a_reports_folder(root: Path) -> None:
    """The reports folder given as the root: job folders holding model.json, and fleet.json at the top."""
    (root / "job-a").mkdir()
    (root / "job-a" / "model.json").write_text("{}")
    (root / "fleet.json").write_text("{}")
    (root / "index.html").write_text("<html></html>")


def empty_jobs(root: Path) -> None:
    (root / "jobs").mkdir()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "fleet"
    folder.mkdir()
    return folder


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(("layout", "words"), [
    (jobs_flat, ["no jobs/ folder under {root} (expected {root}/jobs/<job_id>/…)",
                 "3 folders with telemetry directly under {root} (job-a, job-b, job-c); move them into {root}/jobs/"]),
    (deep_sink, ["1 folder with telemetry directly under {root} (restarted); move it into {root}/jobs/"]),
    (lambda root: None, ["{root} is empty"]),
    (only_reports, ["{root} holds only reports/"]),
    (job_as_root, ["telemetry files at {root} itself (events.jsonl)", "stormwatch diagnose"]),
    (a_reports_folder, ["{root} looks like a reports folder (fleet.json, index.html)",
                        "pass {root.parent} as the storage root"]),
], ids=["folders-directly-under-root", "nested-sink", "empty-root", "only-reports", "a-job-folder-as-root",
        "the-reports-folder-as-root"])
def test_a_root_without_jobs_is_a_usage_error_saying_what_is_there(
    root: Path, capsys: pytest.CaptureFixture[str], layout: Callable[[Path], None], words: list[str]
) -> None:
    layout(root)
    assert main(["audit", "--storage", str(root)]) == 2
    line = one_line(capsys.readouterr().err)
    for phrase in words:
        assert phrase.format(root=root) in line


def test_the_jobs_folder_as_root_points_at_its_parent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = tmp_path / "fleet" / "jobs"
    jobs_flat(jobs)
    assert main(["audit", "--storage", str(jobs)]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"3 folders with telemetry directly under {jobs}, which looks like the jobs folder itself" in line
    assert f"pass {jobs.parent} as the storage root" in line and "move them into" not in line


def test_an_empty_jobs_folder_is_nothing_to_do(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty_jobs(root)
    assert main(["audit", "--storage", str(root)]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"no jobs yet under {root}/jobs/\n" and captured.err == ""
    assert not (root / "reports").exists()  # nothing started, nothing written


@pytest.mark.parametrize(("argv", "words"), [
    (["--storage", "ftp://x"], ["storage URI scheme 'ftp://' is not supported", "s3://bucket[/prefix]"]),
    (["--storage", "gs://x"], ["storage URI scheme 'gs://' is not supported"]),
    (["--storage", "s3://"], ["storage URI 's3://' names no bucket"]),
    (["--storage", "s3://b?versionId=1"], ["S3 URI with a query or fragment"]),
    (["--storage", "file://far-host/x"], ["file URI with a remote host is not supported"]),
    (["--storage", "/nonexistent/fleet"], ["storage root /nonexistent/fleet does not exist"]),
    (["--storage", f"s3://AKIA:{SECRET}@bucket/p"], ["must not hold a user or password (s3://…@…)"]),
    (["--storage", "/nonexistent", "--max-events", "0"], ["max_events must be a positive integer"]),  # flags first
    (["--storage", "/nonexistent", "--as-of", "last tuesday"], ["as_of"]),
    (["--storage", "s3://b", "--endpoint-url", f"http://k:{SECRET}@minio:9000"], ["must not hold a password"]),
    (["--storage", "/nonexistent", "--leak-min", "8GB/h"], ["--leak-min '8GB/h' has unknown unit 'GB'", "0.8%/h"]),
], ids=["ftp", "gs", "s3-no-bucket", "s3-query", "file-remote-host", "nonexistent", "credentials-in-uri",
        "bad-flag-first", "bad-as-of", "endpoint-with-password", "bad-leak-min"])
@pytest.mark.parametrize("command", [["audit"], ["serve", "--temporary-server"], ["post-job", "job-a"]])
def test_usage_errors_name_the_thing_in_one_line(
    capsys: pytest.CaptureFixture[str], command: list[str], argv: list[str], words: list[str]
) -> None:
    if command[0] == "serve" and "--as-of" in argv:
        words = ["--as-of does not apply to serve"]  # any --as-of: a schedule acts at its own times
    assert main([*command, *argv]) == 2
    line = one_line(capsys.readouterr().err)
    assert all(phrase in line for phrase in words) and SECRET not in line


def test_no_storage_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("STORMWATCH_STORAGE", raising=False)
    assert main(["audit"]) == 2
    assert "no storage: pass --storage or set STORMWATCH_STORAGE" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize(("argv", "words"), [
    (["..", "--storage", "{root}"], ["invalid job id '..'"]),
    (["fleet.json", "--storage", "{root}"], ["collides with a fleet report file name"]),
    (["nope", "--storage", "{root}"], ["no job folder {root}/jobs/nope/ (jobs there: job-a, job-b)"]),
    (["job-a", "--storage", "{root}", "--lease-wait", "-1"], ["--lease-wait must be a number of seconds"]),
], ids=["dot-dot", "reserved-name", "missing-job", "negative-lease-wait"])
def test_post_job_checks_the_job_before_prefect(root: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                                words: list[str]) -> None:
    for name in ("job-a", "job-b"):
        a_job(root / "jobs" / name)
    assert main(["post-job", *(part.format(root=root) for part in argv)]) == 2
    line = one_line(capsys.readouterr().err)
    assert all(phrase.format(root=root) in line for phrase in words)


def test_post_job_in_an_empty_jobs_folder(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty_jobs(root)
    assert main(["post-job", "job-a", "--storage", str(root)]) == 2
    assert f"no job folder {root}/jobs/job-a/ (no jobs yet under {root}/jobs/)" in one_line(capsys.readouterr().err)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_configured_prefect_server_that_does_not_answer(root: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    a_job(root / "jobs" / "job-a")
    url = f"http://127.0.0.1:{closed_port()}/api"
    monkeypatch.setenv("PREFECT_API_URL", url)
    assert main(["audit", "--storage", str(root)]) == 1
    assert f"no Prefect server answers at {url} (ConnectError)" in one_line(capsys.readouterr().err)


# --- S3 through moto's server, over HTTP --------------------------------------------------------


def no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_s3_roots(s3_bucket: str, moto_client: Any, moto_endpoint: str, capsys: pytest.CaptureFixture[str],
                  monkeypatch: pytest.MonkeyPatch) -> None:
    def audit(uri: str, endpoint: str = moto_endpoint) -> tuple[int, str, str]:
        code = main(["audit", "--storage", uri, "--endpoint-url", endpoint])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    moto_client.put_object(Bucket=s3_bucket, Key="flat/job-a/rank_0/events.jsonl", Body=b"{}\n")
    moto_client.put_object(Bucket=s3_bucket, Key="flat/reports/index.html", Body=b"")
    code, _, err = audit(f"s3://{s3_bucket}/flat")
    assert code == 2
    assert (f"no jobs/ folder under s3://{s3_bucket}/flat (expected s3://{s3_bucket}/flat/jobs/<job_id>/…): 1 folder "
            f"with telemetry directly under s3://{s3_bucket}/flat (job-a)") in one_line(err)

    moto_client.put_object(Bucket=s3_bucket, Key="fresh/jobs/", Body=b"")  # a folder marker, no job yet
    assert audit(f"s3://{s3_bucket}/fresh")[:2] == (0, f"no jobs yet under s3://{s3_bucket}/fresh/jobs/\n")
    assert audit(f"s3://{s3_bucket}/nothing-here")[0] == 2

    missing = f"{s3_bucket}-missing"
    code, _, err = audit(f"s3://{missing}/fleet")
    assert code == 1 and f"no such bucket '{missing}' at {moto_endpoint}" in one_line(err)

    port = closed_port()
    code, _, err = audit(f"s3://{s3_bucket}", f"http://127.0.0.1:{port}")
    assert code == 1 and f"cannot reach the S3 endpoint http://127.0.0.1:{port} (EndpointConnectionError)" in one_line(
        err)

    moto_client.put_object(Bucket=s3_bucket, Key="fleet/jobs/job-a/rank_0/events.jsonl", Body=b"{}\n")
    assert main(["post-job", "job-b", "--storage", f"s3://{s3_bucket}/fleet", "--endpoint-url", moto_endpoint]) == 2
    assert f"no job folder s3://{s3_bucket}/fleet/jobs/job-b/ (jobs there: job-a)" in one_line(capsys.readouterr().err)

    no_credentials(monkeypatch)
    code, _, err = audit(f"s3://{s3_bucket}/fleet")
    assert code == 1 and "no AWS credentials found" in one_line(err)


def test_debug_shows_the_traceback_of_a_store_error(s3_bucket: str, moto_endpoint: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    uri = f"s3://{s3_bucket}-missing"
    assert main(["audit", "--storage", uri, "--endpoint-url", moto_endpoint, "--debug"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no such bucket") and "Traceback" in err and "NoSuchBucket" in err


# --- nothing imports Prefect before refusing -----------------------------------------------------

_REFUSALS = """
import json, sys
from stormwatch.flows.cli import main
seen = []
for argv in json.loads(sys.argv[1]):
    code = main(argv)
    seen.append([code, "prefect" in sys.modules])
print(json.dumps(seen))
"""


def test_refusals_never_import_prefect(root: Path, tmp_path: Path) -> None:
    jobs_flat(root)
    (tmp_path / "empty" / "jobs").mkdir(parents=True)
    cases = [
        (["audit", "--storage", str(root)], 2),
        (["audit", "--storage", str(tmp_path / "empty")], 0),
        (["audit", "--storage", "ftp://x"], 2),
        (["audit", "--storage", "gs://x"], 2),
        (["audit", "--storage", "s3://"], 2),
        (["audit", "--storage", "/nonexistent"], 2),
        (["audit", "--storage", "s3://bucket"], 1),  # no credentials
        (["serve", "--storage", str(root / "job-a")], 2),  # no PREFECT_API_URL
        (["serve", "--storage", str(tmp_path / "empty"), "--as-of", "2026-01-01"], 2),
        (["post-job", "nope", "--storage", str(tmp_path / "empty")], 2),
        (["audit", "--storage", str(root), "--leak-min", "lots"], 2),
        (["post-job", "job-a", "--storage", str(root), "--leak-min", "1GiB"], 2),
    ]
    env = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "PREFECT_API"))}
    env.update(AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent",
               AWS_EC2_METADATA_DISABLED="true")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_REFUSALS), json.dumps([argv for argv, _ in cases])],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == [[code, False] for _, code in cases]
    assert len(done.stderr.splitlines()) == len(cases) - 1  # one line per refusal (the empty jobs/ prints to stdout)
