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
#: The buffer is scanned in slices of this many bytes (a multiple of 8), so that the
#: scratch mask stays in cache (a mask as large as a big file costs more in page
#: faults than the comparison itself).
_SCAN_BYTES = 1 << 20
#: Little-endian words, so that byte ``i`` of a word is its bits ``8i..8i+7`` on any host.
_WORD = np.dtype("<u8")
_ONE = np.uint64(1)


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


def _newlines_in(mask: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Offsets of the set bytes of ``mask`` (0/1 bytes; ``words`` is the same memory read
    8 bytes at a time, covering the mask's whole words).

    Newlines are sparse (one per line of hundreds of bytes), so the words holding
    one are found first, at an eighth of the cost of testing every byte; a word with
    a single set byte is a power of two, whose base-2 logarithm (exact in float64)
    over 8 is that byte's place. The few words with several (a blank line) are split
    byte by byte; when there are many (short or blank lines throughout), every byte is
    tested at once instead, which is then as cheap.
    """
    hot = np.flatnonzero(words != 0)
    values = words[hot]
    several = np.flatnonzero(values & (values - _ONE))
    if several.size * 8 > hot.size:  # dense newlines (short or blank lines): every byte at once
        return np.flatnonzero(mask.view(bool))
    offsets = hot * 8 + (np.log2(values.astype(np.float64)) / 8).astype(np.int64)
    if several.size:  # the few such words byte by byte
        crowded = hot[several]
        word_rows, places = np.nonzero(mask[: words.size * 8].reshape(-1, 8)[crowded])
        offsets[several] = -1
        offsets = np.sort(np.concatenate([offsets[offsets >= 0], crowded[word_rows] * 8 + places]))
    tail = np.flatnonzero(mask[words.size * 8 :].view(bool)) + words.size * 8
    return np.concatenate([offsets, tail]) if tail.size else offsets


def _scan(buffer: np.ndarray) -> tuple[np.ndarray, bool]:
    """Offsets of the newline bytes, and whether all bytes are ASCII."""
    scratch = np.empty(min(buffer.size, _SCAN_BYTES), dtype=np.uint8)
    whole_words = scratch[: scratch.size // 8 * 8].view(_WORD)
    found = [np.zeros(0, dtype=np.int64)]
    ascii = True
    for start in range(0, buffer.size, _SCAN_BYTES):
        part = buffer[start : start + _SCAN_BYTES]
        mask = scratch[: part.size]
        np.equal(part, 10, out=mask.view(bool))
        found.append(_newlines_in(mask, whole_words[: part.size // 8]) + start)
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
