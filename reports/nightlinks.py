"""The index's window line and its links to older nights' runs files (fleet.json's ``window`` and ``nights``).

fleet.json version 2 shows the runs of a window of nights; older nights stay in storage as
runs files (Parquet, one or more per night), which the index links, newest first, with each
night's run and verdict counts. A version-1 fleet.json has neither member: nothing is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from stormwatch.reports.fields import as_int, as_list, as_mapping


@dataclass(frozen=True)
class NightLink:
    """One older night: its date, run and verdict counts, and its runs files (relative hrefs)."""

    night: str
    runs: int
    critical: int
    warning: int
    files: tuple[tuple[str, str], ...]  # (href, file name)


def window_line(fleet: Mapping[str, Any]) -> str | None:
    """``"The runs of the last 7 nights (since 2026-11-26): 1,200 of 30,000 current runs."``; None
    for a fleet.json without a window."""
    window = as_mapping(fleet.get("window"))
    days, since = as_int(window.get("days")), window.get("since")
    if days is None or not isinstance(since, str):
        return None
    shown = as_int(window.get("runs")) or 0
    total = as_int(as_mapping(fleet.get("summary")).get("jobs")) or 0
    nights = "night" if days == 1 else f"{days} nights"
    return f"The runs of the last {nights} (since {since}): {shown:,} of {total:,} current runs."


def _href(key: str) -> str:
    return "/".join(quote(part, safe="=") for part in key.split("/"))


def older_nights(fleet: Mapping[str, Any]) -> tuple[NightLink, ...]:
    """The nights the window does not show, newest first."""
    links = []
    for item in as_list(fleet.get("nights")):
        night = as_mapping(item)
        if night.get("shown") is not False or not isinstance(night.get("night"), str):
            continue
        files = tuple((_href(key), key.rsplit("/", 1)[-1]) for key in as_list(night.get("files"))
                      if isinstance(key, str))
        links.append(NightLink(night=str(night["night"]), runs=as_int(night.get("runs")) or 0,
                               critical=as_int(night.get("critical")) or 0, warning=as_int(night.get("warning")) or 0,
                               files=files))
    return tuple(links)
