"""Warnings about bad input: each names the file and the line (or record) at fault."""

from __future__ import annotations

from collections.abc import Sequence

#: At most this many bad lines of one file are listed one by one; the rest are counted.
MAX_LISTED_PER_FILE = 20


def describe_problems(label: str, problems: Sequence[tuple[int, str]], *, where: str = "line") -> list[str]:
    """One warning per bad line (``label:line: reason``), capped per file.

    ``problems`` holds (1-based line or record number, reason) pairs in file order.
    """
    listed = [f"{label}:{number}: {reason} ({where} skipped)" for number, reason in problems[:MAX_LISTED_PER_FILE]]
    hidden = len(problems) - MAX_LISTED_PER_FILE
    if hidden > 0:
        listed.append(f"{label}: {hidden} more bad {where}s skipped")
    return listed
