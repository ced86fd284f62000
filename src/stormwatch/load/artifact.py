"""Loading one unit (see :mod:`stormwatch.load.discover`) into session parts, as stormlog would.

Every unit yields sessions grouped by id with events in time order, the
summary stormlog would give each (from a sink manifest, a bundle manifest, or
inferred from the events), warnings that name the file and line, and the files
whose last record was cut short (:mod:`stormwatch.load.cut_short`). Each file is
scanned for sample clocks that step back in its order before that order is sorted
away (:mod:`stormwatch.load.clock_steps`): each session part carries its steps,
and each step is a warning.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stormwatch.events.frame import concat_frames
from stormwatch.events.merge import combine_events, sort_events
from stormwatch.events.session_ids import stable_legacy_session_id
from stormwatch.events.sessions import SessionPart, SessionSummary, infer_summary, summary_from_last_event
from stormwatch.formats.bundle import RankAllocator, TimelineResult, read_timeline
from stormwatch.formats.csv_export import read_csv
from stormwatch.formats.json_document import NotTelemetryError, read_json
from stormwatch.formats.jsonl import BOM, ParsedEvents, read_jsonl, read_jsonl_stream
from stormwatch.formats.lines import Buffer
from stormwatch.formats.sink import parse_manifest
from stormwatch.load.clock_steps import (
    ClockStepBack,
    StepFound,
    across_files,
    csv_lines,
    jsonl_lines,
    placed,
    scan_clock,
)
from stormwatch.load.cut_short import CutShortFile, cut_short_file
from stormwatch.load.discover import Unit, UnitKind
from stormwatch.load.file_mappings import MappingPool
from stormwatch.load.limits import LoadLimits
from stormwatch.load.tree import ArtifactTree, LoaningTree, LocalTree, StreamingTree


@dataclass(frozen=True)
class UnitResult:
    """A unit's sessions and warnings; ``cut_short``: its files whose last record was cut short
    (``path`` relative to the tree's root; not yet placed in a session group)."""

    parts: tuple[SessionPart, ...]
    warnings: tuple[str, ...]
    legacy_flat: bool = False
    cut_short: tuple[CutShortFile, ...] = ()


def _by_session(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Events split by session id, in order of first appearance."""
    if frame.empty:
        return []
    ids = frame["session_id"]
    if (ids == ids.iloc[0]).all():
        return [(str(ids.iloc[0]), frame)]
    return [(str(sid), group.reset_index(drop=True)) for sid, group in frame.groupby("session_id", sort=False)]


def _ordered(parts: list[SessionPart]) -> tuple[SessionPart, ...]:
    return tuple(sorted(parts, key=lambda p: p.summary.sort_key()))


def register_ranks(parts: tuple[SessionPart, ...], allocator: RankAllocator) -> None:
    """Tell the allocator which ranks (and how large a world) these sessions use."""
    for part in parts:
        if part.events.empty:
            continue
        ranks = part.events["rank"].to_numpy()
        low, high = int(ranks.min()), int(ranks.max())
        allocator.used.update([low] if low == high else (int(r) for r in np.unique(ranks)))  # one rank: no sort
        allocator.max_world_size = max(allocator.max_world_size, int(part.events["world_size"].to_numpy().max()))


@dataclass(frozen=True)
class Reading:
    """How a unit is read: the job's caps, the artifacts' sizes in bytes when the
    caller knows them from a listing (else local files are ``stat``-ed), and the
    mappings local files are read into."""

    limits: LoadLimits = LoadLimits()
    sizes: Mapping[str, int] | None = None
    pool: MappingPool | None = None

    def size_bytes(self, tree: ArtifactTree, key: str) -> int | None:
        if self.sizes is not None and key in self.sizes:
            return self.sizes[key]
        return tree.size_bytes(key) if isinstance(tree, LocalTree) else None

    def unit_bytes(self, tree: ArtifactTree, unit: Unit) -> int | None:
        """The bytes of the unit's artifacts (a sink's segments); None when a size is unknown."""
        keys = unit.segments if unit.kind is UnitKind.SINK else (unit.key,)
        sizes = [self.size_bytes(tree, key) for key in keys]
        return None if None in sizes else sum(size for size in sizes if size is not None)

    def oversized(self, tree: ArtifactTree, key: str) -> str | None:
        """The skip warning when ``key`` is over the artifact cap (checked before any read)."""
        size = self.size_bytes(tree, key)
        return None if size is None else self.limits.oversized_warning(tree.identity(key), size)


def _read_segment(
    tree: ArtifactTree, segment: str, reading: Reading, *, label: str, default_session_id: str
) -> ParsedEvents:
    """A JSONL segment; one larger than ``chunk_bytes`` is streamed when the tree can."""
    size = reading.size_bytes(tree, segment)
    chunk = reading.limits.chunk_bytes
    if size is not None and size > chunk and isinstance(tree, StreamingTree):
        with tree.open(segment) as stream:
            return read_jsonl_stream(stream, label=label, default_session_id=default_session_id, chunk_bytes=chunk,
                                     max_events=reading.limits.max_events)
    if isinstance(tree, LoaningTree):
        with tree.loan(segment, reading.pool) as data:
            return read_jsonl(data, label=label, default_session_id=default_session_id)
    return read_jsonl(tree.read(segment), label=label, default_session_id=default_session_id)


def _segment_lines(
    tree: ArtifactTree, segment: str, reading: Reading, steps: tuple[StepFound, ...], parsed: ParsedEvents
) -> list[int] | None:
    """The lines of ``steps`` in a JSONL segment, its bytes read again (only when a step was found);
    None when its lines cannot be told (a skipped line, or too big a file to read whole)."""
    rows = [step.row for step in steps]
    torn = parsed.cut_short_bytes is not None

    def lines(data: Buffer) -> list[int] | None:
        return jsonl_lines(data, rows, records=len(parsed.frame), torn=torn)

    if isinstance(tree, LoaningTree):
        with tree.loan(segment, reading.pool) as data:
            return lines(data)
    size = reading.size_bytes(tree, segment)
    if isinstance(tree, StreamingTree) and (size is None or size > reading.limits.chunk_bytes):
        return None  # it was streamed: not read whole for a line number
    return lines(tree.read(segment))


def _by_session_steps(steps: tuple[ClockStepBack, ...], found: tuple[StepFound, ...]) -> dict[str, list[ClockStepBack]]:
    out: dict[str, list[ClockStepBack]] = {}
    for step, where in zip(steps, found, strict=True):
        out.setdefault(where.session_id, []).append(step)
    return out


def _load_sink(tree: ArtifactTree, unit: Unit, reading: Reading) -> UnitResult:
    warnings: list[str] = []
    skipped = reading.oversized(tree, unit.manifest) if unit.manifest else None
    if skipped:
        warnings.append(skipped)
    manifest = parse_manifest(tree.read(unit.manifest)) if unit.manifest and not skipped else None
    hints = dict(manifest.segments) if manifest else {}
    fallback = stable_legacy_session_id(tree.identity(unit.key), "sink")
    frames: dict[str, list[pd.DataFrame]] = {}
    sources: dict[str, set[str]] = {}
    stated = {s.session_id: s for s in (manifest.sessions if manifest else ())}
    cut_short: list[CutShortFile] = []
    steps: dict[str, list[ClockStepBack]] = {}
    last_ns: dict[tuple[str, int], int] = {}  # a (session, rank)'s last sample so far, across segments
    reported: set[tuple[str, int]] = set()
    for segment in unit.segments:
        identity = tree.identity(segment)
        skipped = reading.oversized(tree, segment)
        if skipped:
            warnings.append(skipped)
            continue
        hint = hints.get(posixpath.basename(segment)) or fallback
        parsed = _read_segment(tree, segment, reading, label=identity, default_session_id=hint)
        warnings.extend(parsed.warnings)
        if parsed.cut_short_bytes is not None:
            listed = hints.get(posixpath.basename(segment))  # the manifest's word, for a file without a record
            cut_short.append(cut_short_file(
                parsed.frame, source=identity, path=segment, dropped_bytes=parsed.cut_short_bytes, session_id=listed,
                rank=stated[listed].rank if listed in stated else None))
        found = across_files(scan_clock(parsed.frame), last_ns, reported)
        if found:
            located = placed(found, source=identity, lines=_segment_lines(tree, segment, reading, found, parsed))
            warnings.extend(step.warning() for step in located)
            for session_id, session_steps in _by_session_steps(located, found).items():
                steps.setdefault(session_id, []).extend(session_steps)
        groups = _by_session(parsed.frame)
        for session_id, group in groups:
            frames.setdefault(session_id, []).append(group)
            sources.setdefault(session_id, set()).add(identity)
        if not groups:
            sources.setdefault(hint, set()).add(identity)
    source = f"artifact:{unit.name or tree.root_name}"
    parts = []
    for session_id in {*frames, *stated}:
        events = sort_events(concat_frames(frames.get(session_id, [])))
        summary = stated.get(session_id)
        if summary is None:
            summary = infer_summary(session_id, events, source=source)
        own = tuple(sorted(sources.get(session_id, {tree.identity(unit.key)})))
        parts.append(SessionPart(summary=summary, events=events, sources=own,
                                 clock_steps=tuple(steps.get(session_id, ()))))
    return UnitResult(parts=_ordered(parts), warnings=tuple(warnings), cut_short=tuple(cut_short))


def _load_json(tree: ArtifactTree, unit: Unit, allocator: RankAllocator, segments: list[str]) -> UnitResult:
    identity = tree.identity(unit.key)
    default = stable_legacy_session_id(identity, "json")
    try:
        parsed = read_json(tree.read(unit.key), label=identity, default_session_id=default)
    except NotTelemetryError as exc:
        if unit.timeline_fallback:
            return _load_timeline(tree, unit, allocator, segments)
        return UnitResult(parts=(), warnings=(f"Failed to parse JSON telemetry file {identity}: {exc}",))
    source = f"artifact:{unit.name}"
    stated = {summary.session_id: summary for summary in parsed.summaries}
    found = scan_clock(parsed.frame).steps
    located = placed(found, source=identity, lines=None)  # a JSON document's records, not its lines
    steps = _by_session_steps(located, found)
    parts = []
    for sid, group in _by_session(parsed.frame):
        events = sort_events(group)
        summary = stated.get(sid) or infer_summary(sid, events, source=source)
        parts.append(SessionPart(summary=summary, events=events, sources=(identity,),
                                 clock_steps=tuple(steps.get(sid, ()))))
    legacy = bool(parts) and all(p.summary.session_id == default for p in parts)
    cut_short = () if parsed.cut_short_bytes is None else (
        cut_short_file(parsed.frame, source=identity, path=unit.key, dropped_bytes=parsed.cut_short_bytes),)
    return UnitResult(parts=_ordered(parts), warnings=(*parsed.warnings, *(step.warning() for step in located)),
                      legacy_flat=legacy, cut_short=cut_short)


def _load_csv(tree: ArtifactTree, unit: Unit) -> UnitResult:
    identity = tree.identity(unit.key)
    default = stable_legacy_session_id(identity, "csv")
    data = tree.read(unit.key)
    parsed = read_csv(data, label=identity, default_session_id=default)
    found = scan_clock(parsed.frame).steps
    lines = None
    if found:  # the file's lines, only when a step was found (a BOM is no line)
        body = data[len(BOM) :] if data.startswith(BOM) else data
        lines = csv_lines(body, [step.row for step in found], records=len(parsed.frame))
    located = placed(found, source=identity, lines=lines)
    steps = _by_session_steps(located, found)
    source = f"artifact:{unit.name}"
    parts = []
    for sid, group in _by_session(parsed.frame):
        events = combine_events([group])
        parts.append(
            SessionPart(summary=summary_from_last_event(sid, events, source=source), events=events, sources=(identity,),
                        warnings=parsed.warnings, clock_steps=tuple(steps.get(sid, ())))
        )
    legacy = bool(parts) and all(p.summary.session_id == default for p in parts)
    return UnitResult(parts=tuple(parts), warnings=(*parsed.warnings, *(step.warning() for step in located)),
                      legacy_flat=legacy)


def _load_timeline(tree: ArtifactTree, unit: Unit, allocator: RankAllocator, segments: list[str]) -> UnitResult:
    identity = tree.identity(unit.key)
    manifest_key = posixpath.join(posixpath.dirname(unit.key), "manifest.json")
    manifest = tree.read(manifest_key) if tree.exists(manifest_key) else None
    result = read_timeline(
        tree.read(unit.key),
        label=identity,
        identity=identity,
        segments=segments,
        manifest=manifest,
        allocator=allocator,
    )
    if not isinstance(result, TimelineResult):
        return UnitResult(parts=(), warnings=(result,))
    located = placed(scan_clock(result.events).steps, source=identity, lines=None)
    events = combine_events([result.events])
    summary: SessionSummary = result.summary
    part = SessionPart(summary=summary, events=events, sources=(identity,), clock_steps=located)
    return UnitResult(parts=(part,), warnings=(*result.warnings, *(step.warning() for step in located)))


def needs_allocator(unit: Unit) -> bool:
    """Whether loading the unit may assign a rank (bundles), so must run in order."""
    return unit.kind is UnitKind.TIMELINE or unit.timeline_fallback


def load_unit(
    tree: ArtifactTree, unit: Unit, *, allocator: RankAllocator | None, reading: Reading = Reading()
) -> UnitResult:
    """Sessions of one unit. Only bundles use ``allocator`` (to pick a free rank).

    A JSON, CSV or bundle file over ``reading``'s artifact cap is skipped with a
    warning (as is each such sink segment); big JSONL segments are read in chunks.

    Path segments for a bundle's rank are the unit's key parts below the tree
    root plus the root's own name (never anything above it). Thread-safe for
    units where :func:`needs_allocator` is false.
    """
    segments = [*reversed(unit.key.split("/")), tree.root_name]
    if unit.kind is not UnitKind.SINK:
        skipped = reading.oversized(tree, unit.key)
        if skipped:
            return UnitResult(parts=(), warnings=(skipped,))
    if unit.kind is UnitKind.TIMELINE:
        assert allocator is not None
        return _load_timeline(tree, unit, allocator, segments)
    if unit.kind is UnitKind.SINK:
        return _load_sink(tree, unit, reading)
    if unit.kind is UnitKind.CSV:
        return _load_csv(tree, unit)
    return _load_json(tree, unit, allocator or RankAllocator(), segments)
