"""Leases: at most one audit at a time writes a storage root's reports and sends its notifications.

A lease is a small JSON object ``reports/.locks/<name>.json`` (owner, token,
acquired_at, expires_at; times ISO 8601 UTC) managed with the storage's conditional
operations only:

- acquire: create it exclusively (S3 ``If-None-Match: *``; locally a hard link of a
  complete temporary file); if it exists and has expired (or is not a lease document),
  replace it only if it is still the version read (S3 ``If-Match: <ETag>``; locally a
  compare-and-replace under a folder lock); a live lease is respected;
- renew: replace it if it is still the version this holder wrote, with a new expiry;
  any other version means the lease was lost (:class:`LeaseLostError`);
- release: delete it if it is still that version (never someone else's).

Every write is checked by reading the object back: a write whose answer was lost
and retried (the retry then fails its precondition) is recognised by its bytes, which
carry a fresh random token, and a store whose conditional writes are not atomic under
concurrency (moto's server checks, then writes) cannot leave two holders who both saw
their own bytes unless one stalls between check and write for a whole round trip of the other.
Expiry uses each host's clock: keep ``ttl_s`` far above the clock skew between hosts.

A lease lives :data:`DEFAULT_TTL_S` (two minutes) and its holder renews it every third of that
while it runs, so a killed holder's lease ends within two minutes; a holder that stops making
progress stops renewing (:meth:`Lease.kept_alive`'s ``stall_s``: the audit's is twice its job
timeout), so a hung one's lease ends within ``stall_s`` plus two minutes. Sooner when the holder is
known to be gone: a lease whose ``host`` is this host and whose ``pid`` is no longer running is
taken over at once (:func:`holder_gone`); ``stormwatch audit --break-lease`` also ends one
that is not renewed while it watches (:mod:`stormwatch.tasks.storage.lease_break`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import orjson

from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.storage.job_ids import segment_problem
from stormwatch.tasks.storage.protocol import LOCKS_FOLDER, Storage

log = logging.getLogger(__name__)

AUDIT_LEASE = "audit"


def job_lease(job_id: str) -> str:
    """The lease a post-job holds on its one job (named by a digest: any job id, any length)."""
    return f"job-{hashlib.sha256(job_id.encode('utf-8', 'surrogatepass')).hexdigest()[:20]}"
DEFAULT_TTL_S = 120.0  # a killed holder blocks the next audit at most this long
_ROUNDS = 3  # create / take-over attempts before acquire gives up on a contended lease

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class LeaseLostError(RuntimeError):
    """The lease object is no longer the version this holder wrote: another owner may act now."""


def lease_key(name: str) -> str:
    """The report key of lease ``name`` (a safe path segment)."""
    problem = segment_problem(name)
    if problem is not None:
        raise ValueError(f"lease name {name!r} {problem}")
    return f"{LOCKS_FOLDER}/{name}.json"


def default_owner(label: str) -> str:
    """Who holds a lease, for people reading it: ``<label> on <host> pid <pid>``."""
    return f"{label} on {this_host()} pid {os.getpid()}"


def this_host() -> str:
    return socket.gethostname()


def pid_running(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one we may not signal still exists)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, kw_only=True)
class LeaseRecord:
    """The lease document; ``token`` is random per acquisition, times are timezone-aware UTC.
    ``host`` and ``pid`` say where the holder runs (None in leases written before they were
    recorded); ``renewed_at`` is the holder's last renewal (its acquisition at first)."""

    owner: str
    token: str
    acquired_at: datetime
    expires_at: datetime
    host: str | None = None
    pid: int | None = None
    renewed_at: datetime | None = None

    def to_bytes(self) -> bytes:
        document: dict[str, object] = {"owner": self.owner, "token": self.token,
                                       "acquired_at": self.acquired_at.isoformat(),
                                       "expires_at": self.expires_at.isoformat()}
        if self.host is not None:
            document["host"] = self.host
        if self.pid is not None:
            document["pid"] = self.pid
        if self.renewed_at is not None:
            document["renewed_at"] = self.renewed_at.isoformat()
        return orjson.dumps(document)

    @classmethod
    def from_bytes(cls, data: bytes) -> LeaseRecord | None:
        """The record, or ``None`` when ``data`` is not a lease document (then it counts as expired)."""
        try:
            document = orjson.loads(data)
            renewed = document.get("renewed_at")
            pid = document.get("pid")
            record = cls(owner=str(document["owner"]), token=str(document["token"]),
                         acquired_at=datetime.fromisoformat(document["acquired_at"]),
                         expires_at=datetime.fromisoformat(document["expires_at"]),
                         host=None if document.get("host") is None else str(document["host"]),
                         pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
                         renewed_at=None if renewed is None else datetime.fromisoformat(renewed))
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            return None
        stamps = (record.expires_at, record.acquired_at, record.renewed_at or record.acquired_at)
        if any(stamp.tzinfo is None for stamp in stamps):
            return None
        return record

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at

    def describe(self) -> str:
        return f"{self.owner} until {self.expires_at.astimezone(UTC).isoformat(timespec='seconds')}"


def holder_gone(record: LeaseRecord, *, host: str | None = None) -> bool:
    """Whether the holder is known to have ended: it ran on this host (``host``, default this
    host's name) and its process is no longer running. Another host's holder is never known gone."""
    here = this_host() if host is None else host
    return record.host == here and record.pid is not None and record.pid != os.getpid() and not pid_running(record.pid)


class Lease:
    """A lease held: renew it before its expiry (or keep it alive from a thread), release it at the end."""

    def __init__(self, storage: Storage, key: str, record: LeaseRecord, version: str, *, ttl_s: float,
                 clock: Clock = utc_now) -> None:
        self.storage, self.key, self.ttl_s = storage, key, ttl_s
        self._record, self._version = record, version
        self._clock = clock
        self._lock = threading.Lock()
        self._released = False

    @property
    def record(self) -> LeaseRecord:
        return self._record

    def renew(self) -> None:
        """Push the expiry to now + ``ttl_s``; raises :class:`LeaseLostError` if the lease is not ours
        any more (storage errors propagate: the lease stays valid until its expiry)."""
        with self._lock:
            if self._released:
                raise LeaseLostError(f"lease {self.key} was released")
            now = self._clock()
            renewed = replace(self._record, expires_at=now + timedelta(seconds=self.ttl_s), renewed_at=now)
            body = renewed.to_bytes()
            written = self.storage.replace_report_if(self.key, body, version=self._version, content_type=MediaType.JSON)
            version = _confirmed(self.storage, self.key, body, written)
            if version is None:
                raise LeaseLostError(f"lease {self.key} is no longer held by {self._record.owner}")
            self._record, self._version = renewed, version

    def release(self) -> bool:
        """Delete the lease object if it is still ours; never raises (an unreleased lease expires)."""
        with self._lock:
            if self._released:
                return False
            self._released = True
            try:
                deleted = self.storage.delete_report_if(self.key, version=self._version)
            except Exception as exc:  # the lease then ends at its expiry
                log.warning("lease %s not released (%s: %s); it expires at %s", self.key, type(exc).__name__,
                            exc, self._record.expires_at.isoformat())
                return False
        if not deleted:
            log.warning("lease %s was no longer ours at release", self.key)
        return deleted

    @contextmanager
    def kept_alive(self, *, every_s: float | None = None, idle_s: Callable[[], float] | None = None,
                   stall_s: float | None = None) -> Iterator[Lease]:
        """Renew from a daemon thread every ``every_s`` seconds (default ``ttl_s / 3``) inside the block.
        A failed renewal is logged and tried again next time; a lost lease stops the thread (the
        holder's next :meth:`renew` raises). With ``idle_s`` (seconds since the holder last made
        progress) and ``stall_s``, a holder idle longer than ``stall_s`` is not renewed, so a hung
        holder loses its lease within ``stall_s + ttl_s`` seconds; renewals resume if it moves again
        before the lease is taken."""
        interval = every_s if every_s is not None else self.ttl_s / 3
        stop = threading.Event()
        stalled = False

        def keep() -> None:
            nonlocal stalled
            while not stop.wait(interval):
                idle = 0.0 if idle_s is None or stall_s is None else idle_s()
                if stall_s is not None and idle > stall_s:
                    if not stalled:
                        log.error("lease %s not renewed: no progress for %.0f s (more than %g s); it expires at "
                                  "%s", self.key, idle, stall_s, self._record.expires_at.isoformat())
                    stalled = True
                    continue
                stalled = False
                try:
                    self.renew()
                except LeaseLostError as exc:
                    log.error("%s", exc)
                    return
                except Exception as exc:  # a storage hiccup: the lease is still valid until its expiry
                    log.warning("lease %s not renewed this time: %s: %s", self.key, type(exc).__name__, exc)

        thread = threading.Thread(target=keep, name=f"lease-{self.key}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()


def _confirmed(storage: Storage, key: str, body: bytes, version: str | None) -> str | None:
    """The version of our ``body`` if it is what the object now holds, else ``None``. A ``None``
    answer may hide our own write (its answer lost, the retry refused): the bytes tell."""
    current = storage.read_report_versioned(key)
    if current is None or current[0] != body:
        return None
    if version is not None and version != current[1]:
        log.warning("lease %s: version %s written, %s read back", key, version, current[1])
    return current[1]


def holder(storage: Storage, *, name: str = AUDIT_LEASE) -> LeaseRecord | None:
    """The current lease record (live or expired), ``None`` when there is none or it is unreadable."""
    current = storage.read_report_versioned(lease_key(name))
    return None if current is None else LeaseRecord.from_bytes(current[0])


def acquire(storage: Storage, *, name: str = AUDIT_LEASE, ttl_s: float = DEFAULT_TTL_S, owner: str | None = None,
            clock: Clock = utc_now) -> Lease | None:
    """The lease ``name`` for ``ttl_s`` seconds, or ``None`` when another owner holds it and it has not expired."""
    if ttl_s <= 0:
        raise ValueError(f"ttl_s must be positive, got {ttl_s}")
    key = lease_key(name)
    for _ in range(_ROUNDS):
        now = clock()
        record = LeaseRecord(owner=owner or default_owner(name), token=uuid.uuid4().hex, acquired_at=now,
                             expires_at=now + timedelta(seconds=ttl_s), host=this_host(), pid=os.getpid(),
                             renewed_at=now)
        body = record.to_bytes()
        version = storage.create_report_exclusive(key, body, content_type=MediaType.JSON)
        if version is None:
            current = storage.read_report_versioned(key)
            if current is None:
                continue  # released in between: create again
            if current[0] != body:
                found = LeaseRecord.from_bytes(current[0])
                if found is not None and not found.expired(now) and not holder_gone(found):
                    return None
                log.warning("taking over lease %s: %s", key, _why_free(found, now))
                version = storage.replace_report_if(key, body, version=current[1], content_type=MediaType.JSON)
        version = _confirmed(storage, key, body, version)
        if version is not None:
            return Lease(storage, key, record, version, ttl_s=ttl_s, clock=clock)
    return None


def _why_free(found: LeaseRecord | None, now: datetime) -> str:
    if found is None:
        return "not a lease document"
    if found.expired(now):
        return f"expired ({found.describe()})"
    return f"its holder {found.owner} is no longer running"


def acquire_waiting(storage: Storage, *, name: str = AUDIT_LEASE, ttl_s: float = DEFAULT_TTL_S,
                    owner: str | None = None, wait_s: float = 60.0, poll_s: float = 2.0, clock: Clock = utc_now,
                    sleep: Callable[[float], None] = time.sleep) -> Lease | None:
    """:func:`acquire`, polled every ``poll_s`` seconds for up to ``wait_s`` seconds (monotonic), then ``None``."""
    deadline = time.monotonic() + wait_s
    while True:
        lease = acquire(storage, name=name, ttl_s=ttl_s, owner=owner, clock=clock)
        remaining = deadline - time.monotonic()
        if lease is not None or remaining <= 0:
            return lease
        sleep(min(poll_s, remaining))
