"""stormlog's own files that are not telemetry, found beside it in a job folder, and left alone.

stormlog 0.4.3 writes, next to its telemetry, files its diagnostics never read. Discovery
(:mod:`stormwatch.load.discover`) takes more files than stormlog's patterns do (every ``*.jsonl``,
on purpose), so without these rules such a file is parsed as telemetry and each of its records
becomes a warning. A file is recognised by its name when the name is stormlog's own, else (the
name is the user's) by a cheap look at its shape:

* inference records (:attr:`NotTelemetry.INFERENCE_RECORDS`): what ``stormlog infer`` writes, at
  any path (``--output inference/infer.jsonl``), and its server telemetry samples: a JSONL file
  whose first record's ``event_type`` starts with ``infer.`` (every stormlog.infer record has one;
  no telemetry event type does). Only the first record is read, within :data:`HEAD_BYTES`.
* run catalogs (:attr:`NotTelemetry.RUN_CATALOG`): ``stormlog_run.json``, the run envelope
  (:mod:`stormwatch.formats.run_catalog`; its session identities are read apart, by
  :func:`run_catalog_identities`), and ``stormlog_attachments.json``, its attachment sidecar; or a
  JSON object whose ``format`` is theirs.
* report envelopes (:attr:`NotTelemetry.REPORT`): ``report.json`` (every command's
  ``stormlog.report`` verdict) and ``diagnostic_summary.json`` (a diagnose bundle's); or a JSON
  object whose ``format`` is ``stormlog.report`` (``--report`` takes any path).

A JSON document is looked at only when it is at most :data:`DOCUMENT_LOOK_BYTES` long (reports and
catalogs are a few KiB; telemetry exports are what grows): a larger one is left to the loader, as is
any file that cannot be read here (the loader reports it).
"""

from __future__ import annotations

import posixpath
from enum import StrEnum

from stormwatch.formats.json_value import parse_json_object
from stormwatch.formats.run_catalog import RUN_CATALOG_FORMAT, RUN_CATALOG_NAME, CatalogIdentity, parse_run_catalog
from stormwatch.load.tree import ArtifactTree, StreamingTree


class NotTelemetry(StrEnum):
    """What a non-telemetry file of stormlog's is."""

    INFERENCE_RECORDS = "inference_records"
    RUN_CATALOG = "run_catalog"
    REPORT = "report"


#: stormlog's own file names (stormlog.run_catalog, stormlog.correlation, stormlog.report,
#: stormlog.diagnose_report).
NAMES = {
    RUN_CATALOG_NAME: NotTelemetry.RUN_CATALOG,
    "stormlog_attachments.json": NotTelemetry.RUN_CATALOG,
    "report.json": NotTelemetry.REPORT,
    "diagnostic_summary.json": NotTelemetry.REPORT,
}
#: The ``format`` member of stormlog's non-telemetry JSON documents.
FORMATS = {
    RUN_CATALOG_FORMAT: NotTelemetry.RUN_CATALOG,
    "stormlog.attachments": NotTelemetry.RUN_CATALOG,
    "stormlog.report": NotTelemetry.REPORT,
}
INFERENCE_EVENT_PREFIX = "infer."
#: Bytes read from the start of a JSONL file to find its first record (a longer one is not looked at).
HEAD_BYTES = 64 * 1024
#: The largest JSON document whose shape is looked at, in bytes (the whole document is parsed).
DOCUMENT_LOOK_BYTES = 1024 * 1024
_BOM = b"\xef\xbb\xbf"


def _head(tree: ArtifactTree, key: str, *, limit_bytes: int) -> bytes | None:
    """At most ``limit_bytes`` bytes from the start of ``key``; None when it cannot be read
    (withheld, gone): the loader says so when it loads the file."""
    try:
        if isinstance(tree, StreamingTree):
            with tree.open(key) as stream:
                return stream.read(limit_bytes)
        return tree.read(key)[:limit_bytes]
    except (OSError, KeyError):
        return None


def _first_record_is_inference(head: bytes) -> bool:
    """Whether the first non-blank line in ``head`` is a whole JSON object with an ``infer.*`` event type."""
    whole = len(head) < HEAD_BYTES  # the file ended within the head
    for line in head.removeprefix(_BOM).splitlines(keepends=True):
        if not line.strip():
            continue
        if not whole and not line.endswith((b"\n", b"\r")):
            return False  # the first record runs past the head: not looked at
        record = parse_json_object(line)
        event_type = record.get("event_type") if record is not None else None
        return isinstance(event_type, str) and event_type.startswith(INFERENCE_EVENT_PREFIX)
    return False


def _document_format(tree: ArtifactTree, key: str, *, size_bytes: int | None) -> NotTelemetry | None:
    if size_bytes is not None and size_bytes > DOCUMENT_LOOK_BYTES:
        return None
    raw = _head(tree, key, limit_bytes=DOCUMENT_LOOK_BYTES + 1)
    if raw is None or len(raw) > DOCUMENT_LOOK_BYTES:
        return None
    raw = raw.removeprefix(_BOM)
    if not raw.lstrip().startswith(b"{"):
        return None  # an array (a tracker's export) or no JSON: telemetry's shapes, not parsed twice
    payload = parse_json_object(raw)
    found = payload.get("format") if payload is not None else None
    return FORMATS.get(found) if isinstance(found, str) else None


def not_telemetry(tree: ArtifactTree, key: str, *, size_bytes: int | None = None) -> NotTelemetry | None:
    """What ``key`` is when it is one of stormlog's non-telemetry files, else None (telemetry, or a
    file not recognised: the loader reads it). ``size_bytes``: the file's size when the caller
    listed it (spares a read of a document too long to look at)."""
    name = posixpath.basename(key)
    named = NAMES.get(name)
    if named is not None:
        return named
    lowered = name.lower()
    if lowered.endswith(".jsonl"):
        head = _head(tree, key, limit_bytes=HEAD_BYTES)
        return NotTelemetry.INFERENCE_RECORDS if head is not None and _first_record_is_inference(head) else None
    if lowered.endswith(".json"):
        return _document_format(tree, key, size_bytes=size_bytes)
    return None


def run_catalog_identities(tree: ArtifactTree) -> tuple[list[CatalogIdentity], list[str]]:
    """The session identities every ``stormlog_run.json`` under the tree states, in key order
    (:func:`~stormwatch.formats.run_catalog.parse_run_catalog`), and a warning naming each catalog
    that states none because it is unreadable or longer than :data:`DOCUMENT_LOOK_BYTES`."""
    found: list[CatalogIdentity] = []
    problems: list[str] = []
    for entry in tree.entries():
        if posixpath.basename(entry.key) != RUN_CATALOG_NAME:
            continue
        where = tree.identity(entry.key)
        if entry.size_bytes > DOCUMENT_LOOK_BYTES:
            problems.append(f"run catalog {where}: over {DOCUMENT_LOOK_BYTES:,} bytes, its session identities not read")
            continue
        raw = _head(tree, entry.key, limit_bytes=DOCUMENT_LOOK_BYTES + 1)
        if raw is None:
            continue  # withheld or gone since listed: no identity, and the loader reads no telemetry there
        try:
            found.extend(parse_run_catalog(raw))
        except ValueError as exc:
            problems.append(f"run catalog {where}: {exc}; its session identities not used")
    return found, problems
