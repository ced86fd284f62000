"""Storage behaviour, the same tables against a local folder and an S3 prefix (moto over HTTP)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from stormwatch import load_artifacts
from stormwatch.diagnose import diagnose
from stormwatch.tasks.storage.job_ids import InvalidJobIdError
from stormwatch.tasks.storage.open import open_storage
from stormwatch.tasks.storage.protocol import (
    JobNotFoundError,
    JobTooLargeError,
    ReportKeyError,
    StorageSettings,
    model_json_key,
)
from tests.builders import write_multi_rank_job
from tests.tasks.storage.backends import Backend

# (raw folder name, words of the refusal reason, can a local folder have this name)
HOSTILE_IDS = [
    ("..", "relative path segment", False),
    (".", "relative path segment", False),
    ("", "empty", False),
    ("a%2Fb", "percent-encoded", True),
    ("a%2e%2E", "percent-encoded", True),
    ("a%5cb", "percent-encoded", True),
    ("bad\x07id", "control character", True),
    ("del\x7f", "control character", True),
    ("c1\x85x", "control character", True),
    ("a\\b", "path separator", True),
    (" lead", "whitespace", True),
    ("trail ", "whitespace", True),
    ("x" * 201, "201 characters long", True),
    ("index.html", "fleet report file name", True),
]


def test_list_jobs_returns_valid_ids_and_refuses_hostile_ones(backend: Backend) -> None:
    valid = ["job-1", "job.2", "2024-01-01_run_ä"]
    for job_id in valid:
        backend.put(f"jobs/{job_id}/rank_0/telemetry/events_0001.jsonl", b"{}\n")
        backend.put(f"jobs/{job_id}/rank_1/events.json", b"[]")
    hostile = [(raw, words) for raw, words, local_ok in HOSTILE_IDS if local_ok or backend.name == "s3"]
    for raw, _ in hostile:
        backend.put(f"jobs/{raw}/events.jsonl", b"{}\n")
    backend.put("jobs/README.txt", b"not a job")  # an object directly under jobs/ is no job
    backend.put("reports/job-9/model.json", b"{}")

    listing = backend.storage.list_jobs()

    assert listing.job_ids == tuple(sorted(valid))
    reasons = {refused.raw_id: refused.reason for refused in listing.refused}
    assert set(reasons) == {raw for raw, _ in hostile}
    for raw, words in hostile:
        assert words in reasons[raw], (raw, reasons[raw])


def test_list_jobs_of_an_empty_root(backend: Backend) -> None:
    listing = backend.storage.list_jobs()
    assert (listing.job_ids, listing.refused) == ((), ())


def test_job_entries_hold_relative_keys_sizes_and_versions(backend: Backend) -> None:
    files = {"a.json": b"[1, 2]", "rank_0/events.jsonl": b"{}\n{}\n", "rank_0/telemetry/deep/seg.jsonl": b"x" * 1000}
    for key, data in files.items():
        backend.put(f"jobs/job-1/{key}", data)
    backend.put("jobs/job-10/other.json", b"[]")  # a sibling sharing the id's first characters

    entries = backend.storage.job_entries("job-1")

    assert [entry.key for entry in entries] == sorted(files)
    for entry in entries:
        assert entry.size_bytes == len(files[entry.key])
        assert entry.version == backend.version(f"jobs/job-1/{entry.key}")


@pytest.mark.parametrize("raw", ["..", "a/b", "/abs", "a%2fb", "index.html", "x\x00", "alerts.json", "routes.toml",
                                 "silences.json", "history"])
def test_job_operations_refuse_invalid_ids(backend: Backend, raw: str) -> None:
    for call in (backend.storage.job_entries, backend.storage.fetch_job, backend.storage.job_source):
        with pytest.raises(InvalidJobIdError):
            call(raw)


def test_missing_job_is_not_found(backend: Backend) -> None:
    with pytest.raises(JobNotFoundError):
        backend.storage.fetch_job("nope")


@pytest.mark.parametrize("fmt", ["jsonl", "sink", "csv"])
def test_fetched_job_loads_like_the_local_folder(backend: Backend, tmp_path: Path, fmt: str) -> None:
    source = tmp_path / "written" / "job-7"
    write_multi_rank_job(source, world_size=3, samples=6, fmt=fmt, job_id="job-7", missing_ranks=(1,))
    backend.upload(source, "jobs/job-7")

    tree = backend.storage.fetch_job("job-7")
    fetched, local = load_artifacts(tree), load_artifacts([source])

    assert len(local.events) > 0
    pd.testing.assert_frame_equal(fetched.events, local.events, check_categorical=False)
    assert fetched.sessions == local.sessions
    assert fetched.selected_session_id == local.selected_session_id
    assert fetched.markers == local.markers
    assert list(tree.entries()) == backend.storage.job_entries("job-7")
    job_source = backend.storage.job_source("job-7")
    assert tree.identity("") == job_source and tree.root_name == "job-7"
    # the same inputs under the job's absolute name: paths locally, s3:// URIs on S3
    assert fetched.sources_loaded == tuple(name.replace(str(source), job_source) for name in local.sources_loaded)
    if backend.name == "s3":
        assert job_source == f"{backend.settings.uri}/jobs/job-7"
    else:
        assert load_artifacts([job_source]).sources_loaded == fetched.sources_loaded


def test_fetched_job_diagnoses(backend: Backend, tmp_path: Path) -> None:
    source = tmp_path / "written" / "job-3"
    write_multi_rank_job(source, world_size=2, samples=6, job_id="job-3")
    backend.upload(source, "jobs/job-3")
    tree = backend.storage.fetch_job("job-3")

    diagnosis = diagnose(tree, job_id="job-3", source_name=backend.storage.job_source("job-3"))
    reference = diagnose([source], job_id="job-3", source_name=str(source))

    assert diagnosis.verdict == reference.verdict
    assert diagnosis.document.model.rows == reference.document.model.rows
    assert diagnosis.document.source == backend.storage.job_source("job-3")


def test_fetch_refuses_jobs_over_max_bytes(backend: Backend) -> None:
    backend.put("jobs/big/a.jsonl", b"a" * 600)
    backend.put("jobs/big/b/c.jsonl", b"b" * 400)
    assert len(backend.storage.fetch_job("big", max_bytes=1000).entries()) == 2
    with pytest.raises(JobTooLargeError, match="1000 bytes"):
        backend.storage.fetch_job("big", max_bytes=999)


def test_reports_round_trip(backend: Backend) -> None:
    storage = backend.storage
    key = model_json_key("job-1")
    assert storage.read_report(key) is None
    assert storage.read_report("index.html") is None

    storage.write_report(key, b'{"v": 1}', content_type="application/json")
    storage.write_report(key, b'{"v": 2}', content_type="application/json")
    storage.write_report("index.html", b"<html></html>", content_type="text/html; charset=utf-8")

    assert storage.read_report(key) == b'{"v": 2}'
    assert backend.get("reports/job-1/model.json") == b'{"v": 2}'
    assert backend.stored_keys() == {"reports/job-1/model.json", "reports/index.html"}
    if backend.name == "local":
        assert storage.report_uri(key) == (Path(backend.settings.uri).resolve() / "reports/job-1/model.json").as_uri()
    else:
        assert storage.report_uri(key) == f"{backend.settings.uri}/reports/job-1/model.json"


BAD_REPORT_KEYS = [
    "",
    "../jobs/job-1/events.jsonl",
    "job-1/../../jobs/x",
    "/etc/passwd",
    "job-1//model.json",
    "./index.html",
    "job-1/",
    "a\\..\\b",
    "%2e%2e/x",
    "job-1/model.json\x00",
    "job-1/\x1b[31m.html",
]


@pytest.mark.parametrize("key", BAD_REPORT_KEYS)
def test_report_keys_stay_under_reports(backend: Backend, key: str) -> None:
    backend.put("jobs/job-1/events.jsonl", b"{}\n")
    before = {name: backend.get(name) for name in backend.stored_keys()}
    with pytest.raises(ReportKeyError):
        backend.storage.write_report(key, b"evil", content_type="text/plain")
    with pytest.raises(ReportKeyError):
        backend.storage.read_report(key)
    with pytest.raises(ReportKeyError):
        backend.storage.report_uri(key)
    assert {name: backend.get(name) for name in backend.stored_keys()} == before


def test_other_prefixes(backend: Backend) -> None:
    storage = backend.reopen(jobs_prefix="in/jobs", reports_prefix="out")
    backend.put("in/jobs/j1/a.jsonl", b"{}\n")
    backend.put("jobs/j2/a.jsonl", b"{}\n")
    storage.write_report("j1/model.json", b"{}", content_type="application/json")
    assert storage.list_jobs().job_ids == ("j1",)
    assert backend.get("out/j1/model.json") == b"{}"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"jobs_prefix": "data", "reports_prefix": "data/reports"}, "overlap"),
        ({"jobs_prefix": "same", "reports_prefix": "same"}, "overlap"),
        ({"jobs_prefix": "../jobs"}, "relative path segment"),
        ({"reports_prefix": "/reports"}, "empty"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_attempts": 50}, "max_attempts"),
        ({"uri": "gs://bucket/x"}, "unsupported storage URI scheme"),
        ({"uri": "s3:///prefix"}, "without a bucket"),
        ({"uri": "s3://bucket/a/../b"}, "relative path segment"),
        ({"uri": "file://otherhost/x"}, "remote host"),
        ({"uri": " "}, "empty"),
    ],
)
def test_settings_are_checked(changes: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"uri": "./fleet", **changes}
    with pytest.raises(ValueError, match=message):
        StorageSettings(**fields)  # type: ignore[arg-type]


def test_missing_local_root_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not a folder"):
        open_storage(StorageSettings(uri=(tmp_path / "absent").as_uri()))


def test_file_uri_and_path_name_the_same_root(tmp_path: Path) -> None:
    root = tmp_path / "with space"
    root.mkdir()
    by_uri = open_storage(StorageSettings(uri=root.as_uri()))
    by_path = open_storage(StorageSettings(uri=str(root)))
    assert by_uri.report_uri("index.html") == by_path.report_uri("index.html")
