"""The S3 storage backend (any S3-compatible endpoint), the only module that imports boto3.

Credentials come from boto3's standard chain. The client is created lazily, once
per storage object, from its own boto3 session (the default session is not safe
to share between threads; the client is). Retries: botocore's "adaptive" mode
with ``max_attempts`` requests in total per call; botocore retries a request, not
the reading of its body, so a GET body that arrives short or fails its checksum is
fetched again here (up to ``max_attempts`` GETs) and partial bytes are never returned.
Conditional writes (``If-None-Match: *``, ``If-Match: <ETag>``) serve leases. The
object is picklable (the client is dropped and rebuilt), so it can cross to Dask workers.

Keys: ``<prefix>/<jobs_prefix>/<job_id>/<key>``, ``/``-separated. An input key with
an empty, ``.`` or ``..`` segment is skipped with a warning: it has no safe
meaning as a relative name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    FlexibleChecksumError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from stormwatch.load.tree import Entry, MemoryTree
from stormwatch.tasks.storage.inventory import Inventory, build_inventory
from stormwatch.tasks.storage.protocol import (
    InputChangedError,
    JobListing,
    JobNotFoundError,
    StorageSettings,
    build_listing,
    check_job_id,
    check_report_key,
    check_size,
    parse_storage_uri,
)

log = logging.getLogger(__name__)

_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})
# A body cut short or damaged after its headers arrived: botocore retries requests, not the reading of
# their bodies, so these are read again here (StreamingBody checks length and checksum; raw urllib3 does not).
_BODY_ERRORS = (ResponseStreamingError, IncompleteReadError, ReadTimeoutError, FlexibleChecksumError)


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def client_config(settings: StorageSettings) -> Config:
    """botocore settings: adaptive retries bounded by ``max_attempts``, timeouts, a pool
    large enough for ``max_concurrency`` parallel reads."""
    return Config(
        retries={"mode": "adaptive", "total_max_attempts": settings.max_attempts},
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        max_pool_connections=max(10, settings.max_concurrency),
    )


class S3Storage:
    """Storage rooted at ``s3://bucket/prefix``.

    ``client``: an S3 client to use instead of building one (which is slow: see bench/README.md,
    cli_bench.py); clients are thread-safe, so storages in one process may share one.
    """

    def __init__(self, settings: StorageSettings, *, client: Any = None) -> None:
        scheme, bucket, prefix = parse_storage_uri(settings.uri)
        if scheme != "s3":
            raise ValueError(f"not an S3 URI: {settings.uri!r}")
        self.settings = settings
        self.bucket = bucket
        self.prefix = prefix
        self._client: Any = client
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, tuple[StorageSettings]]:
        """Pickles as its settings: the copy builds its own client."""
        return S3Storage, (self.settings,)

    @property
    def client(self) -> Any:
        """The boto3 S3 client; ``settings.endpoint_url``, when given, wins over the environment."""
        with self._lock:
            if self._client is None:
                session = boto3.session.Session()
                self._client = session.client(
                    "s3", endpoint_url=self.settings.endpoint_url, config=client_config(self.settings)
                )
            return self._client

    def _key(self, *parts: str) -> str:
        return "/".join(part for part in (self.prefix, *parts) if part)

    def _jobs_base(self) -> str:
        return self._key(*self.settings.jobs_parts) + "/"

    def _uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def list_jobs(self) -> JobListing:
        base = self._jobs_base()
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base, Delimiter="/")
        names = [item["Prefix"][len(base) : -1] for page in pages for item in page.get("CommonPrefixes", ())]
        return build_listing(names)

    def job_entries(self, job_id: str) -> list[Entry]:
        return self._entries_under(self._jobs_base() + check_job_id(job_id) + "/")

    def _objects(self, base: str) -> Iterator[dict[str, Any]]:
        """Every object under ``base``, one paginated listing."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base)
        for page in pages:
            yield from page.get("Contents", ())

    def _input(self, item: Mapping[str, Any], key: str) -> Entry | None:
        """A listed object as an input entry (``key`` relative to its job), None when it is none."""
        if not key or key.endswith("/"):
            return None  # a folder marker, not an input
        if any(part in ("", ".", "..") for part in key.split("/")):
            log.warning("skipping %s: key with an empty or dot segment", self._uri(item["Key"]))
            return None
        return Entry(key, int(item["Size"]), str(item["ETag"]).strip('"'))

    def _entries_under(self, base: str) -> list[Entry]:
        found: list[Entry] = []
        seen_any = False
        for item in self._objects(base):
            seen_any = True
            entry = self._input(item, item["Key"][len(base) :])
            if entry is not None:
                found.append(entry)
        if not seen_any:
            raise JobNotFoundError(f"no objects under {self._uri(base)}")
        return sorted(found, key=lambda entry: entry.key)

    def take_inventory(self) -> Inventory:
        """Two paginated listings, whatever the number of jobs: ``jobs/`` whole, then ``reports/``."""
        base = self._jobs_base()
        names: set[str] = set()
        entries: dict[str, list[Entry]] = {}
        for item in self._objects(base):
            job_id, slash, key = item["Key"][len(base) :].partition("/")
            if not slash:
                continue  # an object directly under jobs/ is no job folder
            names.add(job_id)
            entry = self._input(item, key)
            if entry is not None:
                entries.setdefault(job_id, []).append(entry)
        reports_base = self._key(*self.settings.reports_parts) + "/"
        reports = [Entry(item["Key"][len(reports_base) :], int(item.get("Size", 0)), str(item.get("ETag", "")))
                   for item in self._objects(reports_base)]
        return build_inventory(build_listing(names), entries, reports)

    def _get_bytes(self, key: str, **conditions: str) -> tuple[bytes, str]:
        """An object's whole body and ETag; a body that arrives short or damaged is fetched again,
        up to ``max_attempts`` GETs, then the error is raised (never partial bytes)."""
        for attempt in range(1, self.settings.max_attempts + 1):
            response = self.client.get_object(Bucket=self.bucket, Key=key, **conditions)
            body = response["Body"]  # read through botocore's StreamingBody, never its raw stream
            try:
                data: bytes = body.read()
            except _BODY_ERRORS as error:
                if attempt == self.settings.max_attempts:
                    raise
                log.warning("reading %s again (%d/%d): %s", self._uri(key), attempt, self.settings.max_attempts,
                            type(error).__name__)
                continue
            finally:
                body.close()
            return data, str(response["ETag"]).strip('"')
        raise AssertionError("unreachable: max_attempts >= 1")

    def _get_input(self, base: str, entry: Entry) -> bytes:
        key = base + entry.key
        try:
            data, _ = self._get_bytes(key, IfMatch=f'"{entry.version}"')
        except ClientError as error:
            if _error_code(error) in _MISSING_CODES | {"PreconditionFailed", "412"}:
                raise InputChangedError(f"{self._uri(key)} changed or vanished since it was listed") from error
            raise
        if len(data) != entry.size_bytes:
            raise InputChangedError(f"{self._uri(key)}: read {len(data)} bytes, listed {entry.size_bytes}")
        return data

    def fetch_job(
        self,
        job_id: str,
        *,
        max_bytes: int | None = None,
        max_artifact_bytes: int | None = None,
        entries: Sequence[Entry] | None = None,
    ) -> MemoryTree:
        """Every input read into memory, ``max_concurrency`` at a time, each read pinned to
        the listed ETag so the bytes match the versions the fingerprint is built from.
        An object over ``max_artifact_bytes`` is not downloaded: the tree lists it as
        withheld, with its size, and the loader skips it with a warning. ``entries``: the
        job's objects as already listed (an inventory), else they are listed here."""
        entries = list(entries) if entries is not None else self.job_entries(job_id)
        check_size(job_id, entries, max_bytes)
        return self._read_all(self._jobs_base() + job_id + "/", entries, name=self.job_source(job_id),
                              max_artifact_bytes=max_artifact_bytes)

    def fetch_prefix(
        self, *, max_bytes: int | None = None, max_artifact_bytes: int | None = None
    ) -> tuple[MemoryTree, list[Entry]]:
        """Everything under the storage root's own prefix as one job folder (``stormwatch diagnose s3://…``)."""
        base = self._key() + "/" if self.prefix else ""
        entries = self._entries_under(base)
        check_size(self._uri(self.prefix), entries, max_bytes)
        name = self._uri(self.prefix).rstrip("/")
        return self._read_all(base, entries, name=name, max_artifact_bytes=max_artifact_bytes), entries

    def _read_all(
        self, base: str, entries: list[Entry], *, name: str, max_artifact_bytes: int | None = None
    ) -> MemoryTree:
        cap = max_artifact_bytes
        wanted = [entry for entry in entries if cap is None or entry.size_bytes <= cap]
        withheld = {entry.key: entry.size_bytes for entry in entries if cap is not None and entry.size_bytes > cap}
        workers = max(1, min(self.settings.max_concurrency, len(wanted)))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="s3-fetch")
        try:
            futures = [pool.submit(self._get_input, base, entry) for entry in wanted]
            objects = {entry.key: future.result() for entry, future in zip(wanted, futures, strict=True)}
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        versions = {entry.key: entry.version for entry in entries}
        return MemoryTree(objects, name=name, versions=versions, withheld=withheld)

    def job_source(self, job_id: str) -> str:
        return self._uri(self._key(*self.settings.jobs_parts, check_job_id(job_id)))

    def _report_key(self, key: str) -> str:
        return self._key(*self.settings.reports_parts, *check_report_key(key))

    def read_report(self, key: str) -> bytes | None:
        found = self.read_report_versioned(key)
        return None if found is None else found[0]

    def read_report_versioned(self, key: str) -> tuple[bytes, str] | None:
        """A report object's bytes and ETag (its version), ``None`` when absent."""
        try:
            return self._get_bytes(self._report_key(key))
        except ClientError as error:
            if _error_code(error) in _MISSING_CODES:
                return None
            raise

    def write_report(self, key: str, data: bytes, *, content_type: str) -> None:
        """One PUT: S3 replaces an object atomically."""
        self.client.put_object(Bucket=self.bucket, Key=self._report_key(key), Body=data, ContentType=content_type)

    def _put_if(self, key: str, data: bytes, *, content_type: str, **condition: str) -> str | None:
        try:
            response = self.client.put_object(Bucket=self.bucket, Key=self._report_key(key), Body=data,
                                              ContentType=content_type, **condition)
        except ClientError as error:
            if _error_code(error) in _CONFLICT_CODES | _MISSING_CODES:
                return None
            raise
        return str(response["ETag"]).strip('"')

    def create_report_exclusive(self, key: str, data: bytes, *, content_type: str) -> str | None:
        """PUT with ``If-None-Match: *``: the new ETag, or ``None`` when the object exists."""
        return self._put_if(key, data, content_type=content_type, IfNoneMatch="*")

    def replace_report_if(self, key: str, data: bytes, *, version: str, content_type: str) -> str | None:
        """PUT with ``If-Match: <version>``: the new ETag, or ``None`` when the object changed or is gone."""
        return self._put_if(key, data, content_type=content_type, IfMatch=f'"{version}"')

    def delete_report_if(self, key: str, *, version: str) -> bool:
        """DELETE with ``If-Match: <version>``; ``False`` when the object changed or is gone."""
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._report_key(key), IfMatch=f'"{version}"')
        except ClientError as error:
            if _error_code(error) in _CONFLICT_CODES | _MISSING_CODES:
                return False
            raise
        return True

    def report_uri(self, key: str) -> str:
        return self._uri(self._report_key(key))

    def list_reports(self, prefix: str) -> list[Entry]:
        """One paginated listing of ``<reports>/<prefix>/``; folder markers are left out."""
        base = self._report_key(prefix) + "/"
        reports_base = self._key(*self.settings.reports_parts) + "/"
        found = [
            Entry(item["Key"][len(reports_base) :], int(item["Size"]), str(item["ETag"]).strip('"'))
            for item in self._objects(base)
            if not item["Key"].endswith("/")
        ]
        return sorted(found, key=lambda entry: entry.key)

    def delete_report(self, key: str) -> bool:
        """A HEAD then a DELETE (S3's DELETE succeeds on a missing key); ``False`` when absent."""
        full = self._report_key(key)
        try:
            self.client.head_object(Bucket=self.bucket, Key=full)
        except ClientError as error:
            if _error_code(error) in _MISSING_CODES:
                return False
            raise
        self.client.delete_object(Bucket=self.bucket, Key=full)
        return True

    def sweep_temporaries(self, *, looked: Collection[str] = (), found: Sequence[str] = ()) -> list[str]:
        """Nothing to sweep: a PUT is whole or absent."""
        return []

    def sweep_temporaries_under(self, prefix: str) -> list[str]:
        """Nothing to sweep: a PUT is whole or absent."""
        return []
