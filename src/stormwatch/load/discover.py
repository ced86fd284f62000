"""Which objects of an artifact tree are telemetry, and how they form load units.

A unit is what stormlog would load from one path: a JSON or CSV export, a JSONL
file (read like a one-segment sink, as stormlog does), a sink folder, or a
diagnose bundle's ``telemetry_timeline.json``. Discovery follows stormlog's
folder patterns, and also finds, on purpose, what stormlog misses: sink folders
at any depth and ``*.jsonl`` exports of any name, except stormlog's own files that are not
telemetry (inference records, run catalogs, reports: :mod:`stormwatch.load.non_telemetry`), which
it leaves alone, without a word, as stormlog does.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase

from stormwatch.formats.sink import MANIFEST_NAME, is_segment_name, parse_manifest
from stormwatch.load.non_telemetry import not_telemetry
from stormwatch.load.tree import ArtifactTree, Entry

TIMELINE_NAME = "telemetry_timeline.json"
#: stormlog's patterns for export files inside folders (matched on the file name).
EXPORT_PATTERNS = ("events.json", "*events*.json", "*track*.json", "*events*.csv", "*track*.csv")


class UnitKind(StrEnum):
    SINK = "sink"
    JSON = "json"
    CSV = "csv"
    TIMELINE = "timeline"


@dataclass(frozen=True)
class Unit:
    """One loadable artifact. ``key`` is the file, or the folder of a sink;
    ``segments`` are a sink's segment keys in name order."""

    kind: UnitKind
    key: str
    segments: tuple[str, ...] = ()
    manifest: str | None = None
    timeline_fallback: bool = False

    @property
    def name(self) -> str:
        return posixpath.basename(self.key)


def _parent(key: str) -> str:
    return posixpath.dirname(key)


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _safe_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..")


def _sink_segments(tree: ArtifactTree, folder: str, names: set[str]) -> tuple[tuple[str, ...], str | None]:
    """Segment keys of a folder (listed by its manifest or named ``segment-*``)."""
    chosen = {name for name in names if is_segment_name(name)}
    manifest_key = _join(folder, MANIFEST_NAME) if MANIFEST_NAME in names else None
    if manifest_key is not None:
        manifest = parse_manifest(tree.read(manifest_key))
        if manifest is not None:
            chosen.update(n for n, _ in manifest.segments if _safe_name(n) and n in names)
    return tuple(_join(folder, n) for n in sorted(chosen)), manifest_key


def discover(tree: ArtifactTree, entries: Sequence[Entry] | None = None) -> list[Unit]:
    """Units below the tree's root: sinks, then exports, then timelines, each by key."""
    by_folder: dict[str, set[str]] = {}
    sizes: dict[str, int] = {}
    for entry in tree.entries() if entries is None else entries:
        by_folder.setdefault(_parent(entry.key), set()).add(posixpath.basename(entry.key))
        sizes[entry.key] = entry.size_bytes
    sinks: list[Unit] = []
    files: list[Unit] = []
    timelines: list[Unit] = []
    for folder in sorted(by_folder):
        names = by_folder[folder]
        segments, manifest = _sink_segments(tree, folder, names)
        if segments:
            sinks.append(Unit(kind=UnitKind.SINK, key=folder, segments=segments, manifest=manifest))
        for name in sorted(names):
            key = _join(folder, name)
            if name == TIMELINE_NAME:
                timelines.append(Unit(kind=UnitKind.TIMELINE, key=key, manifest=manifest))
            elif name.endswith(".jsonl") and not is_segment_name(name):
                files.append(Unit(kind=UnitKind.SINK, key=key, segments=(key,), manifest=manifest))
            elif any(fnmatchcase(name, pattern) for pattern in EXPORT_PATTERNS):
                kind = UnitKind.CSV if name.endswith(".csv") else UnitKind.JSON
                files.append(Unit(kind=kind, key=key))
    files = [unit for unit in files if not_telemetry(tree, unit.key, size_bytes=sizes.get(unit.key)) is None]
    files.sort(key=lambda unit: unit.key)
    return [*sinks, *files, *timelines]


def unit_for_file(tree: ArtifactTree, key: str) -> Unit | None:
    """The unit of one explicitly named file, or None for an unsupported type."""
    name = posixpath.basename(key)
    folder = _parent(key)
    sibling = _join(folder, MANIFEST_NAME)
    manifest = sibling if tree.exists(sibling) else None
    lowered = name.lower()
    if name == MANIFEST_NAME:
        listed = parse_manifest(tree.read(key))
        segments = tuple(
            _join(folder, n)
            for n, _ in (listed.segments if listed else ())
            if _safe_name(n) and tree.exists(_join(folder, n))
        )
        if segments:
            return Unit(kind=UnitKind.SINK, key=folder, segments=tuple(sorted(segments)), manifest=key)
        return Unit(kind=UnitKind.JSON, key=key)
    if lowered.endswith(".jsonl"):
        return Unit(kind=UnitKind.SINK, key=key, segments=(key,), manifest=manifest)
    if lowered.endswith(".json"):
        return Unit(kind=UnitKind.JSON, key=key, manifest=manifest, timeline_fallback=name == TIMELINE_NAME)
    if lowered.endswith(".csv"):
        return Unit(kind=UnitKind.CSV, key=key)
    return None
