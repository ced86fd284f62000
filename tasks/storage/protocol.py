"""The pipeline's storage: one root holding job inputs and reports, a local folder or an S3 prefix.

Layout under the root (prefixes configurable, see :class:`StorageSettings`)::

    <jobs_prefix>/<job_id>/**            inputs, never modified by stormwatch
    <reports_prefix>/<job_id>/model.json
    <reports_prefix>/<job_id>/report.html
    <reports_prefix>/index.html, fleet.json, fleet.parquet, notifications.jsonl
    <reports_prefix>/.locks/<name>.json  leases (see stormwatch.tasks.storage.lease)

Report keys given to :class:`Storage` are relative to the reports prefix
(``"job-1/model.json"``, ``"index.html"``), so a caller cannot name anything
outside it; every segment must be a safe path segment
(:func:`stormwatch.tasks.storage.job_ids.segment_problem`). Job ids are validated the same way
and must not collide with the fleet report file names. This module is settings,
rules and the interface; the backends live in :mod:`.local` and :mod:`.s3`, and
:mod:`.open` picks one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, Protocol
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from stormwatch.history.schema import HISTORY_FOLDER
from stormwatch.load.tree import ArtifactTree, Entry
from stormwatch.tasks.storage.job_ids import InvalidJobIdError, segment_problem

if TYPE_CHECKING:  # inventory builds on this module's listing types
    from stormwatch.tasks.storage.inventory import Inventory

INDEX_HTML_KEY = "index.html"
FLEET_JSON_KEY = "fleet.json"
FLEET_PARQUET_KEY = "fleet.parquet"
NOTIFICATIONS_KEY = "notifications.jsonl"
METRICS_KEY = "metrics.prom"  # the fleet as OpenMetrics text (stormwatch.tasks.metrics)
ALERTS_KEY = "alerts.json"  # the alert state (stormwatch.tasks.notify.step)
ROUTES_KEY = "routes.toml"  # notification routes kept in storage (stormwatch.tasks.notify.config_store)
SILENCES_KEY = "silences.json"  # silences (stormwatch silence add/list/expire)
SILENCES_BACKUP_KEY = "silences.last-good.json"  # the last silences.json that read (config_store)
FLEET_STATE_FOLDER = "_fleet"  # reports/_fleet/runs/date=D/<fold>.parquet: the runs (stormwatch.outputs.fleet_runs)
DAMAGED_FOLDER = "damaged"  # reports/damaged/<key>.<UTC stamp>: damaged state files, kept for people
#: Names at the top of the report folder that are no job's: a job id equal to one is refused.
FLEET_REPORT_KEYS = frozenset({INDEX_HTML_KEY, FLEET_JSON_KEY, FLEET_PARQUET_KEY, NOTIFICATIONS_KEY,
                               ALERTS_KEY, ROUTES_KEY, SILENCES_KEY, SILENCES_BACKUP_KEY, HISTORY_FOLDER, METRICS_KEY,
                               DAMAGED_FOLDER})
LOCKS_FOLDER = ".locks"  # reports/.locks/<name>.json: leases (stormwatch.tasks.storage.lease), never a job id
LEDGER_FOLDER = ".ledger"  # reports/.ledger/<stamp>-<token>.jsonl: ledger lines of writers without the audit lease
#: reports/.ledger-archive/<stamp>-<token>.jsonl: the ledger lines a fold moved out (stormwatch.alerting.ledger_carry)
LEDGER_ARCHIVE_FOLDER = ".ledger-archive"
COMMITS_FOLDER = ".commits"  # reports/.commits/<batch>.parquet: jobs done, not yet in fleet.json (tasks.commits)

StorageScheme = Literal["file", "s3"]


class StorageError(RuntimeError):
    """A storage operation that cannot proceed (missing job, unsafe path, changed input...)."""


class JobNotFoundError(StorageError):
    """No folder (or no object) under ``jobs/<job_id>/``."""


class JobTooLargeError(StorageError):
    """A job's inputs add up to more than the ``max_bytes`` the caller allows."""


class InputChangedError(StorageError):
    """An input object changed or vanished between listing and reading."""


class ReportKeyError(ValueError):
    """A report key that would leave the reports prefix or is not made of safe segments."""


def _segments(path: str, *, what: str) -> tuple[str, ...]:
    parts = tuple(path.split("/"))
    for part in parts:
        problem = segment_problem(part)
        if problem is not None:
            raise ValueError(f"{what} {path!r}: segment {part!r} {problem}")
    return parts


@dataclass(frozen=True)
class StorageSettings:
    """Where and how to reach the storage root; built once at the edge (CLI, flow parameters).

    ``uri``: a local path (``./fleet``), ``file:///abs/path`` or ``s3://bucket/prefix``.
    ``endpoint_url``: S3-compatible endpoint; when ``None`` boto3's own resolution applies
    (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, config file), an explicit one wins.
    ``max_concurrency``: parallel object reads per fetch; ``max_attempts``: total S3 requests
    per call (first try included), adaptive retry mode; timeouts in seconds.
    """

    uri: str
    endpoint_url: str | None = None
    jobs_prefix: str = "jobs"
    reports_prefix: str = "reports"
    max_concurrency: int = 8
    max_attempts: int = 5
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        jobs = _segments(self.jobs_prefix, what="jobs_prefix")
        reports = _segments(self.reports_prefix, what="reports_prefix")
        shorter = min(len(jobs), len(reports))
        if jobs[:shorter] == reports[:shorter]:
            raise ValueError(f"jobs_prefix {self.jobs_prefix!r} and reports_prefix {self.reports_prefix!r} overlap")
        if not 1 <= self.max_concurrency <= 64:
            raise ValueError(f"max_concurrency must be within 1..64, got {self.max_concurrency}")
        if not 1 <= self.max_attempts <= 20:
            raise ValueError(f"max_attempts must be within 1..20, got {self.max_attempts}")
        if self.connect_timeout_s <= 0 or self.read_timeout_s <= 0:
            raise ValueError("timeouts must be positive")
        parse_storage_uri(self.uri)

    @property
    def scheme(self) -> StorageScheme:
        return parse_storage_uri(self.uri)[0]

    @property
    def jobs_parts(self) -> tuple[str, ...]:
        return tuple(self.jobs_prefix.split("/"))

    @property
    def reports_parts(self) -> tuple[str, ...]:
        return tuple(self.reports_prefix.split("/"))


def parse_storage_uri(uri: str) -> tuple[StorageScheme, str, str]:
    """``(scheme, location, prefix)``: ``("file", path, "")`` or ``("s3", bucket, prefix)``.

    The local path is returned as given (expanded and resolved only when opened).
    """
    if not uri or not uri.strip():
        raise ValueError("storage URI is empty")
    if "://" not in uri:
        return "file", uri, ""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file URI with a remote host is not supported: {uri!r}")
        return "file", url2pathname(unquote(parts.path)), ""
    if parts.scheme == "s3":
        bucket, prefix = parts.netloc, parts.path.strip("/")
        if not bucket:
            raise ValueError(f"S3 URI without a bucket: {uri!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"S3 URI with a query or fragment: {uri!r}")
        if prefix:
            _segments(prefix, what="S3 prefix")
        return "s3", bucket, prefix
    raise ValueError(f"unsupported storage URI scheme {parts.scheme!r} (use a path, file:// or s3://)")


def job_problem(raw: str) -> str | None:
    """Why ``raw`` cannot be a job id here (engine rules plus reserved report names), or ``None``."""
    problem = segment_problem(raw)
    if problem is None and raw in FLEET_REPORT_KEYS:
        problem = "collides with a fleet report file name"
    elif problem is None and raw == LOCKS_FOLDER:
        problem = "collides with the reports' lease folder name"
    elif problem is None and raw == COMMITS_FOLDER:
        problem = "collides with the reports' commit folder name"
    elif problem is None and raw in (LEDGER_FOLDER, LEDGER_ARCHIVE_FOLDER):
        problem = "collides with the reports' ledger folder names"
    elif problem is None and raw == FLEET_STATE_FOLDER:
        problem = "collides with the reports' runs folder name"
    return problem


def check_job_id(raw: str) -> str:
    """``raw`` when it is a usable job id; raises :class:`~stormwatch.tasks.storage.job_ids.InvalidJobIdError`."""
    problem = job_problem(raw)
    if problem is not None:
        raise InvalidJobIdError(raw, problem)
    return raw


def check_report_key(key: str) -> tuple[str, ...]:
    """The segments of a report key (relative to the reports prefix); raises :class:`ReportKeyError`."""
    if not isinstance(key, str) or not key:
        raise ReportKeyError(f"report key must be a non-empty string, got {key!r}")
    parts = tuple(key.split("/"))
    for part in parts:
        problem = segment_problem(part)
        if problem is not None:
            raise ReportKeyError(f"report key {key!r} is refused: segment {part[:60]!r} {problem}")
    return parts


def damaged_key(key: str, when: datetime) -> str:
    """Where a damaged report object ``key`` is kept: ``damaged/<key>.<YYYYMMDDTHHMMSSZ>``."""
    return f"{DAMAGED_FOLDER}/{key}.{when.astimezone(UTC):%Y%m%dT%H%M%SZ}"


def model_json_key(job_id: str) -> str:
    return f"{check_job_id(job_id)}/model.json"


def report_html_key(job_id: str) -> str:
    return f"{check_job_id(job_id)}/report.html"


@dataclass(frozen=True)
class RefusedJob:
    """A folder under ``jobs/`` that is not processed: its raw name and why. Nothing is written for it."""

    raw_id: str
    reason: str


@dataclass(frozen=True)
class JobListing:
    """The job folders found: valid ids (sorted) and refused ones (sorted by raw name)."""

    job_ids: tuple[str, ...]
    refused: tuple[RefusedJob, ...]


def build_listing(names: Iterable[str], refusals: Mapping[str, str] | None = None) -> JobListing:
    """Sort folder names into valid ids and refusals; ``refusals`` are backend-specific reasons
    (a symbolic link leaving the root, say) that take precedence."""
    refusals = refusals or {}
    valid: set[str] = set()
    refused: dict[str, str] = {}
    for name in names:
        reason = refusals.get(name) or job_problem(name)
        if reason is None:
            valid.add(name)
        else:
            refused[name] = reason
    return JobListing(tuple(sorted(valid)), tuple(RefusedJob(n, r) for n, r in sorted(refused.items())))


def check_size(job_id: str, entries: Sequence[Entry], max_bytes: int | None) -> None:
    """Raise :class:`JobTooLargeError` when the entries add up to more than ``max_bytes``."""
    if max_bytes is None:
        return
    total = sum(entry.size_bytes for entry in entries)
    if total > max_bytes:
        raise JobTooLargeError(f"job {job_id!r} holds {total} bytes in {len(entries)} objects, over {max_bytes}")


class Storage(Protocol):
    """The storage root as the pipeline sees it. Implementations: LocalStorage, S3Storage."""

    settings: StorageSettings

    def list_jobs(self) -> JobListing:
        """Folders (common prefixes) directly under the jobs prefix, validated."""
        ...

    def job_entries(self, job_id: str) -> list[Entry]:
        """Every input object of a job, key relative to its folder, sorted; version = ETag or mtime_ns."""
        ...

    def take_inventory(self) -> Inventory:
        """Every job with its entries, and which jobs have their reports, in as few requests as
        the backend can (see :mod:`.inventory`)."""
        ...

    def fetch_job(
        self,
        job_id: str,
        *,
        max_bytes: int | None = None,
        max_artifact_bytes: int | None = None,
        entries: Sequence[Entry] | None = None,
    ) -> ArtifactTree:
        """The job's inputs as an artifact tree; identity(key) is an absolute path or s3:// URI.
        ``entries``: the job's objects as already listed (they are listed again when None)."""
        ...

    def job_source(self, job_id: str) -> str:
        """The job folder's absolute name (what the tree's ``identity("")`` gives)."""
        ...

    def read_report(self, key: str) -> bytes | None:
        """A report object's bytes, ``None`` when absent."""
        ...

    def write_report(self, key: str, data: bytes, *, content_type: str) -> None:
        """Replace a report object whole (readers see the old or the new bytes, never a mix)."""
        ...

    # Conditional operations (leases). A version is an opaque string: the ETag on S3, a digest
    # of the bytes locally. Each is atomic with respect to the others on the same key.

    def read_report_versioned(self, key: str) -> tuple[bytes, str] | None:
        """A report object's bytes and version, ``None`` when absent."""
        ...

    def create_report_exclusive(self, key: str, data: bytes, *, content_type: str) -> str | None:
        """Create a report object whole unless one exists: its version, or ``None`` when it existed."""
        ...

    def replace_report_if(self, key: str, data: bytes, *, version: str, content_type: str) -> str | None:
        """Replace a report object whole if its version is ``version``: the new version, else ``None``."""
        ...

    def delete_report_if(self, key: str, *, version: str) -> bool:
        """Remove a report object if its version is ``version``; ``False`` when it changed or is gone."""
        ...

    def report_uri(self, key: str) -> str:
        """An absolute link to a report object (``file://`` or ``s3://``)."""
        ...

    def list_reports(self, prefix: str) -> list[Entry]:
        """Every report object below the report folder ``prefix`` (``"history"``), at any depth, sorted
        by key; keys relative to the reports prefix (``"history/date=2026-11-30/a.parquet"``), size in
        bytes, version the ETag or mtime_ns. One paginated listing on S3; empty when nothing is there."""
        ...

    def delete_report(self, key: str) -> bool:
        """Remove a report object; ``False`` when it was not there."""
        ...

    def sweep_temporaries(self, *, looked: Collection[str] = (), found: Sequence[str] = ()) -> list[str]:
        """Remove the temporary files of writes that died (locally ``.<name>.*.tmp``; S3 writes leave
        none); the report paths removed. ``found``: those the inventory saw in the report folders of
        the jobs ``looked`` (which are then not walked again: a night costs no second walk of every
        job's reports); every other folder is walked. Only the audit lease's holder may call it: any
        other writer's file in progress would be taken for a dead one."""
        ...

    def sweep_temporaries_under(self, prefix: str) -> list[str]:
        """Remove the temporary files of writes that died below ``reports/<prefix>/`` (a job's
        ``sessions/`` folder, which a local inventory does not look into); the report paths removed.
        The audit lease's holder only, as :meth:`sweep_temporaries`."""
        ...
