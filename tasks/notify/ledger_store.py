"""The ledger in storage: ``notifications.jsonl`` and the segments writers without the audit lease append.

Every writer appends: its new lines become a segment object of its own,
``reports/.ledger/<UTC stamp>-<token>.jsonl``, created exclusively, so no writer ever replaces
another's lines (notify steps take turns under the notify lease; stamps follow that order). A
reader sees ``notifications.jsonl`` followed by every segment, in key order (stamp order).

The audit's segment (``<stamp>-audit-<token>.jsonl``) also carries the post-jobs' segments it
read, which it then deletes: segments stay one a night, and a night writes what that night
decided. The audit whose segment would be the :data:`FOLD_AFTER_NIGHTS`th folds everything
into ``notifications.jsonl`` (about once a month at one audit a night; a repaired ledger at once).
A kill between writing and deleting leaves lines twice, which read the same (a line is a
decision; the newest per alert wins).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.storage.protocol import LEDGER_FOLDER, NOTIFICATIONS_KEY, Storage

#: Audit segments stored before an audit folds the ledger into notifications.jsonl.
FOLD_AFTER_NIGHTS = 30
_AUDIT_MARK = "-audit-"


@dataclass(frozen=True)
class LedgerRead:
    """The ledger as one byte string (file, then segments), the segment keys it holds and the bytes
    of ``data`` that notifications.jsonl gave (the segments' lines follow them)."""

    data: bytes | None
    segments: tuple[str, ...] = ()
    ends: tuple[int, ...] = ()  # where each segment's lines end in ``data``
    base_bytes: int = 0

    @property
    def audit_segments(self) -> int:
        return sum(_AUDIT_MARK in key for key in self.segments)

    def lines_of(self, keys: tuple[str, ...]) -> bytes:
        """The lines ``data`` holds from the segments ``keys`` (of :attr:`segments`), in order."""
        data, wanted = self.data or b"", set(keys)
        if not wanted:
            return b""
        starts = (self.base_bytes, *self.ends[:-1])
        return b"".join(data[start:end] for key, start, end in zip(self.segments, starts, self.ends, strict=True)
                        if key in wanted)


def read_ledger_bytes(storage: Storage) -> LedgerRead:
    base = storage.read_report(NOTIFICATIONS_KEY)
    keys = sorted(entry.key for entry in storage.list_reports(LEDGER_FOLDER) if entry.key.endswith(".jsonl"))
    first = base or b""
    parts = [first if first.endswith(b"\n") or not first else first + b"\n"]
    kept: list[str] = []
    ends: list[int] = []
    size = len(parts[0])
    for key in keys:
        data = storage.read_report(key)
        if data is None:
            continue  # folded since the listing: notifications.jsonl holds it now
        parts.append(data if data.endswith(b"\n") or not data else data + b"\n")
        size += len(parts[-1])
        kept.append(key)
        ends.append(size)
    if base is None and not kept:
        return LedgerRead(None)
    if not kept:
        return LedgerRead(base, base_bytes=len(first))
    return LedgerRead(b"".join(parts), tuple(kept), tuple(ends), len(parts[0]))


def segment_key(now: datetime, *, audit: bool = False) -> str:
    mark = _AUDIT_MARK if audit else "-"
    return f"{LEDGER_FOLDER}/{now.astimezone(UTC):%Y%m%dT%H%M%S%fZ}{mark}{secrets.token_hex(4)}.jsonl"


def _delete(storage: Storage, keys: tuple[str, ...]) -> None:
    for key in keys:
        storage.delete_report(key)


def write_ledger(storage: Storage, ledger: bytes, *, read: LedgerRead, whole: bool, now: datetime,
                 fold: bool = False) -> None:
    """Record ``ledger`` (what was read with new lines after it). A post-job (not ``whole``): its new
    lines as a segment of its own. The audit (``whole``): the post-jobs' segments it read and its new
    lines as its night's segment, those segments deleted; or, with ``fold`` (a repaired ledger) or
    its segment the :data:`FOLD_AFTER_NIGHTS`th, all of it as notifications.jsonl, every segment
    read deleted."""
    old = read.data or b""
    fresh = ledger[len(old):] if ledger.startswith(old) else ledger
    if not whole:
        if fresh:
            storage.create_report_exclusive(segment_key(now), fresh, content_type=MediaType.NDJSON)
        return
    if fold or read.audit_segments + 1 >= FOLD_AFTER_NIGHTS or not ledger.startswith(old):
        storage.write_report(NOTIFICATIONS_KEY, ledger, content_type=MediaType.NDJSON)
        _delete(storage, read.segments)
        return
    if not read.segments and read.data is None:  # the first ledger: a file, not a segment
        if fresh:
            storage.write_report(NOTIFICATIONS_KEY, fresh, content_type=MediaType.NDJSON)
        return
    post_jobs = tuple(key for key in read.segments if _AUDIT_MARK not in key)
    if not fresh and not post_jobs:
        return
    storage.create_report_exclusive(segment_key(now, audit=True), read.lines_of(post_jobs) + fresh,
                                    content_type=MediaType.NDJSON)
    _delete(storage, post_jobs)
