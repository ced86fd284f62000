"""The mutation fuzzer's mutations: small named functions, each damaging one artifact.

Byte-level damage (truncation, flipped bytes, encodings, line endings, blobs) and
tree-level damage (manifests listing missing or escaping segments, pruned
segments) live here; record-level damage (fields dropped or retyped, NaN, huge
integers, deep nesting, duplicate keys) in :mod:`tests.fuzz.record_mutations`.
:data:`MUTATIONS` holds them all, by name (see :mod:`tests.fuzz.kinds`).
"""

from __future__ import annotations

import json
import posixpath
from random import Random

from tests.builders import make_record
from tests.fuzz import record_mutations  # noqa: F401 - registers the record-level mutations
from tests.fuzz.corpus import Fmt
from tests.fuzz.kinds import (
    ALL,
    BOM,
    JSONISH,
    MUTATIONS,
    Mutated,
    Target,
    all_gone,
    has_line,
    kept_before,
    mutation,
    record_count,
)

__all__ = ["MUTATIONS", "ESCAPED_SESSION_ID", "Mutated", "Target", "record_count", "ALL"]
ESCAPED_SESSION_ID = "fuzz-escaped"  # the session of a segment placed outside the job's root
_NOT_UTF8 = (b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80", b"\xc0\xaf")
_SEGMENT_NAMES = ("segment-424242.jsonl", "../segment-000001.jsonl", "../../../outside/segment-000001.jsonl",
                  "/etc/passwd", "", ".", "..", "nested/segment-000001.jsonl", "segment-000001.jsonl/..", 42, None)


# --- bytes ----------------------------------------------------------------------------------

@mutation("truncate")
def truncate(target: Target, rng: Random) -> Mutated | None:
    if not target.data:
        return None
    cut = rng.randrange(len(target.data))
    destroyed = record_count(target.fmt, target.data) - kept_before(target.fmt, target.data, cut)
    return Mutated(target.data[:cut], f"cut at byte {cut} of {len(target.data)}", destroyed=destroyed,
                   must_warn=target.fmt in (Fmt.JSON, Fmt.TIMELINE))


@mutation("flip_bytes")
def flip_bytes(target: Target, rng: Random) -> Mutated | None:
    if not target.data:
        return None
    data = bytearray(target.data)
    spots = sorted(rng.sample(range(len(data)), min(len(data), rng.randint(1, 8))))
    for spot in spots:
        data[spot] ^= rng.randint(1, 255)
    return Mutated(bytes(data), f"xor at bytes {spots}")


@mutation("non_utf8")
def non_utf8(target: Target, rng: Random) -> Mutated | None:
    bad = rng.choice(_NOT_UTF8)
    quotes = [i + 1 for i, byte in enumerate(target.data) if byte == ord('"')] or [0]
    spot = rng.choice(quotes)  # just inside a string, usually
    return Mutated(target.data[:spot] + bad + target.data[spot:], f"{bad!r} at byte {spot}")


@mutation("bom")
def bom(target: Target, rng: Random) -> Mutated | None:
    where = rng.choice(["prefix", "prefix", "double", "line"])
    if where == "prefix":
        return Mutated(BOM + target.data, "BOM prefix", lossless=True)
    if where == "double":
        return Mutated(BOM + BOM + target.data, "two BOMs")
    lines = target.data.split(b"\n")
    index = rng.randrange(len(lines))
    lines[index] = BOM + lines[index]
    return Mutated(b"\n".join(lines), f"BOM at the start of line {index + 1}")


@mutation("line_endings")
def line_endings(target: Target, rng: Random) -> Mutated | None:
    lf = target.data.replace(b"\r\n", b"\n")
    style = rng.choice(["crlf", "crlf", "lf", "cr"])
    if style == "lf":
        return Mutated(lf, "LF line endings", lossless=True)
    if style == "crlf":
        return Mutated(lf.replace(b"\n", b"\r\n"), "CRLF line endings", lossless=True)
    # JSON and CSV readers take a lone CR as a line break; JSONL has no line left but a torn one.
    return Mutated(lf.replace(b"\n", b"\r"), "CR-only line endings", lossless=target.fmt is not Fmt.JSONL)


@mutation("empty")
def empty(target: Target, rng: Random) -> Mutated | None:
    return all_gone(target, b"", "empty file", must_warn=target.fmt in (Fmt.JSON, Fmt.TIMELINE))


@mutation("nul_bytes")
def nul_bytes(target: Target, rng: Random) -> Mutated | None:
    spot = rng.randrange(len(target.data) + 1)
    run = b"\x00" * rng.choice([1, 1, 4, 64])
    if rng.random() < 0.25:
        return Mutated(target.data[:spot] + run, f"{len(run)} NUL bytes replace the tail from byte {spot}",
                       destroyed=record_count(target.fmt, target.data) - kept_before(target.fmt, target.data, spot))
    return Mutated(target.data[:spot] + run + target.data[spot:], f"{len(run)} NUL bytes at byte {spot}")


@mutation("binary_blob", JSONISH | {Fmt.CSV})
def binary_blob(target: Target, rng: Random) -> Mutated | None:
    blob = rng.randbytes(rng.randint(64, 4096))
    if target.fmt is Fmt.MANIFEST or rng.random() < 0.5:
        folder = posixpath.dirname(target.key)
        name = rng.choice(["blob.jsonl", "segment-999999.jsonl", "dump.jsonl"])
        key = f"{folder}/{name}" if folder else name
        return Mutated(target.data, f"{len(blob)} random bytes added as {key}", extra={key: blob})
    must_warn = target.fmt in (Fmt.JSON, Fmt.TIMELINE) or (target.fmt is Fmt.JSONL and has_line(blob))
    return all_gone(target, blob, f"replaced by {len(blob)} random bytes", must_warn=must_warn)


@mutation("top_level_scalar", JSONISH)
def top_level_scalar(target: Target, rng: Random) -> Mutated | None:
    text = rng.choice([b"42", b'"telemetry"', b"null", b"3.5", b"true", b"-1e400", b"18446744073709551616"])
    data = text + rng.choice([b"", b"\n"])
    return all_gone(target, data, f"top level is {data!r}", must_warn=target.fmt is not Fmt.MANIFEST)


# --- trees ----------------------------------------------------------------------------------

@mutation("manifest_segments", frozenset({Fmt.MANIFEST}))
def manifest_segments(target: Target, rng: Random) -> Mutated | None:
    """A manifest listing missing, escaping (``../``), absolute or odd segment names; the
    escaping one exists beside the root (temp folders), holding a session nothing may load."""
    doc = json.loads(target.data)
    chosen = rng.sample(_SEGMENT_NAMES, rng.randint(1, 4))
    entries = [{"filename": name, "event_count": 1, "closed": True, "session_id": "fuzz-missing"} for name in chosen]
    listed = doc.get("segments") if isinstance(doc.get("segments"), list) else doc.get("files")
    if rng.random() < 0.3 and isinstance(listed, list) and listed:
        listed.pop(rng.randrange(len(listed)))  # a real segment no longer listed
    key = "segments" if "segments" in doc or "files" not in doc else "files"
    doc[key] = [*(doc.get(key) or []), *(entries if key == "segments" else chosen)]
    record = json.dumps(make_record(session_id=ESCAPED_SESSION_ID), sort_keys=True)  # valid: it would load
    return Mutated(json.dumps(doc, indent=2).encode(), f"{key} += {chosen}",
                   outside={"outside/segment-000001.jsonl": record.encode() + b"\n"})


@mutation("pruned_segment", frozenset({Fmt.MANIFEST}))
def pruned_segment(target: Target, rng: Random) -> Mutated | None:
    """A segment the manifest lists is gone (retention, or a lost object)."""
    doc = json.loads(target.data)
    listed = [s["filename"] for s in doc.get("segments", []) if isinstance(s, dict)]
    if not listed:
        return None
    name = rng.choice(listed)
    key = posixpath.join(posixpath.dirname(target.key), name)
    return Mutated(target.data, f"{name} deleted", removed=(key,))
