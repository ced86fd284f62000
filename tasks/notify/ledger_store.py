"""The ledger in storage: ``notifications.jsonl`` (carried), the segments of post-jobs, the archives.

A post-job (a writer without the audit lease) appends its new lines as a segment of its own,
``reports/.ledger/<UTC stamp>-<token>.jsonl``, created exclusively, so no writer ever replaces
another's lines (notify steps take turns under the notify lease; stamps follow that order).

Every audit folds (:func:`write_ledger`): the lines no archive holds yet (the post-jobs' segments it
read and its own new lines; the whole file once, when it was written before folds carried) go to
``reports/.ledger-archive/<UTC stamp>-<token>.jsonl``, created exclusively; then ``notifications.jsonl``
is rewritten as the newest line of each alert behind a ``carried`` line naming that archive
(:mod:`stormwatch.alerting.ledger_carry`); then the segments read are deleted. So a notify step reads
a file that grows with alerts, not with runs, plus the post-jobs' segments since the last audit; the
archives, which keep every decision for people, are never read again.

A reader sees ``notifications.jsonl``, then, in stamp order, every segment and every archive newer
than the one the carried line names: an audit killed after writing its archive and before rewriting
the file left it, and its lines (the claims of its sends among them) count. A kill between the
rewrite and the deletes leaves segment lines that the file carries too, which read the same (a
line is a decision; the newest per alert wins); they are archived again by the next fold.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from stormwatch.alerting.ledger import read_ledger
from stormwatch.alerting.ledger_carry import carried_archive, carried_header, carried_ledger
from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.storage.protocol import LEDGER_ARCHIVE_FOLDER, LEDGER_FOLDER, NOTIFICATIONS_KEY, Storage


@dataclass(frozen=True)
class LedgerRead:
    """The ledger as one byte string (file, then segments and unfolded archives in stamp order), the
    keys of those parts, and the bytes of ``data`` that notifications.jsonl gave (the parts follow)."""

    data: bytes | None
    segments: tuple[str, ...] = ()  # segments and unfolded archives, in the order their lines follow
    ends: tuple[int, ...] = ()  # where each part's lines end in ``data``
    base_bytes: int = 0
    #: notifications.jsonl is carried: each of its lines is in an archive already.
    carried: bool = False

    @property
    def archives(self) -> tuple[str, ...]:
        """The unfolded archives read (those a killed fold left): their lines are archived already."""
        return tuple(key for key in self.segments if key.startswith(f"{LEDGER_ARCHIVE_FOLDER}/"))

    def lines_of(self, keys: tuple[str, ...]) -> bytes:
        """The lines ``data`` holds from the parts ``keys`` (of :attr:`segments`), in order."""
        data, wanted = self.data or b"", set(keys)
        if not wanted:
            return b""
        starts = (self.base_bytes, *self.ends[:-1])
        return b"".join(data[start:end] for key, start, end in zip(self.segments, starts, self.ends, strict=True)
                        if key in wanted)


def _name(key: str) -> str:
    return key.rpartition("/")[2]  # "<stamp>-...": segments and archives sort together by stamp


def _unfolded_archives(storage: Storage, base: bytes | None) -> list[str]:
    """Archives newer than the one ``base`` names (all of them when there is no file: it was lost, or
    the first fold was killed before writing it); none for a file written before folds carried."""
    if base is not None and not carried_header(base):
        return []
    last = carried_archive(base) or ""
    return [entry.key for entry in storage.list_reports(LEDGER_ARCHIVE_FOLDER)
            if entry.key.endswith(".jsonl") and _name(entry.key) > _name(last)]


def read_ledger_bytes(storage: Storage) -> LedgerRead:
    base = storage.read_report(NOTIFICATIONS_KEY)
    segments = [entry.key for entry in storage.list_reports(LEDGER_FOLDER) if entry.key.endswith(".jsonl")]
    keys = sorted([*segments, *_unfolded_archives(storage, base)], key=_name)
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
    carried = bool(carried_header(base))
    if base is None and not kept:
        return LedgerRead(None)
    if not kept:
        return LedgerRead(base, base_bytes=len(first), carried=carried)
    return LedgerRead(b"".join(parts), tuple(kept), tuple(ends), len(parts[0]), carried)


def _stamped(folder: str) -> str:
    """A new part's key, stamped with the wall clock (not the audit's ``--as-of`` time): the order
    the parts were written in, which is the order their lines are read in."""
    return f"{folder}/{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}-{secrets.token_hex(4)}.jsonl"


def write_ledger(storage: Storage, ledger: bytes, *, read: LedgerRead, whole: bool, now: datetime,
                 fold: bool = False) -> None:
    """Record ``ledger`` (what was read with new lines after it). A post-job (not ``whole``): its new
    lines as a segment of its own. The audit (``whole``): a fold (module docstring); ``fold``: the
    file read was repaired (rewritten), so it is archived whole."""
    old = read.data or b""
    appended = ledger.startswith(old)
    fresh = ledger[len(old):] if appended else ledger
    if not whole:
        if fresh:
            storage.create_report_exclusive(_stamped(LEDGER_FOLDER), fresh, content_type=MediaType.NDJSON)
        return
    if not appended or fold:
        moved = ledger  # rewritten: archived whole (lines an archive holds already read the same twice)
    else:
        own = tuple(key for key in read.segments if key not in read.archives)
        moved = (b"" if read.carried else old[:read.base_bytes]) + read.lines_of(own) + fresh
    if not moved and not read.segments:
        return  # nothing new since the last fold
    archive = read.archives[-1] if read.archives else carried_archive(old[:read.base_bytes]) or ""
    if moved:
        archive = _stamped(LEDGER_ARCHIVE_FOLDER)
        storage.create_report_exclusive(archive, moved, content_type=MediaType.NDJSON)
    carried = carried_ledger(read_ledger(ledger), stamp=now.astimezone(UTC).isoformat(), archive_key=archive)
    storage.write_report(NOTIFICATIONS_KEY, carried, content_type=MediaType.NDJSON)
    for key in read.segments:
        if key not in read.archives:
            storage.delete_report(key)
