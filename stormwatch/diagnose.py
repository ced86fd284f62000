"""Diagnose one job end to end: load, filter ranks, build the model, decide the verdict.

The one entry point shared by ``stormwatch diagnose`` and the pipeline's
per-job task. Reads through the artifact tree (or local paths) and returns
plain data; writing ``model.json`` somewhere is the caller's business.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stormwatch.analysis.collective import CollectivePreset
from stormwatch.analysis.model import DiagnosticsModel, build_model, expected_ranks
from stormwatch.analysis.rank_filter import parse_rank_filter
from stormwatch.load.limits import DEFAULT_LIMITS, LoadLimits
from stormwatch.load.loader import LoadResult, load_artifacts
from stormwatch.load.tree import ArtifactTree, Entry
from stormwatch.outputs.model_json import dumps_document, input_fingerprint, model_document
from stormwatch.outputs.verdict import Verdict, decide_verdict
from stormwatch.peers.job_facts import fleet_facts
from stormwatch.severity import FailOn
from stormwatch.version import ENGINE_VERSION


@dataclass(frozen=True)
class DiagnoseOptions:
    """How to diagnose: rank filter expression, session, failure threshold, collective preset,
    and the job's load caps (see :class:`~stormwatch.load.limits.LoadLimits`)."""

    ranks: str | None = None
    session_id: str | None = None
    fail_on: FailOn = FailOn.NEVER
    preset: CollectivePreset = CollectivePreset.MEDIUM
    limits: LoadLimits = DEFAULT_LIMITS

    @classmethod
    def parse(
        cls,
        *,
        ranks: str | None = None,
        session_id: str | None = None,
        fail_on: str = "never",
        preset: str = "medium",
        max_artifact_bytes: int | None = None,
        max_events: int | None = None,
    ) -> DiagnoseOptions:
        """From command-line or flow-parameter strings; ValueError names a bad value.
        ``None`` caps take the defaults of :class:`~stormwatch.load.limits.LoadLimits`."""
        caps = {"max_artifact_bytes": max_artifact_bytes, "max_events": max_events}
        limits = LoadLimits(**{name: value for name, value in caps.items() if value is not None})
        return cls(ranks, session_id, FailOn(fail_on.strip().lower()), CollectivePreset(preset.strip().lower()),
                   limits)

    def recorded(self) -> dict[str, str | int | None]:
        """What changes the model (``fail_on`` does not): stored in model.json as ``options``.
        Caps appear only when they differ from the defaults (older documents stay comparable)."""
        recorded: dict[str, str | int | None] = {"ranks": self.ranks, "session_id": self.session_id,
                                                 "preset": self.preset.value, "engine_version": ENGINE_VERSION}
        if self.limits.max_artifact_bytes != DEFAULT_LIMITS.max_artifact_bytes:
            recorded["max_artifact_bytes"] = self.limits.max_artifact_bytes
        if self.limits.max_events != DEFAULT_LIMITS.max_events:
            recorded["max_events"] = self.limits.max_events
        return recorded


@dataclass(frozen=True, eq=False)
class Diagnosis:
    job_id: str
    loaded: LoadResult
    model: DiagnosticsModel
    verdict: Verdict
    document: dict[str, Any]

    def model_json(self) -> bytes:
        return dumps_document(self.document)

    @property
    def started_at_ns(self) -> int | None:
        """First event of the diagnosed session (ns), the origin of 'time since job start'."""
        stamps = self.loaded.events["timestamp_ns"]
        return int(stamps.min()) if len(stamps) else None


def local_entries(paths: Sequence[str | Path]) -> list[Entry]:
    """(absolute path, size, mtime) of every file under ``paths``: the local input identity."""
    entries = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            stat = file.stat()
            entries.append(Entry(str(file), stat.st_size, str(stat.st_mtime_ns)))
    return entries


def diagnose(
    source: Sequence[str | Path] | ArtifactTree,
    *,
    job_id: str,
    source_name: str,
    options: DiagnoseOptions = DiagnoseOptions(),
    entries: Sequence[Entry] | None = None,
) -> Diagnosis:
    """Load ``source`` (local paths or a tree), diagnose it, and build its model.json document.

    Raises :class:`~stormwatch.load.loader.SessionNotFoundError` for an unknown session
    :class:`~stormwatch.analysis.rank_filter.RankFilterError` for a malformed rank filter and
    :class:`~stormwatch.load.limits.JobLimitError` for a job over ``options.limits.max_events``;
    bad or oversized artifacts never raise (they become warnings).
    """
    if entries is None:
        entries = source.entries() if not isinstance(source, Sequence) else local_entries(source)
    loaded = load_artifacts(source, session_id=options.session_id, limits=options.limits)
    selected = None
    if options.ranks:
        events = loaded.events
        available = expected_ranks(events["rank"].to_numpy(), events["world_size"].to_numpy())
        selected = parse_rank_filter(options.ranks, available)
    model = build_model(loaded.events, selected, collective_preset=options.preset, markers=loaded.markers)
    verdict = decide_verdict(model, events=len(loaded.events), fail_on=options.fail_on)
    document = model_document(
        loaded,
        model,
        verdict,
        job_id=job_id,
        source=source_name,
        fingerprint=input_fingerprint(entries),
        engine_version=ENGINE_VERSION,
        options=options.recorded(),
        fleet=fleet_facts(loaded, model).as_dict(),
    )
    return Diagnosis(job_id, loaded, model, verdict, document)


def default_job_id(paths: Sequence[str | Path]) -> str:
    """A job id for local sources: the folder's name, else the first path's stem."""
    first = Path(paths[0]).expanduser().resolve()
    return first.name if len(paths) == 1 and first.is_dir() else first.stem or os.path.basename(str(first))
