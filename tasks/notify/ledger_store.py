"""The ledger in storage: ``notifications.jsonl`` and the segments writers without the audit lease append.

A post-job does not hold the audit lease, so two of them (or one and the audit) may decide at once.
Each writes only its new lines, as a segment object of its own,
``reports/.ledger/<UTC stamp>-<token>.jsonl``, created exclusively: no writer ever replaces
another's lines. A reader sees ``notifications.jsonl`` followed by every segment, in key order
(stamp order). The audit, holding its lease, folds the segments it read into
``notifications.jsonl`` and deletes them; a kill in between leaves lines both in the file and in a
segment, which read the same twice (a line is a decision; the newest per alert wins).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.storage.protocol import LEDGER_FOLDER, NOTIFICATIONS_KEY, Storage


@dataclass(frozen=True)
class LedgerRead:
    """The ledger as one byte string (file, then segments) and the segment keys it holds."""

    data: bytes | None
    segments: tuple[str, ...] = ()


def read_ledger_bytes(storage: Storage) -> LedgerRead:
    base = storage.read_report(NOTIFICATIONS_KEY)
    keys = sorted(entry.key for entry in storage.list_reports(LEDGER_FOLDER) if entry.key.endswith(".jsonl"))
    parts = [base or b""]
    kept = []
    for key in keys:
        data = storage.read_report(key)
        if data is None:
            continue  # folded since the listing: notifications.jsonl holds it now
        parts.append(data if data.endswith(b"\n") or not data else data + b"\n")
        kept.append(key)
    if base is None and not kept:
        return LedgerRead(None)
    joined = parts[0] if parts[0].endswith(b"\n") or not parts[0] else parts[0] + b"\n"
    return LedgerRead(joined + b"".join(parts[1:]) if kept else base, tuple(kept))


def segment_key(now: datetime) -> str:
    return f"{LEDGER_FOLDER}/{now.astimezone(UTC):%Y%m%dT%H%M%S%fZ}-{secrets.token_hex(4)}.jsonl"


def write_ledger(storage: Storage, ledger: bytes, *, read: LedgerRead, whole: bool, now: datetime) -> None:
    """Record ``ledger`` (what was read with new lines after it). ``whole`` (the audit lease's holder):
    rewrite notifications.jsonl with everything and delete the segments folded in; else append the
    new lines as a segment of this writer's own."""
    if whole:
        storage.write_report(NOTIFICATIONS_KEY, ledger, content_type=MediaType.NDJSON)
        for key in read.segments:
            storage.delete_report(key)
        return
    old = read.data or b""
    fresh = ledger[len(old):] if ledger.startswith(old) else ledger
    if fresh:
        storage.create_report_exclusive(segment_key(now), fresh, content_type=MediaType.NDJSON)
