"""What every mutation shares: the damaged file, the damage's result, and the registry.

A mutation takes the :class:`Target` (one file of a seed shape) and a seeded
``random.Random`` and returns :class:`Mutated` (new bytes plus what the damage
implies for the invariants), or None when it does not apply to that file.
Everything is a function of the RNG, so a case id reproduces its bytes exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from random import Random

from tests.fuzz.corpus import Fmt

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Target:
    key: str
    fmt: Fmt
    data: bytes


@dataclass(frozen=True)
class Mutated:
    """A mutation's result. ``destroyed``: records the damage removed outright (no loader
    could know of them); ``must_warn``: the file is now bad, so a warning must name it;
    ``lossless``: every event must still load. ``extra`` adds files (keys below the root),
    ``removed`` deletes files, ``outside`` writes files beside the root (temp folders only)."""

    data: bytes
    note: str
    destroyed: int = 0
    must_warn: bool = False
    lossless: bool = False
    extra: Mapping[str, bytes] = field(default_factory=dict)
    removed: tuple[str, ...] = ()
    outside: Mapping[str, bytes] = field(default_factory=dict)


Mutation = Callable[[Target, Random], Mutated | None]
JSONISH = frozenset({Fmt.JSONL, Fmt.JSON, Fmt.TIMELINE, Fmt.MANIFEST})
ALL = frozenset(Fmt)
MUTATIONS: dict[str, tuple[Mutation, frozenset[Fmt]]] = {}


def mutation(name: str, fmts: frozenset[Fmt] = ALL) -> Callable[[Mutation], Mutation]:
    def register(fn: Mutation) -> Mutation:
        MUTATIONS[name] = (fn, fmts)
        return fn
    return register


def record_count(fmt: Fmt, data: bytes) -> int:
    """Records a line format holds (non-blank lines, less a CSV header); 0 for others."""
    if not fmt.line_records:
        return 0
    lines = sum(1 for line in data.split(b"\n") if line.strip())
    return max(lines - 1, 0) if fmt is Fmt.CSV else lines


def kept_before(fmt: Fmt, data: bytes, cut: int) -> int:
    """Records of a line format whose whole line (newline included) lies before byte ``cut``."""
    head = data[:cut]
    return record_count(fmt, head[: head.rfind(b"\n") + 1])


def all_gone(target: Target, data: bytes, note: str, *, must_warn: bool) -> Mutated:
    return Mutated(data, note, destroyed=record_count(target.fmt, target.data), must_warn=must_warn)


def has_line(data: bytes) -> bool:
    """A complete (newline-terminated) non-blank line: a JSONL reader must report it."""
    return any(line.strip() for line in data.split(b"\n")[:-1])
