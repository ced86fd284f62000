"""The first screen of a job's page: the verdict banner's plain-words sentence, its summary with session
ids shortened, and the job's load warnings with file and line (issue 28).

- **The sentence.** The banner leads with the cause its verdict comes from, in plain words:
  "Out of memory on rank 3 (gpu-node-01, GPU 3), 20.0 s into attempt 1 of 2, in train / backward"
  (:func:`~stormwatch.reports.jobcauses.lead_card`, from the attempt the page details).
- **The summary** is the engine's verdict summary, with every session id it names shortened
  (``legacy-10513d62…``) and the full id kept for hover.
- **Load warnings** are the loader's warnings: files and lines it skipped or could not read. They are
  the first ``fleet.coverage.load_warnings`` of the document's ``warnings`` (which then lists the
  cut-short sentences and the job's own); a document without a ``fleet`` member counts them from
  the rest (:func:`load_warning_texts`). Each shows its file and line when it names them
  (``<file>:<line>: <message>``). The fleet index links to them as ``report.html#load-warnings``.

Telemetry (file names, ids, messages) is plain text here; the template escapes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stormwatch.outputs.document import JobDocument
from stormwatch.reports.jobattempts import SessionId

#: Load warnings listed on the first screen; the Warnings section lists every one.
MAX_LOAD_WARNINGS_SHOWN = 5
_FILE_LINE = re.compile(r"^(?P<file>[^\n]+?):(?P<line>\d+): (?P<message>.+)$", re.DOTALL)
_OVER_CAP = "not diagnosed: over"  # the start of an attempt error the job's warnings count together


@dataclass(frozen=True)
class TextPart:
    """A piece of a sentence: ``text`` as shown; ``title`` the full value it shortens ("": none)."""

    text: str
    title: str = ""


@dataclass(frozen=True)
class LoadWarning:
    """A loader warning: ``file`` and ``line`` when it names them ("" otherwise), ``message`` the rest."""

    file: str
    line: str
    message: str


@dataclass(frozen=True)
class LoadWarnings:
    shown: tuple[LoadWarning, ...]
    total: int

    @property
    def more(self) -> int:
        return self.total - len(self.shown)


def _job_warning_count(document: JobDocument) -> int:
    """How many warnings a job document adds after its session's (see
    :func:`stormwatch.diagnose_sessions` ``_warnings``): one for sessions over the cap, one per
    attempt that could not be diagnosed or written."""
    errors = [entry.attempt.error for entry in document.attempts or () if entry.attempt.error]
    over_cap = any(error.startswith(_OVER_CAP) for error in errors)
    return int(over_cap) + sum(not error.startswith(_OVER_CAP) for error in errors)


def load_warning_texts(document: JobDocument) -> tuple[str, ...]:
    """The loader's warnings among the document's ``warnings`` (see the module docstring)."""
    if document.fleet is not None:
        return document.warnings[: document.fleet.facts.coverage.load_warnings]
    count = len(document.warnings) - len(document.cut_short) - _job_warning_count(document)
    return document.warnings[: max(count, 0)]


def _load_warning(text: str) -> LoadWarning:
    found = _FILE_LINE.match(text)
    if found is None:
        return LoadWarning(file="", line="", message=text)
    return LoadWarning(file=found["file"], line=found["line"], message=found["message"])


def load_warnings(document: JobDocument) -> LoadWarnings:
    """The job's load warnings for its first screen: the first :data:`MAX_LOAD_WARNINGS_SHOWN`, counted."""
    texts = load_warning_texts(document)
    return LoadWarnings(shown=tuple(_load_warning(text) for text in texts[:MAX_LOAD_WARNINGS_SHOWN]),
                        total=len(texts))


def with_short_ids(text: str, ids: Iterable[str]) -> tuple[TextPart, ...]:
    """``text`` cut into parts, each of ``ids`` it names (longest first) shortened with its full value
    as the part's title; ids already short stay as they are."""
    long_ids = sorted({value for value in ids if value and SessionId.of(value).short != value}, key=len, reverse=True)
    if not long_ids:
        return (TextPart(text),)
    pattern = re.compile("|".join(re.escape(value) for value in long_ids))
    parts: list[TextPart] = []
    position = 0
    for found in pattern.finditer(text):
        if found.start() > position:
            parts.append(TextPart(text[position:found.start()]))
        parts.append(TextPart(SessionId.of(found.group()).short, found.group()))
        position = found.end()
    if position < len(text):
        parts.append(TextPart(text[position:]))
    return tuple(parts)


def session_ids(document: JobDocument, *others: JobDocument | None) -> list[str]:
    """Every session id the documents name: their sessions' and their attempts'."""
    ids: list[str] = []
    for item in (document, *others):
        if item is None:
            continue
        ids.extend(session.session_id for session in item.sessions)
        ids.extend(entry.attempt.session_id for entry in item.attempts or ())
        if item.selected_session_id:
            ids.append(item.selected_session_id)
    return ids


def mentions_hidden_gap(texts: Sequence[str]) -> bool:
    """Whether any of ``texts`` speaks of the hidden gap (or hidden memory), so the page explains the
    words there."""
    return any("hidden" in text.lower() or "gap" in text.lower() for text in texts)
