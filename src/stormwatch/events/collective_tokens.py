"""Collective-communication tokens, as stormlog's collective attribution spots them.

A text mentions a collective when, lower-cased and stripped, it contains one of
:data:`COLLECTIVE_TOKENS` either as written (``-`` read as ``_``) or with every
``_`` removed from both sides (so ``AllReduce`` and ``all-reduce`` both count).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

COLLECTIVE_TOKENS: tuple[str, ...] = (
    "nccl",
    "collective",
    "communication",
    "all_reduce",
    "allreduce",
    "all_gather",
    "allgather",
    "reduce_scatter",
    "reducescatter",
    "broadcast",
    "barrier",
)
_COLLAPSED = tuple(sorted({token.replace("_", "") for token in COLLECTIVE_TOKENS}))
#: Matches a lower-cased text after ``-`` and ``_`` are removed: a superset test
#: that is exact, because every token's collapsed form is among these words.
COLLAPSED_PATTERN = "|".join(_COLLAPSED)
_COLLAPSED_RE = re.compile(COLLAPSED_PATTERN)


def has_collective_token(text: str) -> bool:
    """Whether ``text`` mentions a collective (stormlog's rule)."""
    lowered = text.strip().lower()
    if not lowered:
        return False
    collapsed = lowered.replace("-", "_").replace("_", "")
    return _COLLAPSED_RE.search(collapsed) is not None


def iter_string_values(value: Any) -> Iterable[str]:
    """Every string inside nested mappings, lists, tuples and sets (keys excluded)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for nested in value.values():
            yield from iter_string_values(nested)
    elif isinstance(value, list | tuple | set):
        for item in value:
            yield from iter_string_values(item)


def has_collective_token_in_values(value: Any) -> bool:
    return any(has_collective_token(text) for text in iter_string_values(value))
