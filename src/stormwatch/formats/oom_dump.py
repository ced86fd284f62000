"""stormlog's OOM flight-recorder dumps: evidence about an out-of-memory error, not more telemetry.

On an OOM, stormlog's ``OOMFlightRecorder`` (0.4.x) copies its ring buffer of recent tracker
events out to ``oom_dump_<UTC stamp>_<pid>_<backend>_<seq>/``: ``events.json`` (those events, in
the legacy record shape), ``metadata.json`` (the exception, the backend, the session, and the
tracker's ``custom_metadata``: rank, the device sample at the time), ``environment.json`` and
``manifest.json``. The events are copies of what the job's sink or exports already hold, so the
loader counts a dump's event only when no other file of the job holds its session and timestamp
(:mod:`stormwatch.load.loader`); a dump alone still gives the job its events. Its metadata is read
here into an :class:`OomDump`, which says in words what was being allocated and what was free.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

import orjson

DUMP_FOLDER_PREFIX = "oom_dump_"
DUMP_EVENTS_NAME = "events.json"
DUMP_METADATA_NAME = "metadata.json"

_GIB = 1024**3
_UNITS = {"b": 1, "kib": 1024, "mib": 1024**2, "gib": _GIB, "tib": 1024**4,
          "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}
#: PyTorch's message: "Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 80.00 GiB of which 1.10 GiB is free."
_TRIED = re.compile(r"tried to allocate\s+([0-9.]+)\s*([kmgt]i?b|b)\b", re.IGNORECASE)
_CAPACITY = re.compile(r"total capacity of\s+([0-9.]+)\s*([kmgt]i?b|b)\b", re.IGNORECASE)
_FREE = re.compile(r"of which\s+([0-9.]+)\s*([kmgt]i?b|b)\s+is free", re.IGNORECASE)


def is_dump_events(key: str) -> bool:
    """Whether ``key`` (a path in a job's tree) is a dump's ``events.json``."""
    folder, name = posixpath.split(key)
    return name == DUMP_EVENTS_NAME and posixpath.basename(folder).startswith(DUMP_FOLDER_PREFIX)


def metadata_key(events_key: str) -> str:
    """The ``metadata.json`` beside a dump's ``events.json``."""
    return posixpath.join(posixpath.dirname(events_key), DUMP_METADATA_NAME)


@dataclass(frozen=True)
class OomDump:
    """What one dump says about its OOM. Sizes in bytes (None: not recorded); ``folder``: the dump's
    folder in the job's tree; ``message``: the exception text as raised (telemetry: escape it)."""

    folder: str
    rank: int | None
    session_id: str | None
    backend: str | None
    exception_type: str | None
    message: str | None
    context: str | None
    requested_bytes: int | None
    free_bytes: int | None
    total_bytes: int | None

    def sentence(self) -> str:
        """``out of memory on rank 3: tried to allocate 2.0 GiB with 1.1 GiB free of 80 GiB``."""
        where = "out of memory" if self.rank is None else f"out of memory on rank {self.rank}"
        parts = []
        if self.requested_bytes is not None:
            parts.append(f"tried to allocate {_gib(self.requested_bytes)}")
        if self.free_bytes is not None:
            free = f"with {_gib(self.free_bytes)} free"
            parts.append(free if self.total_bytes is None else f"{free} of {_gib(self.total_bytes)}")
        elif self.total_bytes is not None:
            parts.append(f"on a {_gib(self.total_bytes)} device")
        return f"{where}: {' '.join(parts)}" if parts else where

    def as_json(self) -> dict[str, Any]:
        return {"folder": self.folder, "rank": self.rank, "session_id": self.session_id, "backend": self.backend,
                "exception_type": self.exception_type, "message": self.message, "context": self.context,
                "requested_bytes": self.requested_bytes, "free_bytes": self.free_bytes,
                "total_bytes": self.total_bytes, "sentence": self.sentence()}

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> OomDump:
        return cls(folder=str(item["folder"]), rank=_int(item.get("rank")), session_id=_text(item.get("session_id")),
                   backend=_text(item.get("backend")), exception_type=_text(item.get("exception_type")),
                   message=_text(item.get("message")), context=_text(item.get("context")),
                   requested_bytes=_int(item.get("requested_bytes")), free_bytes=_int(item.get("free_bytes")),
                   total_bytes=_int(item.get("total_bytes")))


def read_dump(folder: str, data: bytes) -> OomDump:
    """A dump from its ``metadata.json`` bytes; raises ``ValueError`` when they are not a JSON object.
    The exception text gives what was asked for, and free and total memory as the allocator saw them
    when it failed; the tracker's device sample, taken just after, gives them when the text does not."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    custom = document.get("custom_metadata")
    custom = custom if isinstance(custom, dict) else {}
    message = _text(document.get("exception_message"))
    return OomDump(
        folder=folder,
        rank=_int(custom.get("rank")),
        session_id=_text(document.get("session_id")) or _text(custom.get("session_id")),
        backend=_text(document.get("backend")),
        exception_type=_text(document.get("exception_type")),
        message=message,
        context=_text(document.get("context")),
        requested_bytes=_size(_TRIED, message),
        free_bytes=_first(_size(_FREE, message), _int(custom.get("sample_free_bytes"))),
        total_bytes=_first(_size(_CAPACITY, message), _int(custom.get("sample_total_bytes")),
                           _int(custom.get("total_memory_bytes"))),
    )


def foreign_records(data: bytes, session_id: str) -> list[int]:
    """1-based numbers of the records of a dump's ``events.json`` (a JSON array) that name a session
    other than ``session_id`` (the dump's, from its metadata); none when the file is no array (the
    loader says so when it reads it)."""
    try:
        records = orjson.loads(data)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(records, list):
        return []
    return [number for number, record in enumerate(records, start=1)
            if isinstance(record, dict) and record.get("session_id") not in (None, session_id)]


def _gib(value: int) -> str:
    """Bytes in GiB, one decimal, none when whole (``2.0 GiB``, ``80 GiB``)."""
    gib = value / _GIB
    return f"{gib:.0f} GiB" if gib >= 10 and abs(gib - round(gib)) < 0.05 else f"{gib:.1f} GiB"


def _size(pattern: re.Pattern[str], text: str | None) -> int | None:
    found = pattern.search(text or "")
    return None if found is None else round(float(found.group(1)) * _UNITS[found.group(2).lower()])


def _first(*values: int | None) -> int | None:
    return next((value for value in values if value is not None), None)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
