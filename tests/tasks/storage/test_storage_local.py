"""Local-only behaviour: atomic report writes and confinement against symbolic links."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stormwatch.load.file_mappings import MappingPool
from stormwatch.tasks.storage.local import LocalStorage
from stormwatch.tasks.storage.protocol import StorageError, StorageSettings


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "fleet"
    (folder / "jobs" / "job-1").mkdir(parents=True)
    (folder / "jobs" / "job-1" / "events.jsonl").write_bytes(b"{}\n")
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.json").write_bytes(b'{"secret": true}')
    return folder


def storage_at(root: Path) -> LocalStorage:
    return LocalStorage(StorageSettings(uri=str(root)))


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def test_write_leaves_no_temporary_file_and_a_readable_mode(root: Path) -> None:
    storage = storage_at(root)
    storage.write_report("job-1/report.html", b"<p>1</p>", content_type="text/html")
    storage.write_report("job-1/report.html", b"<p>2</p>", content_type="text/html")
    target = root / "reports" / "job-1" / "report.html"
    assert target.read_bytes() == b"<p>2</p>"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert files_under(root / "reports") == {"job-1", "job-1/report.html"}


def test_failed_write_keeps_the_old_bytes_and_cleans_up(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = storage_at(root)
    storage.write_report("index.html", b"old", content_type="text/html")

    def refuse(source: str, target: str) -> None:
        assert Path(source).read_bytes() == b"new"  # the whole new content sat in the temp file
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        storage.write_report("index.html", b"new", content_type="text/html")
    assert (root / "reports" / "index.html").read_bytes() == b"old"
    assert files_under(root / "reports") == {"index.html"}


def test_report_folder_linked_outside_is_refused(root: Path, outside: Path) -> None:
    (root / "reports").mkdir()
    (root / "reports" / "evil").symlink_to(outside, target_is_directory=True)
    storage = storage_at(root)
    before = files_under(outside)
    for key in ("evil/x.html", "evil/sub/x.html"):
        with pytest.raises(StorageError, match="outside the reports folder"):
            storage.write_report(key, b"x", content_type="text/html")
    with pytest.raises(StorageError, match="outside the reports folder"):
        storage.read_report("evil/secret.json")
    assert files_under(outside) == before


def test_reports_folder_linked_outside_the_root_is_refused(root: Path, outside: Path) -> None:
    (root / "reports").symlink_to(outside, target_is_directory=True)
    with pytest.raises(StorageError, match="outside the storage root"):
        storage_at(root).write_report("index.html", b"x", content_type="text/html")
    assert not (outside / "index.html").exists()


def test_job_folder_linked_outside_is_refused(root: Path, outside: Path) -> None:
    (root / "jobs" / "escape").symlink_to(outside, target_is_directory=True)
    (root / "jobs" / "alias").symlink_to(root / "jobs" / "job-1", target_is_directory=True)
    storage = storage_at(root)
    listing = storage.list_jobs()
    assert listing.job_ids == ("alias", "job-1")
    assert [(r.raw_id, r.reason) for r in listing.refused] == [
        ("escape", "is a symbolic link leading outside the jobs folder")
    ]
    with pytest.raises(StorageError, match="outside the jobs folder"):
        storage.fetch_job("escape")


def test_job_inputs_never_leave_the_job_folder(root: Path, outside: Path) -> None:
    job = root / "jobs" / "job-1"
    (job / "stolen.json").symlink_to(outside / "secret.json")
    (job / "linked_dir").symlink_to(outside, target_is_directory=True)
    (job / "inner.jsonl").symlink_to(job / "events.jsonl")  # inside the folder: fine
    os.mkfifo(job / "pipe.jsonl")  # reading it would block forever
    storage = storage_at(root)

    tree = storage.fetch_job("job-1")

    assert [entry.key for entry in tree.entries()] == ["events.jsonl", "inner.jsonl"]
    assert tree.read("inner.jsonl") == b"{}\n"
    with MappingPool() as pool, tree.loan("inner.jsonl", pool) as lent:  # how the loader reads JSONL
        assert lent[:] == b"{}\n"
    assert not tree.exists("stolen.json")
    for read in (tree.read, lambda key: tree.loan(key).__enter__()):
        with pytest.raises(KeyError):
            read("stolen.json")
    (job / "events.jsonl").unlink()
    (job / "events.jsonl").symlink_to(outside / "secret.json")  # swapped after listing
    for read in (tree.read, lambda key: tree.loan(key).__enter__()):
        with pytest.raises(StorageError, match="outside its job folder"):
            read("events.jsonl")


def test_identity_is_the_absolute_path(root: Path) -> None:
    tree = storage_at(root).fetch_job("job-1")
    assert tree.identity("events.jsonl") == str(root.resolve() / "jobs" / "job-1" / "events.jsonl")
    assert tree.root_name == "job-1"


def test_reading_a_report_where_a_folder_is_missing_gives_none(root: Path) -> None:
    storage = storage_at(root)
    assert storage.read_report("job-1/model.json") is None
    storage.write_report("index.html", b"x", content_type="text/html")
    assert storage.read_report("index.html/model.json") is None  # a file where a folder would be
