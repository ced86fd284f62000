"""Job ids: folder names under ``jobs/`` that are safe to use as one path segment anywhere.

A job id names the job's input folder and the folder of its reports, locally and
on S3, and appears in links and notifications. It must therefore be a single,
plain path segment: one that no filesystem, URL decoder or S3 client can turn
into a different location. :func:`segment_problem` states the rules; they also
serve for every segment of a report key.

Invariants of a valid id: 1 to :data:`MAX_JOB_ID_CHARS` characters; no ``/`` or
``\\``; not ``.`` or ``..``; no percent-encoded ``/``, ``\\`` or ``.`` (also
when the ``%`` itself is encoded, e.g. ``%252f``); no control, format, line
separator or surrogate characters; no leading or trailing whitespace.
"""

from __future__ import annotations

import re
import unicodedata

MAX_JOB_ID_CHARS = 200

# %2f, %5c, %2e in any case, also with the percent sign encoded once or more (%252f).
_ENCODED_SEPARATOR = re.compile(r"%(?:25)*(?:2f|5c|2e)", re.IGNORECASE)
# Cc: C0, DEL and C1 controls; Cf: format (bidi overrides, zero-width); Zl/Zp: line and
# paragraph separators; Cs: lone surrogates (undecodable bytes in a local file name).
_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Cs": "an undecodable byte (not valid UTF-8)",
}


class InvalidJobIdError(ValueError):
    """A job id (or key segment) that is not a safe path segment; ``reason`` says why."""

    def __init__(self, raw: str, reason: str) -> None:
        self.raw = raw
        self.reason = reason
        shown = raw if len(raw) <= 60 else raw[:57] + "..."
        super().__init__(f"invalid job id {shown!r}: {reason}")


def _character_problem(raw: str) -> str | None:
    for index, char in enumerate(raw):
        if char == "\x00":
            return f"contains a NUL character at position {index}"
        category = unicodedata.category(char)
        if category in _REFUSED_CATEGORIES:
            return f"contains {_REFUSED_CATEGORIES[category]} (U+{ord(char):04X}) at position {index}"
    return None


def segment_problem(raw: str) -> str | None:
    """Why ``raw`` is not a safe single path segment, or ``None`` when it is."""
    if not raw:
        return "is empty"
    if len(raw) > MAX_JOB_ID_CHARS:
        return f"is {len(raw)} characters long (at most {MAX_JOB_ID_CHARS})"
    if raw in {".", ".."}:
        return "is a relative path segment ('.' or '..')"
    if raw.startswith("/"):
        return "is an absolute path (starts with '/')"
    if "/" in raw or "\\" in raw:
        return "contains a path separator ('/' or '\\')"
    found = _character_problem(raw)
    if found is not None:
        return found
    encoded = _ENCODED_SEPARATOR.search(raw)
    if encoded is not None:
        return f"contains a percent-encoded separator or dot ({encoded.group(0)!r})"
    if raw != raw.strip():
        return "has leading or trailing whitespace"
    return None


def validate_job_id(raw: str) -> str:
    """Return ``raw`` unchanged when it is a valid job id; raise :class:`InvalidJobIdError` otherwise."""
    problem = segment_problem(raw)
    if problem is not None:
        raise InvalidJobIdError(raw, problem)
    return raw
