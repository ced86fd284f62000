"""model.json's word on files whose last record was cut short (:mod:`stormwatch.load.cut_short`).

Two top-level members, never inside ``model`` (which stays the reference's):

- ``warnings`` gets one sentence per file, after the loader's warnings::

      rank 0: rank_0/telemetry.jsonl ends mid-record 20.0 s into the job; the writer stopped abruptly

  "into the job" when the file belongs to the session the document diagnoses, else "into session
  <id>" (an earlier attempt, say), counted in seconds from that session's first event; without a
  complete record in the file: "ends mid-record before its first complete record"; outside every
  session: "after its last complete record, at <UTC time>"; without a known rank the sentence
  starts at the file.
- ``cut_short``: one object per file, in load order (:func:`cut_short_entries`): ``rank``, ``file``
  (relative to the job folder), ``source`` (as the loader's warnings name it), ``session_id`` (the
  file's own), ``session_group`` (the session it is diagnosed in: ``selected_session_id`` or an
  attempt's), ``at_s`` (seconds, 3 decimals), ``last_event_ns`` and ``dropped_bytes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from stormwatch.load.cut_short import CutShortFile


def _when(file: CutShortFile, selected_session_id: str | None) -> str:
    if file.last_event_ns is None:
        return "before its first complete record"
    at_s = file.at_s
    if at_s is None:  # not placed in a session: the wall-clock time of its last complete record
        stamp = datetime.fromtimestamp(file.last_event_ns / 1e9, tz=UTC).isoformat(timespec="milliseconds")
        return f"after its last complete record, at {stamp.replace('+00:00', 'Z')}"
    where = "the job" if file.session_group_id == selected_session_id else f"session {file.session_group_id}"
    return f"{at_s:.1f} s into {where}"


def cut_short_sentence(file: CutShortFile, *, selected_session_id: str | None) -> str:
    """The plain-words warning for one cut-short file (format in the module docstring)."""
    who = "" if file.rank is None else f"rank {file.rank}: "
    return f"{who}{file.path} ends mid-record {_when(file, selected_session_id)}; the writer stopped abruptly"


def cut_short_warnings(files: Sequence[CutShortFile], *, selected_session_id: str | None) -> list[str]:
    return [cut_short_sentence(file, selected_session_id=selected_session_id) for file in files]


def cut_short_entries(files: Sequence[CutShortFile]) -> list[dict[str, Any]]:
    """The ``cut_short`` member: plain JSON data, one object per file (fields in the module docstring)."""
    return [
        {
            "rank": file.rank,
            "file": file.path,
            "source": file.source,
            "session_id": file.session_id,
            "session_group": file.session_group_id,
            "at_s": None if file.at_s is None else round(file.at_s, 3),
            "last_event_ns": file.last_event_ns,
            "dropped_bytes": file.dropped_bytes,
        }
        for file in files
    ]
