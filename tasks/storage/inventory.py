"""One listing of a whole storage root: every job's inputs, and which jobs have their reports.

An audit decides which jobs changed from this alone (a fingerprint per job, compared
with the previous fleet.json), so an unchanged job costs no request of its own. The
backends build it in as few calls as they can: one paginated listing of ``jobs/`` and
one of ``reports/`` on S3, one walk of each folder locally.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from stormwatch.load.tree import Entry
from stormwatch.outputs.model_json import input_fingerprint
from stormwatch.tasks.storage.protocol import JobListing, RefusedJob

#: The report files of a job that an unchanged job must still have to be skipped; a session's too.
MODEL_JSON = "model.json"
REPORT_HTML = "report.html"
REPORT_FILES = (MODEL_JSON, REPORT_HTML)
SESSIONS_FOLDER = "sessions"


@dataclass(frozen=True)
class JobInputs:
    """A job's input objects as listed (keys relative to its folder, sorted); sizes in bytes."""

    job_id: str
    entries: tuple[Entry, ...]
    #: "sessions/<encoded id>" holding its reports, as listed; None: not listed (a local inventory)
    session_folders: frozenset[str] | None = frozenset()

    @property
    def size_bytes(self) -> int:
        return sum(entry.size_bytes for entry in self.entries)

    @cached_property
    def fingerprint(self) -> str:
        """What model.json records as ``input_fingerprint`` for these inputs."""
        return input_fingerprint(self.entries)


@dataclass(frozen=True)
class Inventory:
    """Every job folder found (valid ids sorted, refused ones apart) with its inputs, and the ids
    of the jobs whose reports folder holds every one of :data:`REPORT_FILES`."""

    jobs: tuple[JobInputs, ...]
    refused: tuple[RefusedJob, ...] = ()
    reported: frozenset[str] = field(default_factory=frozenset)
    #: Size in bytes of each job's top-level report file, by report key (``<job_id>/model.json``).
    report_bytes: Mapping[str, int] = field(default_factory=dict)
    #: Temporary files of killed local writes seen in the report folders looked into (report keys).
    temporaries: tuple[str, ...] = ()

    @property
    def job_ids(self) -> frozenset[str]:
        """The jobs whose report folders the inventory looked into."""
        return frozenset(job.job_id for job in self.jobs)

    @property
    def total_bytes(self) -> int:
        return sum(job.size_bytes for job in self.jobs)

    def job(self, job_id: str) -> JobInputs | None:
        return next((job for job in self.jobs if job.job_id == job_id), None)


def build_inventory(listing: JobListing, entries: Mapping[str, Iterable[Entry]],
                    reports: Iterable[Entry], *, sessions_listed: bool = True) -> Inventory:
    """An inventory from a listing, each valid job's entries (a job without any has none) and
    the report objects found (keys relative to the reports prefix: ``<job_id>/model.json``, ...).
    ``sessions_listed=False``: ``reports`` holds no session folder's files, and each job's
    ``session_folders`` is None (unknown) rather than empty."""
    found = list(reports)
    keys = [entry.key for entry in found]
    sessions = session_folders(keys)
    jobs = tuple(
        JobInputs(job_id, tuple(sorted(entries.get(job_id, ()), key=lambda entry: entry.key)),
                  sessions.get(job_id, frozenset()) if sessions_listed else None)
        for job_id in listing.job_ids
    )
    files: dict[str, set[str]] = {}
    for key in keys:
        job_id, _, name = key.partition("/")
        if name in REPORT_FILES:
            files.setdefault(job_id, set()).add(name)
    reported = frozenset(job_id for job_id, names in files.items() if names >= set(REPORT_FILES))
    sizes = {entry.key: entry.size_bytes for entry in found if entry.key.partition("/")[2] in REPORT_FILES}
    temporaries = tuple(key for key in keys if is_temporary(key))
    return Inventory(jobs, listing.refused, reported, sizes, temporaries)


def is_temporary(key: str) -> bool:
    """Whether report ``key`` names a local write's temporary file (``.<name>.<random>.tmp`` next to
    its target: a write killed before its rename leaves it). S3 writes leave none."""
    name = key.rpartition("/")[2]
    return name.startswith(".") and name.endswith(".tmp")


def session_folders(report_keys: Iterable[str]) -> dict[str, frozenset[str]]:
    """Per job id, the session folders (``sessions/<encoded id>``) holding a report file, from report
    keys relative to the reports prefix (``<job_id>/sessions/<encoded id>/model.json``)."""
    found: dict[str, set[str]] = {}
    for key in report_keys:
        parts = key.split("/")
        if len(parts) == 4 and parts[1] == SESSIONS_FOLDER and parts[3] in REPORT_FILES:
            found.setdefault(parts[0], set()).add(f"{SESSIONS_FOLDER}/{parts[2]}")
    return {job_id: frozenset(folders) for job_id, folders in found.items()}
