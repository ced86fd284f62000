"""``load_artifacts``: a job's telemetry as one events DataFrame plus its sessions;
``load_sessions``: every session of the job from the same single parse (:class:`JobLoad`), which
``load_artifacts`` narrows to one session (``--session``, else stormlog's default).

Path semantics:

* one folder is a **job folder**: every artifact found under it, at any depth,
  counts as if its path had been given on its own, so the single-rank sessions
  that share ``job_id`` and ``world_size`` merge into one distributed session;
* several paths behave as stormlog's path list: a file is one input, a folder
  is one input whose artifacts merge by session id;
* an :class:`~stormwatch.load.tree.ArtifactTree` (an S3 prefix read into memory, say)
  is a job folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from stormwatch.analysis.markers import TimelineMarker, derive_markers
from stormwatch.events.frame import empty_frame
from stormwatch.events.sessions import (
    Accumulator,
    SessionPart,
    SessionSummary,
    merge_legacy,
    select_default,
    session_groups,
    synthesize_rank_groups,
    unique,
)
from stormwatch.formats.arrow_reader import side_by_side
from stormwatch.formats.bundle import RankAllocator
from stormwatch.formats.oom_dump import OomDump
from stormwatch.formats.run_catalog import CatalogIdentity, with_catalog_identity
from stormwatch.load.artifact import Reading, UnitResult, load_unit, needs_allocator, register_ranks
from stormwatch.load.cut_short import CutShortFile, placed, relative_to
from stormwatch.load.discover import Unit, UnitKind, discover, unit_for_file
from stormwatch.load.dump_evidence import is_dump, not_held, of_its_session, read_dump_metadata
from stormwatch.load.file_mappings import MappingPool
from stormwatch.load.limits import DEFAULT_LIMITS, LoadLimits
from stormwatch.load.non_telemetry import run_catalog_identities
from stormwatch.load.tree import ArtifactTree, LocalTree

#: Units parsed at once (Arrow parses without the GIL), one per core, at least 2, at most 8: each
#: unit in flight holds its bytes and table, and more units than cores load no faster but peak
#: higher (see bench/README.md, model_bench.py).
_WORKERS = max(2, min(8, os.cpu_count() or 1))


class SessionNotFoundError(ValueError):
    """The requested ``session_id`` is not among the loaded sessions; ``available`` holds the
    sessions the job has (selection order), so a front door can list them."""

    def __init__(self, message: str, *, available: tuple[SessionSummary, ...] = ()) -> None:
        super().__init__(message)
        self.available = available


@dataclass(frozen=True)
class LoadResult:
    """What a job's artifacts hold.

    ``events`` are the selected session's events (canonical columns, time order);
    ``sessions`` every session found, in selection order, with event counts; ``cut_short`` the
    job's files whose last record was cut short (every session's, as ``warnings`` are), in load order;
    ``oom_dumps`` what the job's OOM flight-recorder dumps say (every session's), in load order;
    ``clock_backwards_ranks`` the selected session's ranks whose sample clock stepped back in their
    files' order (:mod:`stormwatch.load.clock_steps`; ``events``, in time order, cannot show it).
    """

    events: pd.DataFrame
    sessions: tuple[SessionSummary, ...]
    selected_session_id: str | None
    warnings: tuple[str, ...]
    sources_loaded: tuple[str, ...]
    markers: tuple[TimelineMarker, ...]
    cut_short: tuple[CutShortFile, ...] = ()
    oom_dumps: tuple[OomDump, ...] = ()
    clock_backwards_ranks: frozenset[int] = frozenset()


@dataclass(frozen=True, eq=False)
class JobLoad:
    """Every session of a job from one parse of its artifacts.

    ``parts``: every session stormlog would list, in selection order (rank groups beside their
    members, see :func:`~stormwatch.events.sessions.session_groups`); ``default_session_id``: the
    one stormlog selects without ``--session`` (None: no session); ``warnings``, ``sources_loaded``
    and ``cut_short`` (files whose last record was cut short, each placed in its session group) are
    the job's, the same whichever session is looked at.
    """

    parts: tuple[SessionPart, ...]
    default_session_id: str | None
    warnings: tuple[str, ...]
    sources_loaded: tuple[str, ...]
    cut_short: tuple[CutShortFile, ...] = ()
    oom_dumps: tuple[OomDump, ...] = ()

    @property
    def sessions(self) -> tuple[SessionSummary, ...]:
        return tuple(part.summary for part in self.parts)

    def groups(self) -> tuple[SessionPart, ...]:
        """The sessions the job is diagnosed as (rank groups and the sessions outside them)."""
        return tuple(session_groups(self.parts))

    def part(self, session_id: str) -> SessionPart:
        """The session ``session_id``; :class:`SessionNotFoundError` when the job has none by that id."""
        found = next((part for part in self.parts if part.summary.session_id == session_id), None)
        if found is None:
            raise SessionNotFoundError(f"Requested session_id not found: {session_id}", available=self.sessions)
        return found

    def result_for(self, session_id: str | None = None) -> LoadResult:
        """The job as ``--session session_id`` loads it (None: the default session): that
        session's events and markers, the job's sessions, warnings and sources."""
        chosen = self.default_session_id if session_id is None else session_id
        part = None if chosen is None else self.part(chosen)
        events = part.events if part is not None else empty_frame()
        return LoadResult(
            events=events,
            sessions=self.sessions,
            selected_session_id=chosen,
            warnings=self.warnings,
            sources_loaded=self.sources_loaded,
            markers=derive_markers(events),
            cut_short=self.cut_short,
            oom_dumps=self.oom_dumps,
            clock_backwards_ranks=frozenset() if part is None else frozenset(step.rank for step in part.clock_steps),
        )


@dataclass
class _State:
    accumulator: Accumulator
    legacy: list[SessionPart]
    candidates: set[str]
    warnings: list[str]
    allocator: RankAllocator
    limits: LoadLimits
    events: int = 0  # events loaded so far, across every unit of the job
    cut_short: list[CutShortFile] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # session id -> the legacy merge that replaced it
    dumps: list[OomDump] = field(default_factory=list)
    catalogs: list[CatalogIdentity] = field(default_factory=list)  # what run catalogs say of sessions

    def merge_legacy(self, parts: list[SessionPart]) -> SessionPart:
        """Legacy parts as one session (:func:`merge_legacy`), remembering which ids it replaced."""
        merged = merge_legacy(parts)
        self.renamed.update((part.summary.session_id, merged.summary.session_id) for part in parts)
        return merged

    def count(self, result: UnitResult) -> None:
        """Add a unit's events to the job's total; :class:`JobLimitError` past ``max_events``."""
        self.events += sum(len(part.events) for part in result.parts)
        self.limits.check_events(self.events, where="job")


def _reading(state: _State, tree: ArtifactTree, *, listed: bool) -> Reading:
    """Sizes from the tree's listing when it was listed anyway (else local files are stat-ed)."""
    sizes = {entry.key: entry.size_bytes for entry in tree.entries()} if listed else None
    return Reading(limits=state.limits, sizes=sizes)


def _arrow_threads(sizes: Sequence[int | None]) -> list[bool]:
    """Per unit, whether Arrow parses it on its thread pool.

    Units run :data:`_WORKERS` at a time. One that holds more than a worker's share
    of the job's bytes (or whose size is unknown) keeps Arrow's pool; the others
    parse on one core each, side by side (:func:`~stormwatch.formats.arrow_reader.side_by_side`):
    the pool's threads would only contend with the other workers' parses (see bench/README.md,
    tricks_bench.py ``arrow-threads``).
    """
    total = sum(size for size in sizes if size is not None)
    return [size is None or size * _WORKERS > total for size in sizes]


def _on_a_worker(unit: Unit) -> bool:
    """Whether a unit is parsed ahead on a worker thread: not a bundle (bundles run in order),
    and not a JSON document, which orjson and Python parse holding the GIL: a worker gains it
    no time and keeps its memory in the worker's own heap arena (see bench/README.md,
    tricks_bench.py ``json-on-caller``)."""
    return not needs_allocator(unit) and unit.kind is not UnitKind.JSON


def _load_ahead(tree: ArtifactTree, unit: Unit, *, reading: Reading, beside_others: bool) -> UnitResult:
    """A unit loaded on a worker thread; ``beside_others``: on one core, not Arrow's pool (see
    :func:`_arrow_threads`)."""
    with side_by_side(beside_others):
        return load_unit(tree, unit, allocator=None, reading=reading)


def _load_units(
    state: _State, inputs: Sequence[tuple[ArtifactTree, Unit]], *, listed: bool = True
) -> Iterator[UnitResult]:
    """Results in input order, each counted against ``max_events``. Units that cannot
    need a free rank, and are not JSON documents, are parsed ahead on threads (Arrow and numpy
    release the GIL; see :func:`_on_a_worker`);
    bundles wait for every earlier unit's ranks to be registered, as stormlog's
    sequential loader would. On :class:`JobLimitError` the units not yet started are cancelled."""
    readings: dict[int, Reading] = {}
    for tree, _ in inputs:
        if id(tree) not in readings:
            readings[id(tree)] = _reading(state, tree, listed=listed)
    parallel = [index for index, (_, unit) in enumerate(inputs) if _on_a_worker(unit)]
    sizes = [readings[id(inputs[index][0])].unit_bytes(*inputs[index]) for index in parallel]
    threads = dict(zip(parallel, _arrow_threads(sizes), strict=True))
    mappings = MappingPool()
    pool = ThreadPoolExecutor(max_workers=_WORKERS)
    try:
        ahead = {
            index: pool.submit(_load_ahead, tree, unit, reading=replace(readings[id(tree)], pool=mappings),
                               beside_others=not threads[index])
            for index, (tree, unit) in enumerate(inputs)
            if index in threads
        }
        for index, (tree, unit) in enumerate(inputs):
            future = ahead.get(index)
            if future is not None:
                result = future.result()
            else:
                allocator = state.allocator if needs_allocator(unit) else None
                result = load_unit(tree, unit, allocator=allocator, reading=readings[id(tree)])
            state.count(result)
            register_ranks(result.parts, state.allocator)
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        mappings.close()


def _single_inputs(state: _State, inputs: Sequence[tuple[ArtifactTree, Unit]], *, listed: bool = True) -> None:
    """Each unit as its own input (an explicit file, or an artifact of a job folder); OOM dumps'
    events last, those no other file holds (:mod:`stormwatch.load.dump_evidence`)."""
    held: list[SessionPart] = []
    for (tree, unit), result in zip(inputs, _load_units(state, inputs, listed=listed), strict=True):
        state.warnings.extend(result.warnings)
        state.cut_short.extend(result.cut_short)
        if is_dump(unit):
            result = _read_dump(state, tree, unit, result)
        if result.legacy_flat:
            state.legacy.extend(result.parts)
            continue
        if len(result.parts) == 1:
            state.candidates.add(result.parts[0].summary.session_id)
        (held.extend if is_dump(unit) else state.accumulator.add)(result.parts)
    state.accumulator.add(not_held(held, state.accumulator))


def _read_catalogs(state: _State, tree: ArtifactTree) -> None:
    identities, problems = run_catalog_identities(tree)
    state.catalogs.extend(identities)
    state.warnings.extend(problems)


def _read_dump(state: _State, tree: ArtifactTree, unit: Unit, result: UnitResult) -> UnitResult:
    """``result`` (a dump's events) with only the dump's own session, its metadata read into ``state``."""
    dump, problem = read_dump_metadata(tree, unit)
    if dump is not None:
        state.dumps.append(dump)
    parts, foreign = of_its_session(tree, unit, dump, result.parts)
    state.warnings.extend(problem for problem in (problem, foreign) if problem is not None)
    return replace(result, parts=parts)


def _folder_input(state: _State, tree: LocalTree) -> None:
    """A folder among several paths: its artifacts merge into its own sessions."""
    inner = Accumulator()
    legacy: list[SessionPart] = []
    held: list[SessionPart] = []
    inputs = [(tree, unit) for unit in discover(tree)]
    _read_catalogs(state, tree)
    for (_, unit), result in zip(inputs, _load_units(state, inputs), strict=True):
        state.warnings.extend(result.warnings)
        state.cut_short.extend(result.cut_short)
        if is_dump(unit):
            result = _read_dump(state, tree, unit, result)
        if is_dump(unit) and not result.legacy_flat:
            held.extend(result.parts)
            continue
        (legacy.extend if result.legacy_flat else inner.add)(result.parts)
    inner.add(not_held(held, inner))
    if legacy:
        inner.add([state.merge_legacy(legacy)])
    parts = inner.finalize()
    if not parts:
        state.warnings.append(f"No telemetry event payloads found in directory: {tree.root}")
    if len(parts) == 1:
        state.candidates.add(parts[0].summary.session_id)
    state.accumulator.add(parts)


def _finish(state: _State) -> JobLoad:
    if state.legacy:
        state.accumulator.add([state.merge_legacy(state.legacy)])
    # Before rank groups form: a session a run catalog gives a job and rank may join its job's group.
    sessions = with_catalog_identity(state.accumulator.finalize(), state.catalogs)
    synthetic = synthesize_rank_groups(sessions, state.candidates)
    if synthetic:
        sessions = sorted([*sessions, *synthetic], key=lambda p: p.summary.sort_key())
    selected = select_default(synthetic) if synthetic else None
    selected = selected or select_default(sessions)
    return JobLoad(
        parts=tuple(sessions),
        default_session_id=selected.summary.session_id if selected is not None else None,
        warnings=unique([*state.warnings, *(w for p in sessions for w in p.warnings)]),
        sources_loaded=tuple(sorted({s for p in sessions for s in p.sources})),
        cut_short=placed(state.cut_short, sessions, renamed=state.renamed) if state.cut_short else (),
        oom_dumps=tuple(state.dumps),
    )


def _new_state(limits: LoadLimits) -> _State:
    return _State(accumulator=Accumulator(), legacy=[], candidates=set(), warnings=[], allocator=RankAllocator(),
                  limits=limits)


def _tree_sessions(tree: ArtifactTree, limits: LoadLimits) -> JobLoad:
    state = _new_state(limits)
    units = discover(tree)
    _read_catalogs(state, tree)
    if not units:
        state.warnings.append(f"No telemetry artifacts found under {tree.identity('')}")
    _single_inputs(state, [(tree, unit) for unit in units])
    return _finish(state)


def load_tree(tree: ArtifactTree, session_id: str | None = None, *, limits: LoadLimits = DEFAULT_LIMITS) -> LoadResult:
    """Load a job folder given as an artifact tree (local folder, S3 objects ...), within ``limits``."""
    return _tree_sessions(tree, limits).result_for(session_id)


def load_artifacts(
    paths: Sequence[str | Path] | ArtifactTree, session_id: str | None = None, *, limits: LoadLimits = DEFAULT_LIMITS
) -> LoadResult:
    """Load telemetry from files and folders (see module doc for path semantics).

    Never raises for bad input, which becomes warnings: an artifact over
    ``limits.max_artifact_bytes`` is skipped unread, with a warning naming its
    size and the cap. Raises :class:`SessionNotFoundError` when ``session_id``
    is given and absent, and :class:`~stormwatch.load.limits.JobLimitError` (a
    ``ValueError``) when the job holds more than ``limits.max_events`` events.
    A thin use of :func:`load_sessions`: the same parse, then one session picked.
    """
    return load_sessions(paths, limits=limits).result_for(session_id)


def load_sessions(paths: Sequence[str | Path] | ArtifactTree, *, limits: LoadLimits = DEFAULT_LIMITS) -> JobLoad:
    """Every session of the job in ``paths`` (as :func:`load_artifacts` reads them), from one parse:
    the files are read once, then split by session. Raises as :func:`load_artifacts` does (never
    :class:`SessionNotFoundError`: no session is picked here)."""
    if not isinstance(paths, Sequence) or isinstance(paths, str | Path):
        if isinstance(paths, str | Path):
            paths = [paths]
        else:
            return _tree_sessions(paths, limits)
    resolved = [Path(p).expanduser().resolve() for p in paths]
    existing = [p for p in resolved if p.exists()]
    if len(resolved) == 1 and existing and existing[0].is_dir():
        return _tree_sessions(LocalTree(existing[0]), limits)
    state = _new_state(limits)
    files: list[tuple[ArtifactTree, Unit]] = []  # consecutive files, loaded together

    def flush() -> None:
        _single_inputs(state, files, listed=False)
        files.clear()

    for path in resolved:
        if path.is_file():
            tree = LocalTree(path.parent)
            unit = unit_for_file(tree, path.name)
            if unit is not None:
                files.append((tree, unit))
                continue
        flush()
        if not path.exists():
            state.warnings.append(f"Path does not exist: {path}")
        elif path.is_dir():
            _folder_input(state, LocalTree(path))
        elif path.is_file():
            state.warnings.append(f"Unsupported artifact file type: {path}")
        else:
            state.warnings.append(f"Unsupported path type: {path}")
    flush()
    job = _finish(state)
    if not job.cut_short:
        return job
    # No job folder: files are named from the folder that holds every input (a file's own folder).
    base = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in existing])) if existing else None
    return job if base is None else replace(job, cut_short=relative_to(job.cut_short, base))
