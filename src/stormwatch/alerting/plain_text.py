"""Telemetry strings made one safe line, and times said in words, for every message renderer.

A :class:`~.findings.JobFinding` holds raw telemetry strings; each renderer escapes them for its
channel after :func:`one_line` has removed control characters and bounded the length. Times are
integer ns since the Unix epoch, shown in UTC at millisecond precision.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LINE_BREAKING = ("Cc", "Cf", "Zl", "Zp")  # control, format (bidi overrides...), line and paragraph separators


def one_line(text: object, limit: int = 300) -> str:
    """``text`` as one line: control and format characters (CR, LF, bidi overrides...) become spaces,
    and more than ``limit`` characters are cut with an ellipsis."""
    cleaned = str(text)
    if not cleaned.isprintable():  # printable text holds none: no per-character pass (bench/README.md, alerts_bench.py)
        cleaned = "".join(" " if unicodedata.category(ch) in _LINE_BREAKING else ch for ch in cleaned)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def format_time_ns(timestamp_ns: int) -> str:
    """``2023-11-14 22:13:22.830 UTC`` (millisecond precision)."""
    moment = _EPOCH + timedelta(microseconds=timestamp_ns // 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def format_offset_ns(offset_ns: int) -> str:
    """``+2.830 s`` (or ``+1 h 02 min 03.5 s``) after the job start."""
    sign, offset_ns = ("-", -offset_ns) if offset_ns < 0 else ("+", offset_ns)
    seconds = offset_ns / 1e9
    if seconds < 60:
        return f"{sign}{seconds:.3f} s"
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    head = f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"
    return f"{sign}{head} {seconds:04.1f} s"
