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
from stormwatch.formats.oom_dump import OomDump, foreign_records, is_dump_events, metadata_key, read_dump
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


def of_its_session(tree: ArtifactTree, unit: Unit, dump: OomDump | None, parts: Sequence[SessionPart]
                   ) -> tuple[tuple[SessionPart, ...], str | None]:
    """A dump's session parts of the session its metadata names (all when it names none), and the
    warning naming the file and the records of another session, which are skipped: a ring buffer
    holds one session's events, so others are not this dump's to give."""
    if dump is None or dump.session_id is None:
        return tuple(parts), None
    own = tuple(part for part in parts if part.summary.session_id == dump.session_id)
    if len(own) == len(parts):
        return own, None
    numbers = foreign_records(tree.read(unit.key), dump.session_id)
    more = f" and {len(numbers) - 10} more" if len(numbers) > 10 else ""
    shown = ", ".join(str(number) for number in numbers[:10]) + more
    noun = "record" if len(numbers) == 1 else "records"
    return own, (f"OOM dump {tree.identity(unit.key)}: {noun} {shown} of another session than the dump's "
                 f"{dump.session_id} (skipped)")


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
                                   sources=part.sources, warnings=part.warnings,
                                   clock_steps=part.clock_steps))
    return out
