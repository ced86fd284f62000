"""The line index against a plain Python split, on buffers shaped to hit its edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from stormwatch.formats import lines
from stormwatch.formats.lines import index_lines


def _expected(data: bytes) -> tuple[list[int], list[int], list[int]]:
    """Starts, ends (a trailing CR dropped) and 1-based numbers of the non-blank lines."""
    starts, ends, numbers = [], [], []
    offset = 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        end = offset + len(line)
        if line.strip(b" \t\r\n"):
            starts.append(offset)
            ends.append(end - 1 if line.endswith(b"\r") else end)
            numbers.append(number)
        offset = end + 1
    return starts, ends, numbers


def _record(width: int) -> bytes:
    return b'{"k":"' + b"x" * max(width - 8, 0) + b'"}'


CASES = {
    "empty": b"",
    "one line, no newline": _record(30),
    "one line, newline": _record(30) + b"\n",
    "blank lines inside one 8-byte word": b"{}\n\n\n{}\n",
    "newlines only": b"\n" * 19,
    "whitespace lines": b"{}\n  \n\t\r\n{}\r\n \n",
    "crlf endings": b"".join(_record(40) + b"\r\n" for _ in range(5)),
    "leading blank bytes on a solid line": b'  {"a":1}\n{"b":2}',
    "short lines, every word several newlines": b"{}\n" * 1000,
    "a blank line after every record": b"".join(_record(60) + b"\n\n" for _ in range(300)),
    "one word of two newlines among long lines": _record(500) + b"\n" + _record(500) + b"\n\n" + _record(500),
    "non-ASCII": '{"k":"Grüße"}\n{"k":"∑"}\n'.encode(),
}


@pytest.mark.parametrize("name", list(CASES))
def test_index_matches_a_plain_split(name: str) -> None:
    data = CASES[name]
    index = index_lines(data)
    starts, ends, numbers = _expected(data)
    assert index.starts.tolist() == starts
    assert index.ends.tolist() == ends
    assert index.numbers.tolist() == numbers
    assert index.ascii == data.isascii()


@pytest.mark.parametrize("scan_bytes", [8, 16, 64, 4096])
@pytest.mark.parametrize("seed", range(4))
def test_index_across_slice_and_word_boundaries(monkeypatch: pytest.MonkeyPatch, scan_bytes: int, seed: int) -> None:
    """Random line widths (blank and CRLF lines among them) over slices as small as one word."""
    monkeypatch.setattr(lines, "_SCAN_BYTES", scan_bytes)
    rng = np.random.default_rng(seed)
    pieces = []
    for width in rng.integers(0, 40, size=400).tolist():
        pieces.append(b"" if width < 4 else _record(width))
        pieces.append(b"\r\n" if width % 5 == 0 else b"\n")
    data = b"".join(pieces)[: -int(rng.integers(0, 3))]
    index = index_lines(data)
    starts, ends, numbers = _expected(data)
    assert (index.starts.tolist(), index.ends.tolist(), index.numbers.tolist()) == (starts, ends, numbers)
