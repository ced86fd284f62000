"""A cheap look at a storage root before anything heavy starts (Prefect, the engine, an audit).

It answers: is the root there and reachable, is it laid out as ``ROOT/jobs/<job_id>/…``,
which job folders are under ``jobs/`` (the first few), and, for one job, does
``jobs/<job_id>/`` exist. When there is no ``jobs/`` it says what is there instead: folders
holding telemetry directly under the root (the commonest mistake), telemetry files at the root
itself (a job folder given as the root), only ``reports/``, or nothing.

Bounded whatever the root holds: locally at most :data:`MAX_ROOT_ENTRIES` names are read at the
root and under ``jobs/``, at most :data:`MAX_INSPECTED_FOLDERS` folders are looked into, each for
at most :data:`FOLDER_BUDGET` entries, :data:`MAX_DEPTH` levels deep (a count cut short is a lower
bound, :attr:`RootSurvey.count_is_lower_bound`); on S3 at most three ``ListObjectsV2`` requests
of at most 1,000 keys, with short timeouts (:mod:`.probe_s3`). Telemetry is what the loader reads:
``*.jsonl``, ``*.json`` (sink ``manifest.json`` and diagnose bundles included) and ``*.csv``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from stormwatch.tasks.storage.protocol import FLEET_REPORT_KEYS, StorageError, StorageSettings, parse_storage_uri

TELEMETRY_SUFFIXES = (".jsonl", ".json", ".csv")
MAX_ROOT_ENTRIES = 1000  # names read at the root, and under jobs/
MAX_INSPECTED_FOLDERS = 200  # folders at the root looked into for telemetry
FOLDER_BUDGET = 200  # entries looked at inside one such folder
MAX_DEPTH = 3  # levels below a root folder: job/rank_0/attempt-1/telemetry.jsonl
SAMPLE = 5  # names kept for messages


class RootMissingError(StorageError):
    """A local storage root that does not exist or is not a folder (what the user typed is wrong)."""


class StoreUnreachableError(StorageError):
    """A storage that cannot be asked: unreadable folder; S3 without credentials, credentials refused,
    access denied, no such bucket, endpoint unreachable or silent (the environment is wrong)."""


def is_telemetry(name: str) -> bool:
    """Whether a file name is one the loader reads (by suffix, case-insensitive)."""
    return name.lower().endswith(TELEMETRY_SUFFIXES)


@dataclass(frozen=True)
class RootSurvey:
    """What a bounded look at a storage root found.

    ``root``: its display name (an absolute folder, or ``s3://bucket/prefix``), never a secret;
    ``job_ids``: the first :data:`SAMPLE` folder names under ``jobs/`` (sorted, not validated),
    ``job_count``: how many were seen (at most :data:`MAX_ROOT_ENTRIES`; ``more_jobs``: there may be
    more); the ``telemetry_*`` and ``other_names`` fields describe the root when it has no
    ``jobs/`` (empty otherwise); ``job_found``: whether ``jobs/<job_id>/`` exists, ``None`` when no
    job was asked about.
    """

    root: str
    jobs_prefix: str
    has_jobs_folder: bool
    job_ids: tuple[str, ...] = ()
    job_count: int = 0
    more_jobs: bool = False
    telemetry_folders: tuple[str, ...] = ()
    telemetry_folder_count: int = 0
    count_is_lower_bound: bool = False
    telemetry_files: tuple[str, ...] = ()
    other_names: tuple[str, ...] = ()
    has_reports_folder: bool = False
    job_found: bool | None = None
    fleet_files: tuple[str, ...] = ()  # fleet report files (fleet.json, index.html...) at the root itself

    @property
    def jobs(self) -> str:
        """The jobs folder's display name, with a trailing slash."""
        return f"{self.root.rstrip('/')}/{self.jobs_prefix}/"

    def job_path(self, job_id: str) -> str:
        return f"{self.jobs}{job_id}/"

    def found_instead(self) -> str:
        """What the root holds, when it has no ``jobs/`` (one phrase, names shortened)."""
        root = self.root
        if self.fleet_files:  # checked first: a reports folder's job folders hold model.json, which reads as telemetry
            return (f"{root} looks like a reports folder ({shortened(self.fleet_files)}): the storage root is the "
                    f"folder that holds jobs/ and reports/{self._parent_hint()}")
        if self.telemetry_folder_count and root.rstrip("/").rsplit("/", 1)[-1] == self.jobs_prefix.rsplit("/", 1)[-1]:
            return (f"{self.telemetry_folder_count} folders with telemetry directly under {root}, which looks like "
                    f"the jobs folder itself{self._parent_hint()}")
        if self.telemetry_folder_count:
            count = f"{'at least ' if self.count_is_lower_bound else ''}{self.telemetry_folder_count}"
            one = self.telemetry_folder_count == 1 and not self.count_is_lower_bound
            return (f"{count} {'folder' if one else 'folders'} with telemetry directly under {root} "
                    f"({shortened(self.telemetry_folders)}); move {'it' if one else 'them'} into {self.jobs}")
        if self.telemetry_files:
            return (f"telemetry files at {root} itself ({shortened(self.telemetry_files)}): it looks like one job's "
                    f"folder; put it under {self.jobs}<job_id>/, or run `stormwatch diagnose` on it")
        if self.has_reports_folder and not self.other_names:
            return f"{root} holds only reports/"
        if not self.other_names and not self.has_reports_folder:
            return f"{root} is empty"
        return f"{root} holds no telemetry ({shortened(self.other_names)})"

    def _parent_hint(self) -> str:
        """``: pass PARENT as the storage root`` when the root has a parent folder or prefix, else ``""``."""
        head, slash, _ = self.root.rstrip("/").rpartition("/")
        if not slash or head.endswith(":/") or not head:  # s3://bucket, or / itself
            return ""
        return f": pass {head} as the storage root"

    @property
    def is_empty(self) -> bool:
        return not (self.has_jobs_folder or self.has_reports_folder or self.other_names or self.telemetry_files
                    or self.telemetry_folder_count)


def shortened(names: Iterable[str], *, limit: int = SAMPLE) -> str:
    """``a, b, c, …`` with at most ``limit`` names, each cut at 40 characters and shown with ``repr``
    escapes for control characters (names come from storage)."""
    shown = [name if name.isprintable() and len(name) <= 40 else repr(name[:40]) for name in names]
    return ", ".join(shown[:limit]) + (", …" if len(shown) > limit else "")


def without_userinfo(url: str) -> str:
    """``url`` without the ``user:password@`` part of its address (endpoints may carry keys); an
    address that does not parse is shown as its scheme alone."""
    try:
        parts = urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return f"{url.partition(':')[0]}://…"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def survey_root(settings: StorageSettings, *, job_id: str | None = None) -> RootSurvey:
    """The survey of ``settings.uri``; ``job_id`` (already validated): also whether ``jobs/<job_id>/``
    exists. Raises :class:`RootMissingError` or :class:`StoreUnreachableError`."""
    if settings.scheme == "s3":
        from stormwatch.tasks.storage.probe_s3 import survey_s3  # boto3 only for S3 roots

        return survey_s3(settings, job_id=job_id)
    return survey_local(settings, job_id=job_id)


def survey_local(settings: StorageSettings, *, job_id: str | None = None) -> RootSurvey:
    _, location, _ = parse_storage_uri(settings.uri)
    try:
        root = Path(location).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # no home for ~user, a symbolic link loop
        raise RootMissingError(f"storage root {location} cannot be resolved: {exc}") from exc
    if not root.exists():
        raise RootMissingError(f"storage root {root} does not exist")
    if not root.is_dir():
        raise RootMissingError(f"storage root {root} is not a folder")
    jobs = root.joinpath(*settings.jobs_parts)
    try:
        if jobs.is_dir():
            folders, complete = _names(jobs, folders_only=True)
            return RootSurvey(root=str(root), jobs_prefix=settings.jobs_prefix, has_jobs_folder=True,
                              job_ids=tuple(sorted(folders)[:SAMPLE]), job_count=len(folders),
                              more_jobs=not complete,
                              job_found=None if job_id is None else (jobs / job_id).is_dir())
        return _describe_local(root, settings)
    except OSError as exc:  # PermissionError, a folder vanishing while read...
        raise StoreUnreachableError(f"cannot read storage root {root}: {exc.strerror or type(exc).__name__}") from exc


def _names(folder: Path, *, folders_only: bool) -> tuple[list[str], bool]:
    """Up to :data:`MAX_ROOT_ENTRIES` entry names of ``folder`` (sub-folders only if asked), and whether
    that is all of them."""
    names: list[str] = []
    with os.scandir(folder) as entries:
        for seen, entry in enumerate(entries, start=1):
            if seen > MAX_ROOT_ENTRIES:
                return names, False
            if not folders_only or entry.is_dir():
                names.append(entry.name + ("/" if not folders_only and entry.is_dir() else ""))
    return names, True


def _describe_local(root: Path, settings: StorageSettings) -> RootSurvey:
    names, complete = _names(root, folders_only=False)
    reports = settings.reports_parts[0] + "/"
    folders = sorted(name for name in names if name.endswith("/") and name != reports)
    files = sorted(name for name in names if not name.endswith("/"))
    inspected = folders[:MAX_INSPECTED_FOLDERS]
    with_telemetry = [name.rstrip("/") for name in inspected if _holds_telemetry(root / name)]
    telemetry_files = [name for name in files if is_telemetry(name)]
    return RootSurvey(root=str(root), jobs_prefix=settings.jobs_prefix, has_jobs_folder=False,
                      telemetry_folders=tuple(with_telemetry[:SAMPLE]), telemetry_folder_count=len(with_telemetry),
                      count_is_lower_bound=bool(with_telemetry) and (not complete or len(folders) > len(inspected)),
                      telemetry_files=tuple(telemetry_files[:SAMPLE]),
                      other_names=tuple(name for name in [*folders, *files] if name.rstrip("/") not in with_telemetry
                                        and name not in telemetry_files)[:SAMPLE * 2],
                      has_reports_folder=reports in names, fleet_files=fleet_files(files))


def fleet_files(names: Iterable[str]) -> tuple[str, ...]:
    """The fleet report files among ``names`` (sorted): what a reports folder holds at its top."""
    return tuple(sorted(name for name in names if name in FLEET_REPORT_KEYS))


def _holds_telemetry(folder: Path) -> bool:
    """Whether a telemetry file lies within :data:`MAX_DEPTH` levels of ``folder``, looking at no more
    than :data:`FOLDER_BUDGET` entries (breadth first, symbolic links not followed)."""
    budget = FOLDER_BUDGET
    level = [folder]
    for _ in range(MAX_DEPTH + 1):
        below: list[Path] = []
        for current in level:
            try:
                with os.scandir(current) as entries:
                    for entry in entries:
                        budget -= 1
                        if budget < 0:
                            return False
                        if entry.is_file(follow_symlinks=False) and is_telemetry(entry.name):
                            return True
                        if entry.is_dir(follow_symlinks=False):
                            below.append(Path(entry.path))
            except OSError:
                continue  # unreadable: no evidence either way
        level = below
    return False
