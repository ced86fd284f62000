"""Artifacts whose last record was cut short: what a writer killed mid-write (an OOM kill) leaves.

stormlog 0.3.5 drops a JSONL file's torn last line (no trailing newline, not valid JSON) without a
word, and the loader drops it the same way, so that the events, and so the model, stay the
reference's. What the loader keeps beside them is the fact, one :class:`CutShortFile` per artifact
(never per event): JSONL files and sink segments whose torn last line was dropped, and JSON
documents that break off before their array closes (:mod:`stormwatch.formats.json_document` keeps
the complete records before the break).

Everything said about them lives outside the model (model.json's top-level ``warnings`` and
``cut_short``, coverage's ``ended_abruptly``): a tool written for the reference never sees them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from stormwatch.events.sessions import SessionPart, session_groups


@dataclass(frozen=True)
class CutShortFile:
    """One artifact whose last record was cut short.

    ``source``: the artifact as the loader's warnings name it (an absolute path, an S3 key ...);
    ``path``: the same file relative to the job folder (``rank_0/telemetry.jsonl``), or ``source``
    when it lies outside every input folder. ``rank`` and ``session_id``: those of the file's last
    complete record, in file order (None: the file held no complete record, and no sink manifest
    names its session). ``last_event_ns``: the latest timestamp among that session's events in the
    file, ns since the epoch (None: no complete record). ``dropped_bytes``: the bytes after the last
    complete record that were not read (0 for a JSON array left open right after a record).

    ``session_group_id``: the session the file's events are diagnosed in (a rank group, a legacy
    merge, or the file's own session: the ids of model.json's ``selected_session_id`` and
    ``attempts``); ``session_first_event_ns``: that session's first event, the origin of the time
    since the start (both None until the loader has formed the job's sessions).
    """

    source: str
    path: str
    rank: int | None
    session_id: str | None
    last_event_ns: int | None
    dropped_bytes: int
    session_group_id: str | None = None
    session_first_event_ns: int | None = None

    @property
    def at_s(self) -> float | None:
        """Seconds from the first event of the file's session group to its last complete record."""
        if self.last_event_ns is None or self.session_first_event_ns is None:
            return None
        return (self.last_event_ns - self.session_first_event_ns) / 1e9


def cut_short_file(
    frame: pd.DataFrame,
    *,
    source: str,
    path: str,
    dropped_bytes: int,
    session_id: str | None = None,
    rank: int | None = None,
) -> CutShortFile:
    """The record of a cut-short file from its events in file order (``frame``); ``session_id`` and
    ``rank`` are used only when the file held no complete record (a sink manifest's session, say)."""
    if frame.empty:
        return CutShortFile(source=source, path=path, rank=rank, session_id=session_id, last_event_ns=None,
                            dropped_bytes=dropped_bytes)
    last = len(frame) - 1
    own_session = str(frame["session_id"].iloc[last])
    ids = frame["session_id"]
    stamps = frame["timestamp_ns"].to_numpy()
    if not (ids == own_session).all():  # a file of several sessions: the last one's events
        stamps = stamps[(ids == own_session).to_numpy()]
    return CutShortFile(source=source, path=path, rank=int(frame["rank"].iloc[last]), session_id=own_session,
                        last_event_ns=int(np.max(stamps)), dropped_bytes=dropped_bytes)


def placed(
    files: Iterable[CutShortFile], parts: Sequence[SessionPart], *, renamed: Mapping[str, str] | None = None
) -> tuple[CutShortFile, ...]:
    """``files`` with the session group each is diagnosed in (see :class:`CutShortFile`), among the
    job's ``parts``; ``renamed``: session ids that a legacy merge replaced, by the merged id."""
    renamed = renamed or {}
    owner: dict[str, SessionPart] = {}
    for group in session_groups(parts):
        owner[group.summary.session_id] = group
        for member in group.members:
            owner[member] = group
    out = []
    for file in files:
        session_id = file.session_id
        home = None if session_id is None else owner.get(renamed.get(session_id, session_id))
        if home is None:
            out.append(file)
            continue
        stamps = home.events["timestamp_ns"]
        out.append(replace(file, session_group_id=home.summary.session_id,
                           session_first_event_ns=int(stamps.min()) if len(stamps) else None))
    return tuple(out)


def relative_to(files: Iterable[CutShortFile], base: Path) -> tuple[CutShortFile, ...]:
    """``files`` with their ``path`` relative to the local folder ``base`` (when a ``source`` lies under it)."""
    out = []
    for file in files:
        try:
            out.append(replace(file, path=Path(file.source).relative_to(base).as_posix()))
        except ValueError:
            out.append(replace(file, path=file.source))
    return tuple(out)
