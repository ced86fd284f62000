"""OOM flight-recorder dumps in a job's load: their metadata read, their events counted once.

A dump's ``events.json`` is a copy of the last events the tracker recorded, which the job's sink or
exports hold too (:mod:`stormwatch.formats.oom_dump`). The loader holds a dump's session parts back
until every other file of the job is in, then adds only the events whose (session, timestamp) no
other file holds: nothing is counted twice, the session's summary stays the one its own files give,
and a dump alone still gives its session every event.
"""

from __future__ import annotations

from collections.abc import Sequence

from stormwatch.events.sessions import Accumulator, SessionPart
from stormwatch.formats.oom_dump import OomDump, is_dump_events, metadata_key, read_dump
from stormwatch.load.discover import Unit
from stormwatch.load.tree import ArtifactTree


def is_dump(unit: Unit) -> bool:
    return is_dump_events(unit.key)


def read_dump_metadata(tree: ArtifactTree, unit: Unit) -> tuple[OomDump | None, str | None]:
    """The dump beside ``unit`` (its ``events.json``) and, when its metadata is missing or unreadable,
    the warning naming the file (the dump's events still load)."""
    key = metadata_key(unit.key)
    folder = key.rpartition("/")[0]
    if not tree.exists(key):
        return None, f"OOM dump {tree.identity(folder)}: no metadata.json; its events are read, not its facts"
    try:
        return read_dump(folder, tree.read(key)), None
    except (OSError, ValueError) as exc:
        return None, f"OOM dump metadata {tree.identity(key)}: unreadable ({exc}); its events are read, not its facts"


def not_held(parts: Sequence[SessionPart], known: Accumulator) -> list[SessionPart]:
    """A dump's session parts without the events ``known`` (every other file's parts) holds, by
    session and ``timestamp_ns``; a part left empty is dropped, and a session the other files know
    keeps their summary."""
    out: list[SessionPart] = []
    for part in parts:
        session_id = part.summary.session_id
        others = known.parts.get(session_id)
        if not others:
            out.append(part)  # a dump alone: its events are the session's
            continue
        held = [other.events["timestamp_ns"].to_numpy() for other in others]
        events = part.events
        for stamps in held:
            events = events[~events["timestamp_ns"].isin(stamps)]
        if len(events):
            out.append(SessionPart(summary=known.summaries[session_id], events=events.reset_index(drop=True),
                                   sources=part.sources, warnings=part.warnings))
    return out
