"""Where a session's outputs live under its job's reports: ``sessions/<encoded id>/``.

A session id is a telemetry string: anything a writer put there. It becomes one path
segment by percent-encoding every character but the unreserved ones (``A-Z a-z 0-9 - . _ ~``),
so the segment is plain ASCII on every filesystem and S3, and it reads back as the id.
Ids that would still name another place are refused (:class:`UnsafeSessionIdError`), never
rewritten: empty, ``.`` or ``..``, holding ``/`` or ``\\``, holding text that a decoder turns
into a separator or dot (``%2f``, ``%5c``, ``%2e``, also with the ``%`` itself encoded), or
holding a lone surrogate (no UTF-8 for it), or encoding to more than
:data:`MAX_SEGMENT_CHARS` characters (a file name limit).

Links to the folder percent-encode the segment once more (its ``%`` becomes ``%25``), so a
browser asks for exactly the stored name.
"""

from __future__ import annotations

import re
from urllib.parse import quote

SESSIONS_FOLDER = "sessions"
MAX_SEGMENT_CHARS = 200
_ENCODED_SEPARATOR = re.compile(r"%(?:25)*(?:2f|5c|2e)", re.IGNORECASE)


class UnsafeSessionIdError(ValueError):
    """A session id that cannot name a folder of its own; ``reason`` says why."""

    def __init__(self, session_id: str, reason: str) -> None:
        self.session_id = session_id
        self.reason = reason
        shown = session_id if len(session_id) <= 60 else session_id[:57] + "..."
        super().__init__(f"session id {shown!r} cannot name a report folder: {reason}")


def _problem(session_id: str) -> str | None:
    if not session_id:
        return "it is empty"
    if session_id in (".", ".."):
        return "it is a relative path segment ('.' or '..')"
    if "/" in session_id or "\\" in session_id:
        return "it contains a path separator ('/' or '\\')"
    if any("\ud800" <= char <= "\udfff" for char in session_id):
        return "it holds an undecodable character (a lone surrogate)"
    found = _ENCODED_SEPARATOR.search(session_id)
    if found is not None:
        return f"it contains a percent-encoded separator or dot ({found.group(0)!r})"
    return None


def session_segment(session_id: str) -> str:
    """The folder name of ``session_id``'s outputs (percent-encoded, ASCII); raises
    :class:`UnsafeSessionIdError` for an id that could name another place."""
    problem = _problem(session_id)
    if problem is not None:
        raise UnsafeSessionIdError(session_id, problem)
    segment = quote(session_id, safe="")
    if len(segment) > MAX_SEGMENT_CHARS:
        raise UnsafeSessionIdError(session_id, f"it encodes to {len(segment)} characters (at most {MAX_SEGMENT_CHARS})")
    return segment


def session_folder(session_id: str) -> str:
    """``sessions/<segment>``: the session's outputs, relative to its job's report folder."""
    return f"{SESSIONS_FOLDER}/{session_segment(session_id)}"


def folder_href(folder: str, name: str) -> str:
    """A relative link from the job's report folder to ``folder/name`` (each segment encoded)."""
    return "/".join(quote(part, safe="") for part in (*folder.split("/"), name))
