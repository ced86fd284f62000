"""stormwatch's engine: stormlog telemetry bytes in, columnar events, sessions and diagnostics out.

Pure: no Prefect, boto3, jinja2 or network code. Callers do the IO.
"""

from __future__ import annotations

from stormwatch.analysis.markers import TimelineMarker
from stormwatch.events.sessions import SessionStatus, SessionSummary
from stormwatch.load.loader import LoadResult, SessionNotFoundError, load_artifacts, load_tree
from stormwatch.load.tree import ArtifactTree, Entry, LocalTree, MemoryTree

__version__ = "0.1.0"

__all__ = [
    "ArtifactTree",
    "Entry",
    "LoadResult",
    "LocalTree",
    "MemoryTree",
    "SessionNotFoundError",
    "SessionStatus",
    "SessionSummary",
    "TimelineMarker",
    "load_artifacts",
    "load_tree",
]
