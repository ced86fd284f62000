"""Where the non-blank lines of a byte buffer start and end, found with numpy."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

#: A file's bytes in memory: ``bytes``, or a read-only mapping of them (which
#: supports ``find``, ``rfind``, ``len`` and slicing to ``bytes``, as used here).
Buffer: TypeAlias = bytes | mmap.mmap

_BLANK_BYTES = np.zeros(256, dtype=bool)
_BLANK_BYTES[[ord(" "), ord("\t"), ord("\r"), ord("\n")]] = True
#: The buffer is scanned in slices of this many bytes, so that the scratch mask stays in
#: cache (a mask as large as a big file costs more in page faults than the comparison itself).
_SCAN_BYTES = 1 << 20


@dataclass(frozen=True)
class LineIndex:
    """Non-blank lines: byte offsets ``[starts[i], ends[i])`` (``\\r\\n`` excluded)
    and 1-based line numbers, in file order; ``ascii`` tells whether every byte of
    the buffer is below 0x80 (so that it is valid UTF-8 without further checks)."""

    starts: np.ndarray
    ends: np.ndarray
    numbers: np.ndarray
    ascii: bool = False

    @property
    def count(self) -> int:
        return int(self.starts.size)


def _scan(buffer: np.ndarray) -> tuple[np.ndarray, bool]:
    """Offsets of the newline bytes, and whether all bytes are ASCII."""
    scratch = np.empty(min(buffer.size, _SCAN_BYTES), dtype=bool)
    found = [np.zeros(0, dtype=np.int64)]
    ascii = True
    for start in range(0, buffer.size, _SCAN_BYTES):
        part = buffer[start : start + _SCAN_BYTES]
        mask = scratch[: part.size]
        np.equal(part, 10, out=mask)
        found.append(np.flatnonzero(mask) + start)
        ascii = ascii and int(part.max()) < 0x80
    return np.concatenate(found), ascii


def index_lines(data: Buffer) -> LineIndex:
    buffer = np.frombuffer(data, dtype=np.uint8)
    newlines, ascii = _scan(buffer)
    starts = np.concatenate([[0], newlines + 1]).astype(np.int64)
    ends = np.concatenate([newlines, [buffer.size]]).astype(np.int64)
    if buffer.size and buffer[-1] == 10:
        starts, ends = starts[:-1], ends[:-1]
    # A line is solid when its first byte is not blank; the rare line that starts
    # with blank bytes is checked on its own.
    keep = ends > starts
    first = np.zeros(starts.size, dtype=np.uint8)
    first[keep] = buffer[starts[keep]]
    doubtful = np.flatnonzero(keep & _BLANK_BYTES[first])
    for index in doubtful.tolist():
        keep[index] = bool(data[starts[index] : ends[index]].strip(b" \t\r\n"))
    numbers = np.flatnonzero(keep) + 1
    starts, ends = starts[keep], ends[keep]
    # Drop a trailing carriage return so each span is exactly one JSON text.
    has_cr = (ends > starts) & (buffer[np.maximum(ends - 1, 0)] == 13) if buffer.size else keep[:0]
    ends = ends - has_cr.astype(np.int64)
    return LineIndex(starts=starts, ends=ends, numbers=numbers.astype(np.int64), ascii=ascii)
