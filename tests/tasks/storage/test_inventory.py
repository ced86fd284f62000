"""One inventory of a storage root, the same table against a local folder and an S3 prefix."""

from __future__ import annotations

from stormwatch.outputs.model_json import input_fingerprint
from stormwatch.tasks.storage.inventory import REPORT_FILES, Inventory, JobInputs, build_inventory, session_folders
from stormwatch.tasks.storage.protocol import build_listing
from tests.tasks.storage.backends import Backend


def test_one_inventory_lists_every_job_with_its_inputs_and_reports(backend: Backend) -> None:
    backend.put("jobs/job-a/rank_0/events.jsonl", b"{}\n")
    backend.put("jobs/job-a/rank_1/events.jsonl", b"{}\n{}\n")
    backend.put("jobs/job-b/events.json", b"[]")
    backend.put("jobs/bad%2fid/events.json", b"[]")
    backend.put("jobs/README.txt", b"not a job")
    backend.put("reports/job-a/model.json", b"{}")
    backend.put("reports/job-a/report.html", b"<html>")
    backend.put("reports/job-b/model.json", b"{}")  # its report.html is missing
    backend.put("reports/fleet.json", b"{}")

    inventory = backend.storage.take_inventory()

    assert [job.job_id for job in inventory.jobs] == ["job-a", "job-b"]
    assert [refused.raw_id for refused in inventory.refused] == ["bad%2fid"]
    assert inventory.reported == frozenset({"job-a"})
    job_a = inventory.job("job-a")
    assert job_a is not None
    assert job_a.entries == tuple(backend.storage.job_entries("job-a"))  # what a per-job listing gives
    assert job_a.size_bytes == 9 and inventory.total_bytes == 11
    assert job_a.fingerprint == input_fingerprint(backend.storage.job_entries("job-a"))


def test_an_inventory_changes_its_fingerprint_with_any_input(backend: Backend) -> None:
    backend.put("jobs/j/rank_0/events.jsonl", b"{}\n")
    before = backend.storage.take_inventory().jobs[0].fingerprint
    backend.put("jobs/j/rank_0/events.jsonl", b"{}\n\n")
    assert backend.storage.take_inventory().jobs[0].fingerprint != before


def test_an_empty_root_has_an_empty_inventory(backend: Backend) -> None:
    inventory = backend.storage.take_inventory()
    assert inventory == Inventory((), (), frozenset())


def test_build_inventory_sorts_entries_and_needs_every_report_file() -> None:
    from stormwatch.load.tree import Entry

    listing = build_listing(["b", "a", "../x"])
    entries = {"a": [Entry("z", 1, "v1"), Entry("y", 2, "v2")]}
    reports = [Entry(key, size, "v") for size, key in enumerate(
        [f"a/{name}" for name in REPORT_FILES] + ["b/model.json", "index.html"], start=10)]
    inventory = build_inventory(listing, entries, reports)
    assert inventory.jobs == (JobInputs("a", (Entry("y", 2, "v2"), Entry("z", 1, "v1"))), JobInputs("b", ()))
    assert inventory.reported == frozenset({"a"})
    assert inventory.report_bytes == {entry.key: entry.size_bytes for entry in reports[:-1]}  # job files only
    assert [item.raw_id for item in inventory.refused] == ["../x"]


def test_session_folders_are_those_holding_a_report_file() -> None:
    from stormwatch.load.tree import Entry

    keys = ["job-a/model.json", "job-a/sessions/s-1/model.json", "job-a/sessions/s-1/report.html",
            "job-a/sessions/s-2/report.html", "job-a/sessions/s-3/notes.txt", "job-a/sessions/readme.txt",
            "job-a/sessions/s-4/deeper/model.json", "job-b/other/s-5/model.json", "history/date=2026-11-30/a.parquet"]
    assert session_folders(keys) == {"job-a": frozenset({"sessions/s-1", "sessions/s-2"})}
    listing = build_listing(["job-a", "job-b"])
    inventory = build_inventory(listing, {"job-a": [], "job-b": []}, [Entry(key, 1, "v") for key in keys])
    assert [job.session_folders for job in inventory.jobs] == [frozenset({"sessions/s-1", "sessions/s-2"}), frozenset()]


def test_the_inventory_gives_each_jobs_report_sizes(backend: Backend) -> None:
    backend.put("jobs/job-a/rank_0/telemetry.jsonl", b"{}\n")
    backend.put("reports/job-a/model.json", b"x" * 17)
    backend.put("reports/job-a/report.html", b"y" * 5)
    backend.put("reports/job-a/sessions/s-1/model.json", b"z" * 3)
    inventory = backend.storage.take_inventory()
    assert inventory.report_bytes == {"job-a/model.json": 17, "job-a/report.html": 5}
    assert inventory.reported == frozenset({"job-a"})
