"""Human units for reports: IEC bytes (``1.50 GiB``), durations in seconds, UTC times.

Inputs are raw model.json values: bytes as ints (or None when a counter is
missing), times as ns since the Unix epoch, ISO 8601 strings from the pipeline.
Every formatter returns plain text (escaping is the template's job) and
``NOT_AVAILABLE`` for None, so a table never shows ``None``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

NOT_AVAILABLE = "—"
_IEC_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
NS_PER_S = 1_000_000_000


def byte_unit(magnitude_bytes: float) -> tuple[str, int]:
    """The IEC unit that shows ``magnitude_bytes`` as 1 <= value < 1024, and its size in bytes."""
    power = 0
    magnitude = abs(magnitude_bytes)
    while magnitude >= 1024 and power < len(_IEC_UNITS) - 1:
        magnitude /= 1024
        power += 1
    return _IEC_UNITS[power], 1024**power


def format_bytes(value_bytes: float | None, *, signed: bool = False) -> str:
    """``1.50 GiB``, ``256 MiB``, ``512 B``; ``signed`` prefixes ``+`` to positive values (deltas)."""
    if value_bytes is None or (isinstance(value_bytes, float) and not math.isfinite(value_bytes)):
        return NOT_AVAILABLE
    unit, size = byte_unit(value_bytes)
    scaled = value_bytes / size
    sign = "+" if signed and value_bytes > 0 else ""
    if unit == "B":
        return f"{sign}{int(value_bytes)} B"
    digits = 2 if abs(scaled) < 10 else 1 if abs(scaled) < 100 else 0
    return f"{sign}{scaled:.{digits}f} {unit}"


def format_duration_s(seconds: float | None) -> str:
    """``0.250 s``, ``12.5 s``, ``3 min 04.5 s``, ``2 h 03 min 04 s``."""
    if seconds is None or not math.isfinite(seconds):
        return NOT_AVAILABLE
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 10:
        return f"{sign}{seconds:.3f} s"
    if seconds < 60:
        return f"{sign}{seconds:.1f} s"
    minutes, rest = divmod(seconds, 60)
    if minutes < 60:
        return f"{sign}{int(minutes)} min {rest:04.1f} s"
    hours, minutes = divmod(int(minutes), 60)
    return f"{sign}{hours} h {minutes:02d} min {int(rest):02d} s"


def format_offset(timestamp_ns: int | None, origin_ns: int | None) -> str:
    """Time since job start: ``+2.000 s``; the absolute UTC time when there is no origin."""
    if timestamp_ns is None:
        return NOT_AVAILABLE
    if origin_ns is None:
        return format_utc_ns(timestamp_ns)
    text = format_duration_s((timestamp_ns - origin_ns) / NS_PER_S)
    return text if text.startswith("-") else f"+{text}"


def format_utc_ns(timestamp_ns: int | None) -> str:
    """``2023-11-14 22:13:20.500 UTC`` (ms precision)."""
    if timestamp_ns is None:
        return NOT_AVAILABLE
    try:
        moment = datetime.fromtimestamp(timestamp_ns / NS_PER_S, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return f"{timestamp_ns} ns"
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def format_iso(text: str | None) -> str:
    """An ISO 8601 time as ``2026-11-30 19:12:22 UTC``; unparseable text is returned as is."""
    if not text:
        return NOT_AVAILABLE
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return str(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
        return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def format_confidence(confidence: float | None) -> str:
    """A 0..1 confidence as ``51 %``."""
    if confidence is None or not isinstance(confidence, int | float) or not math.isfinite(confidence):
        return NOT_AVAILABLE
    return f"{confidence * 100:.0f} %"


def format_count(value: int | None) -> str:
    """``100,000``."""
    return NOT_AVAILABLE if value is None else f"{value:,}"


def format_elapsed_s(seconds: float | None) -> str:
    """Time into a job, for a sentence: ``0.3 s``, ``20.0 s``, ``3 min 04 s``, ``2 h 03 min``."""
    if seconds is None or not math.isfinite(seconds):
        return NOT_AVAILABLE
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 59.95:
        return f"{sign}{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{sign}{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours} h {minutes:02d} min"


SHORT_ID_CHARS = 8  # characters of an id kept by short_id (after a ``legacy-`` prefix)
LEGACY_PREFIX = "legacy-"


def short_id(value: str) -> str:
    """A long session id shortened for a page: its first :data:`SHORT_ID_CHARS` characters and
    ``…`` (``legacy-10513d62…``: the ``legacy-`` prefix is kept whole); short ids as they are.
    index.js shortens ids the same way."""
    prefix = LEGACY_PREFIX if value.startswith(LEGACY_PREFIX) else ""
    body = value[len(prefix):]
    return value if len(body) <= SHORT_ID_CHARS + 1 else f"{prefix}{body[:SHORT_ID_CHARS]}…"
