"""Append-only sink directories: ``manifest.json`` plus rotated ``segment-*.jsonl``.

The manifest is read leniently, as stormlog does: a broken manifest is as good
as none, and a broken session or segment entry is skipped. Segments the
manifest lists but retention pruned are simply absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.events.sessions import SessionSummary, summary_from_mapping
from stormwatch.formats.json_value import parse_json_object

MANIFEST_NAME = "manifest.json"
SEGMENT_PREFIX = "segment-"
SEGMENT_SUFFIX = ".jsonl"


@dataclass(frozen=True)
class SinkManifest:
    """Session ledger and segment list; ``segments`` holds (file name, session id)."""

    schema_version: int
    sessions: tuple[SessionSummary, ...]
    segments: tuple[tuple[str, str | None], ...]


def is_segment_name(name: str) -> bool:
    return name.startswith(SEGMENT_PREFIX) and name.endswith(SEGMENT_SUFFIX)


def _manifest_int(value: Any, *, default: int, minimum: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return default if number < minimum else number


def parse_manifest(data: bytes) -> SinkManifest | None:
    """The manifest in ``data``, or None when it is not a JSON object."""
    payload = parse_json_object(data)
    if payload is None:
        return None
    version = _manifest_int(payload.get("schema_version", 1), default=1, minimum=1)
    sessions: list[SessionSummary] = []
    raw_sessions = payload.get("sessions", [])
    if version >= 2 and isinstance(raw_sessions, list):
        for raw in raw_sessions:
            if isinstance(raw, Mapping):
                try:
                    sessions.append(summary_from_mapping(raw))
                except ValueError:
                    continue
    segments: list[tuple[str, str | None]] = []
    raw_segments = payload.get("segments", [])
    for raw in raw_segments if isinstance(raw_segments, list) else []:
        if isinstance(raw, Mapping) and isinstance(raw.get("filename"), str):
            session_id = raw.get("session_id")
            segments.append((raw["filename"], session_id if isinstance(session_id, str) else None))
    return SinkManifest(version, tuple(sessions), tuple(segments))
