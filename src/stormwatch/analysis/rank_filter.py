"""Rank filter expressions: ``all``, ``*``, or a comma list of ranks and ``a-b`` ranges.

Semantics are stormlog's ``parse_rank_filter``: blank, ``all`` and ``*`` select
every available rank; ranges are inclusive; ranks not available are dropped
silently; nothing is selected when nothing is available. A malformed
expression raises :class:`RankFilterError` naming the bad piece.
"""

from __future__ import annotations

from collections.abc import Iterable


class RankFilterError(ValueError):
    """A rank filter expression that cannot be read."""


def _piece(chunk: str, available: set[int]) -> Iterable[int]:
    if "-" not in chunk:
        return (_number(chunk, chunk),)
    start_text, end_text = chunk.split("-", 1)
    if not start_text.strip() or not end_text.strip():
        raise RankFilterError(f"invalid rank range {chunk!r}: expected START-END")
    start, end = _number(start_text, chunk), _number(end_text, chunk)
    if start > end:
        raise RankFilterError(f"invalid rank range {chunk!r}: start is after end")
    return (rank for rank in available if start <= rank <= end)  # "0-10**12" costs nothing


def _number(text: str, chunk: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RankFilterError(f"invalid rank {chunk!r}: not an integer") from None


def parse_rank_filter(expression: str | None, available_ranks: Iterable[int]) -> set[int]:
    """The available ranks that ``expression`` selects."""
    available = set(available_ranks)
    if not available:
        return set()
    text = (expression or "").strip().lower()
    if text in ("", "all", "*"):
        return available
    selected: set[int] = set()
    for chunk in (part.strip() for part in text.split(",")):
        if chunk:
            selected.update(_piece(chunk, available))
    return selected & available


def format_ranks(ranks: Iterable[int]) -> str:
    """``0,2,4-7`` for [0, 2, 4, 5, 6, 7]: the comma list :func:`parse_rank_filter` reads."""
    out: list[str] = []
    run: list[int] = []
    for rank in sorted(ranks):
        if run and rank == run[-1] + 1:
            run.append(rank)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [rank]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)
