"""model.json's word on files whose last record was cut short (:mod:`stormwatch.load.cut_short`).

Two top-level members, never inside ``model`` (which stays the reference's):

- ``warnings`` gets one sentence per file, after the loader's warnings::

      rank 0: rank_0/telemetry.jsonl ends mid-record 20.0 s into the job; the writer stopped abruptly

  "into the job" when the file belongs to the session the document diagnoses, else "into session
  <id>" (an earlier attempt, say), counted in seconds from that session's first event; without a
  complete record in the file: "ends mid-record before its first complete record"; outside every
  session: "after its last complete record, at <UTC time>"; without a known rank the sentence
  starts at the file.
- ``cut_short``: one :class:`CutShortEntry` per file, in load order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stormwatch.load.cut_short import CutShortFile
from stormwatch.outputs.json_members import Members

#: Decimals of a cut-short entry's ``at_s``.
AT_S_DECIMALS = 3


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


@dataclass(frozen=True, kw_only=True, slots=True)
class CutShortEntry:
    """One entry of model.json's ``cut_short``: a file whose last record was cut short.

    ``file``: relative to the job folder; ``source``: as the loader's warnings name it; ``session_id``:
    the file's own session; ``session_group``: the session it is diagnosed in (``selected_session_id``
    or an attempt's); ``at_s``: seconds from that session's first event to the file's last complete
    record, rounded to :data:`AT_S_DECIMALS` decimals (None: not placed in a session);
    ``last_event_ns``: ns since the epoch (None: no complete record); ``dropped_bytes``: bytes not read.
    """

    rank: int | None
    file: str
    source: str
    session_id: str | None
    session_group: str | None
    at_s: float | None
    last_event_ns: int | None
    dropped_bytes: int

    @classmethod
    def of(cls, file: CutShortFile) -> CutShortEntry:
        return cls(rank=file.rank, file=file.path, source=file.source, session_id=file.session_id,
                   session_group=file.session_group_id,
                   at_s=None if file.at_s is None else round(file.at_s, AT_S_DECIMALS),
                   last_event_ns=file.last_event_ns, dropped_bytes=file.dropped_bytes)

    def as_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "file": self.file, "source": self.source, "session_id": self.session_id,
                "session_group": self.session_group, "at_s": self.at_s, "last_event_ns": self.last_event_ns,
                "dropped_bytes": self.dropped_bytes}

    @classmethod
    def from_json(cls, members: Members) -> CutShortEntry:
        """Raises :class:`~stormwatch.outputs.json_members.MemberError` naming a malformed member."""
        return cls(rank=members.optional_integer("rank"), file=members.text("file"), source=members.text("source"),
                   session_id=members.optional_text("session_id"),
                   session_group=members.optional_text("session_group"), at_s=members.optional_number("at_s"),
                   last_event_ns=members.optional_integer("last_event_ns"),
                   dropped_bytes=members.integer("dropped_bytes"))

