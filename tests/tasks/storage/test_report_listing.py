"""Listing and deleting report objects (the history store's needs), against a local folder and S3."""

from __future__ import annotations

import pytest

from stormwatch.tasks.storage.protocol import ReportKeyError
from tests.tasks.storage.backends import Backend

REPORTS = {
    "history/date=2026-11-29/audit-a.parquet": b"a" * 10,
    "history/date=2026-11-30/audit-b.parquet": b"bb",
    "history/date=2026-11-30/deeper/c.bin": b"c",
    "history-old/x.parquet": b"not under history/",
    "job-1/model.json": b"{}",
    "fleet.json": b"{}",
}


def _seed(backend: Backend) -> None:
    for key, data in REPORTS.items():
        backend.put(f"reports/{key}", data)
    backend.put("jobs/history/rank_0/events.jsonl", b"{}\n")  # a job named like the folder: not a report


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("history", ["history/date=2026-11-29/audit-a.parquet", "history/date=2026-11-30/audit-b.parquet",
                     "history/date=2026-11-30/deeper/c.bin"]),
        ("history/date=2026-11-30",
         ["history/date=2026-11-30/audit-b.parquet", "history/date=2026-11-30/deeper/c.bin"]),
        ("job-1", ["job-1/model.json"]),
        ("nothing-here", []),
    ],
)
def test_list_reports_under_a_folder(backend: Backend, prefix: str, expected: list[str]) -> None:
    _seed(backend)

    entries = backend.storage.list_reports(prefix)

    assert [entry.key for entry in entries] == expected
    for entry in entries:
        assert entry.size_bytes == len(REPORTS[entry.key])
        assert entry.version == backend.version(f"reports/{entry.key}")


def test_list_reports_of_an_empty_root(backend: Backend) -> None:
    assert backend.storage.list_reports("history") == []


def test_list_reports_sees_what_write_report_wrote_and_no_temporary_file(backend: Backend) -> None:
    backend.storage.write_report("history/date=2026-11-30/a.parquet", b"x", content_type="application/octet-stream")
    if backend.name == "local":  # a write that died between its temporary file and the rename
        backend.put("reports/history/date=2026-11-30/.b.parquet.k2j3.tmp", b"partial")

    assert [entry.key for entry in backend.storage.list_reports("history")] == ["history/date=2026-11-30/a.parquet"]


@pytest.mark.parametrize("prefix", ["..", "history/../job-1", "", "a%2fb", "/history"])
def test_list_reports_refuses_unsafe_prefixes(backend: Backend, prefix: str) -> None:
    with pytest.raises(ReportKeyError):
        backend.storage.list_reports(prefix)


def test_delete_report_removes_one_object_only(backend: Backend) -> None:
    _seed(backend)
    key = "history/date=2026-11-29/audit-a.parquet"

    assert backend.storage.delete_report(key) is True
    assert backend.storage.delete_report(key) is False  # already gone

    assert backend.get(f"reports/{key}") is None
    left = {key for key in backend.stored_keys() if key.startswith("reports/")}
    assert left == {f"reports/{other}" for other in REPORTS if other != key}


@pytest.mark.parametrize("key", ["../jobs/history/rank_0/events.jsonl", "history/..", ""])
def test_delete_report_refuses_unsafe_keys(backend: Backend, key: str) -> None:
    _seed(backend)
    with pytest.raises(ReportKeyError):
        backend.storage.delete_report(key)
    assert backend.get("jobs/history/rank_0/events.jsonl") == b"{}\n"
