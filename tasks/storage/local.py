"""The local-folder storage backend (the embedded default).

Confinement: the root is resolved once; the jobs and reports folders, every job
folder, every input file and every report path are resolved again when used and
must stay inside their folder (so inside the root), whatever symbolic links say.
Report writes are atomic: a temporary file in the target's folder, flushed and
fsynced, then ``os.replace``; a reader sees the old bytes or the new, never a mix.
Conditional writes (for leases): a report's version is a digest of its bytes; an
exclusive create hard-links a complete temporary file into place (``os.link`` fails
when the name exists, so no reader ever sees a partial object); compare-and-replace
and compare-and-delete hold an exclusive ``flock`` on the report's folder while they
compare and act (released by the kernel if the process dies).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import mmap
import os
import stat
import tempfile
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import BinaryIO

from stormwatch.load.file_mappings import MappingPool, lend_file
from stormwatch.load.tree import Entry
from stormwatch.tasks.storage.inventory import Inventory, build_inventory, is_temporary
from stormwatch.tasks.storage.protocol import (
    JobListing,
    JobNotFoundError,
    StorageError,
    StorageSettings,
    build_listing,
    check_job_id,
    check_report_key,
    check_size,
    parse_storage_uri,
)

log = logging.getLogger(__name__)

_REPORT_MODE = 0o644


def content_version(data: bytes) -> str:
    """A local report's version: the first 32 hex digits of the SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()[:32]


@contextmanager
def _folder_locked(folder: Path) -> Iterator[None]:
    """An exclusive advisory lock on a folder, between processes and between threads (one open file each)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _inside(path: Path, boundary: Path) -> bool:
    """Whether ``path``, fully resolved, is ``boundary`` (already resolved) or below it."""
    return path.resolve().is_relative_to(boundary)


class LocalJobTree:
    """A job folder as an artifact tree, read lazily, limited to the entries listed at fetch time.

    ``identity(key)`` is the absolute path ``root/key`` (as :class:`stormwatch.load.tree.LocalTree`
    gives, so ids derived from it equal stormlog's); reads re-check confinement.
    """

    def __init__(self, root: Path, entries: Sequence[Entry]) -> None:
        self.root = root
        self._entries = list(entries)
        self._keys = frozenset(entry.key for entry in self._entries)

    @property
    def root_name(self) -> str:
        return self.root.name

    def entries(self) -> Sequence[Entry]:
        return self._entries

    def _path(self, key: str) -> Path:
        if key not in self._keys:
            raise KeyError(key)
        path = self.root / key
        if not _inside(path, self.root):
            raise StorageError(f"input {path} now resolves outside its job folder")
        return path

    def read(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def open(self, key: str) -> BinaryIO:
        """The input as a buffered binary stream (big JSONL is parsed from it in chunks)."""
        return self._path(key).open("rb")

    def loan(self, key: str, pool: MappingPool | None = None) -> AbstractContextManager[bytes | mmap.mmap]:
        """The input's bytes for a ``with`` block, in a mapping lent by ``pool`` (see
        :mod:`stormwatch.load.file_mappings`): what the loader reads JSONL from, so that a fleet
        audit's worker threads do not keep each file's buffer in their heaps."""
        return lend_file(self._path(key), pool)

    def exists(self, key: str) -> bool:
        return key in self._keys

    def identity(self, key: str) -> str:
        return str(self.root / key) if key else str(self.root)


class LocalStorage:
    """Storage rooted at a local folder, which must exist."""

    def __init__(self, settings: StorageSettings) -> None:
        scheme, location, _ = parse_storage_uri(settings.uri)
        if scheme != "file":
            raise ValueError(f"not a local storage URI: {settings.uri!r}")
        resolved = Path(location).expanduser().resolve()
        if not resolved.is_dir():
            raise StorageError(f"storage root is not a folder: {resolved}")
        self.settings = settings
        self.root = resolved
        self.jobs_dir = resolved.joinpath(*settings.jobs_parts)
        self.reports_dir = resolved.joinpath(*settings.reports_parts)

    def _real(self, folder: Path, what: str) -> Path:
        real = folder.resolve()
        if not real.is_relative_to(self.root):
            raise StorageError(f"{what} folder {folder} resolves outside the storage root {self.root}")
        return real

    def list_jobs(self) -> JobListing:
        return self._list_jobs()[0]

    def _list_jobs(self) -> tuple[JobListing, frozenset[str]]:
        """The listing, and the job folders that are symbolic links (as the listing's scandir says)."""
        if not self.jobs_dir.is_dir():
            return JobListing((), ()), frozenset()
        jobs_real = self._real(self.jobs_dir, "jobs")
        names: list[str] = []
        linked: set[str] = set()
        refusals: dict[str, str] = {}
        with os.scandir(jobs_real) as found:
            for entry in found:
                if not entry.is_dir():
                    continue
                names.append(entry.name)
                if entry.is_symlink():
                    linked.add(entry.name)
                    if not _inside(Path(entry.path), jobs_real):
                        refusals[entry.name] = "is a symbolic link leading outside the jobs folder"
        return build_listing(names, refusals), frozenset(linked)

    def _job_dir(self, job_id: str) -> Path:
        check_job_id(job_id)
        jobs_real = self._real(self.jobs_dir, "jobs")
        job_dir = (jobs_real / job_id).resolve()
        if not job_dir.is_relative_to(jobs_real):
            raise StorageError(f"job folder {jobs_real / job_id} resolves outside the jobs folder")
        if not job_dir.is_dir():
            raise JobNotFoundError(f"no job folder {jobs_real / job_id}")
        return job_dir

    def job_entries(self, job_id: str) -> list[Entry]:
        return self._entries(self._job_dir(job_id))

    @staticmethod
    def _entries(job_dir: Path) -> list[Entry]:
        """Every regular file below ``job_dir`` (symbolic links to files inside it followed, links
        leading outside skipped with a warning, linked folders not entered), sorted by key. One
        ``scandir`` per folder, whose entries answer the type checks (bench/README.md, inventory)."""
        found: list[Entry] = []
        folders = [(str(job_dir), "")]
        while folders:
            folder, prefix = folders.pop()
            try:
                with os.scandir(folder) as listed:
                    items = list(listed)
            except OSError:
                continue
            for item in items:
                if item.is_dir(follow_symlinks=False):
                    folders.append((item.path, f"{prefix}{item.name}/"))
                    continue
                if item.is_symlink():
                    if item.is_dir():
                        continue  # a linked folder is never entered
                    if not _inside(Path(item.path), job_dir):
                        log.warning("skipping %s: symbolic link leading outside the job folder", item.path)
                        continue
                try:
                    info = item.stat()
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):  # never a FIFO, socket or device
                    found.append(Entry(f"{prefix}{item.name}", info.st_size, str(info.st_mtime_ns)))
        return sorted(found, key=lambda entry: entry.key)

    def take_inventory(self) -> Inventory:
        """One walk of the jobs folder (each job's files and stats) and one look into each
        reports folder."""
        listing, linked = self._list_jobs()
        entries: dict[str, list[Entry]] = {}
        jobs_real = self._real(self.jobs_dir, "jobs") if listing.job_ids else self.jobs_dir
        for job_id in listing.job_ids:
            try:  # a plain folder in the resolved jobs folder is its own real path; a link is resolved
                entries[job_id] = self._entries(self._job_dir(job_id) if job_id in linked else jobs_real / job_id)
            except StorageError:
                continue  # gone (or moved outside) since it was listed: it fails alone when fetched
        # session folders are not looked into: a job diagnosed again lists its own (tasks/audit_job.py);
        # two scandirs a job fewer (bench/README.md, "Unchanged audit")
        return build_inventory(listing, entries, self._report_keys(listing.job_ids), sessions_listed=False)

    def _report_keys(self, job_ids: Sequence[str]) -> list[Entry]:
        """The report files directly in each job's report folder (``<job>/model.json``, ...)."""
        keys: list[Entry] = []
        for job_id in job_ids:
            keys += self._scan(job_id)
        return keys

    def _scan(self, folder: str) -> list[Entry]:
        """The files (key, size, mtime) directly in ``reports/<folder>`` (none when it does not exist)."""
        files: list[Entry] = []
        try:
            with os.scandir(self.reports_dir / folder) as found:
                for item in found:
                    if item.is_file(follow_symlinks=False):
                        info = item.stat(follow_symlinks=False)
                        files.append(Entry(f"{folder}/{item.name}", info.st_size, str(info.st_mtime_ns)))
        except OSError:
            pass  # no reports yet
        return files

    def fetch_job(
        self,
        job_id: str,
        *,
        max_bytes: int | None = None,
        max_artifact_bytes: int | None = None,
        entries: Sequence[Entry] | None = None,
    ) -> LocalJobTree:
        """The job's folder as a lazy tree; ``max_artifact_bytes`` needs no work here, since the
        loader stats each file before reading it. ``entries``: the job's files as already listed
        (an inventory), else they are listed here."""
        job_dir = self._job_dir(job_id)
        listed = list(entries) if entries is not None else self._entries(job_dir)
        check_size(job_id, listed, max_bytes)
        return LocalJobTree(job_dir, listed)

    def job_source(self, job_id: str) -> str:
        """The job folder's absolute path (the fetched tree's identity resolves symbolic links)."""
        return str(self.jobs_dir / check_job_id(job_id))

    def _report_path(self, key: str) -> Path:
        return self.reports_dir.joinpath(*check_report_key(key))

    def read_report(self, key: str) -> bytes | None:
        path = self._report_path(key)
        if not self.reports_dir.is_dir():
            return None
        reports_real = self._real(self.reports_dir, "reports")
        if not _inside(path, reports_real):
            raise StorageError(f"report {path} resolves outside the reports folder")
        try:
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _report_folder(self, parts: Sequence[str]) -> Path:
        """The resolved folder for a report key's parent segments, created one level at a
        time and checked before each step, so no folder is ever made outside ``reports/``."""
        self.reports_dir.mkdir(parents=True, exist_ok=True)
        reports_real = self._real(self.reports_dir, "reports")
        folder = reports_real
        for part in parts:
            candidate = folder / part
            if not candidate.exists() and not candidate.is_symlink():
                candidate.mkdir(exist_ok=True)
            folder = candidate.resolve()
            if not folder.is_relative_to(reports_real):
                raise StorageError(f"report folder {candidate} resolves outside the reports folder")
        return folder

    def _temporary(self, folder: Path, name: str, data: bytes) -> str:
        """A complete, fsynced temporary copy of ``data`` next to ``name``; removed if writing fails."""
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, _REPORT_MODE)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return temp

    def write_report(self, key: str, data: bytes, *, content_type: str) -> None:
        """Atomic replace of ``reports/<key>``; ``content_type`` has no local meaning."""
        parts = check_report_key(key)
        folder = self._report_folder(parts[:-1])
        temp = self._temporary(folder, parts[-1], data)
        try:
            os.replace(temp, folder / parts[-1])
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def read_report_versioned(self, key: str) -> tuple[bytes, str] | None:
        """A report's bytes and version (:func:`content_version`), ``None`` when absent."""
        data = self.read_report(key)
        return None if data is None else (data, content_version(data))

    def create_report_exclusive(self, key: str, data: bytes, *, content_type: str) -> str | None:
        """Create ``reports/<key>`` whole unless it exists: its version, or ``None`` when it existed."""
        parts = check_report_key(key)
        folder = self._report_folder(parts[:-1])
        temp = self._temporary(folder, parts[-1], data)
        try:
            os.link(temp, folder / parts[-1])
        except FileExistsError:
            return None
        finally:
            Path(temp).unlink(missing_ok=True)
        return content_version(data)

    def replace_report_if(self, key: str, data: bytes, *, version: str, content_type: str) -> str | None:
        """Replace ``reports/<key>`` whole if its version is ``version``: the new version, else ``None``."""
        parts = check_report_key(key)
        folder = self._report_folder(parts[:-1])
        with _folder_locked(folder):
            current = self.read_report_versioned(key)
            if current is None or current[1] != version:
                return None
            self.write_report(key, data, content_type=content_type)
        return content_version(data)

    def delete_report_if(self, key: str, *, version: str) -> bool:
        """Remove ``reports/<key>`` if its version is ``version``; ``False`` when it changed or is gone."""
        parts = check_report_key(key)
        folder = self._report_folder(parts[:-1])
        with _folder_locked(folder):
            current = self.read_report_versioned(key)
            if current is None or current[1] != version:
                return False
            (folder / parts[-1]).unlink()
        return True

    def report_uri(self, key: str) -> str:
        return self._report_path(key).as_uri()

    def _existing_folder(self, prefix: str) -> tuple[Path, Path] | None:
        """The resolved reports folder and ``reports/<prefix>/`` in it; None when either is missing
        or the prefix resolves outside the reports folder."""
        parts = check_report_key(prefix)
        if not self.reports_dir.is_dir():
            return None
        reports_real = self._real(self.reports_dir, "reports")
        base = reports_real.joinpath(*parts)
        if not base.is_dir() or not _inside(base, reports_real):
            return None
        return reports_real, base

    def list_reports(self, prefix: str) -> list[Entry]:
        """Regular files below ``reports/<prefix>/``, sorted by key; a write's temporary file
        (``.<name>.*.tmp``) and anything resolving outside the reports folder are left out."""
        folders = self._existing_folder(prefix)
        if folders is None:
            return []
        reports_real, base = folders
        found: list[Entry] = []
        for folder, dirs, files in os.walk(base):
            dirs.sort()
            for name in files:
                if name.startswith(".") and name.endswith(".tmp"):
                    continue  # a write in progress (or one that died)
                path = Path(folder) / name
                if path.is_symlink() and not _inside(path, reports_real):
                    continue
                try:
                    info = path.stat()
                except OSError:
                    continue  # gone since the walk saw it
                if stat.S_ISREG(info.st_mode):
                    key = path.relative_to(reports_real).as_posix()
                    found.append(Entry(key, info.st_size, str(info.st_mtime_ns)))
        return sorted(found, key=lambda entry: entry.key)

    def sweep_temporaries(self, *, looked: Collection[str] = (), found: Sequence[str] = ()) -> list[str]:
        """Unlink the ``.<name>.*.tmp`` files of writes killed before their rename: ``found``, and those
        below the reports folder outside the job folders ``looked`` (skipped: the inventory's scan
        saw their files: bench/README.md, inventory_bench.py); their report paths, sorted."""
        if not self.reports_dir.is_dir():
            return []
        reports_real = self._real(self.reports_dir, "reports")
        removed = [key for key in found if is_temporary(key) and self._unlink_temporary(reports_real, key)]
        skipped = set(looked)
        for folder, dirs, files in os.walk(reports_real):
            if Path(folder) == reports_real:
                dirs[:] = [name for name in dirs if name not in skipped]
            for name in files:
                key = (Path(folder) / name).relative_to(reports_real).as_posix()
                if is_temporary(key) and self._unlink_temporary(reports_real, key):
                    removed.append(key)
        return sorted(removed)

    def sweep_temporaries_under(self, prefix: str) -> list[str]:
        """Unlink the ``.<name>.*.tmp`` files below ``reports/<prefix>/``; their report paths, sorted."""
        folders = self._existing_folder(prefix)
        if folders is None:
            return []
        reports_real, base = folders
        removed = []
        for folder, _, files in os.walk(base):
            for name in files:
                key = (Path(folder) / name).relative_to(reports_real).as_posix()
                if is_temporary(key) and self._unlink_temporary(reports_real, key):
                    removed.append(key)
        return sorted(removed)

    @staticmethod
    def _unlink_temporary(reports_real: Path, key: str) -> bool:
        path = reports_real / key
        if path.is_symlink() or not path.is_file():
            return False
        path.unlink(missing_ok=True)
        return True

    def delete_report(self, key: str) -> bool:
        """Unlink ``reports/<key>``; ``False`` when it was not there."""
        path = self._report_path(key)
        if not self.reports_dir.is_dir():
            return False
        if not _inside(path.parent, self._real(self.reports_dir, "reports")):
            raise StorageError(f"report {path} resolves outside the reports folder")
        try:
            path.unlink()
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True
