"""stormwatch's engine: stormlog telemetry bytes in, columnar events, sessions and diagnostics out.

Pure: no Prefect, boto3, jinja2 or network code. Callers do the IO.
"""

from __future__ import annotations

from stormwatch.analysis.markers import TimelineMarker
from stormwatch.analysis.model import DiagnosticsModel, build_model
from stormwatch.events.sessions import SessionStatus, SessionSummary
from stormwatch.load.loader import LoadResult, SessionNotFoundError, load_artifacts, load_tree
from stormwatch.load.tree import ArtifactTree, Entry, LocalTree, MemoryTree
from stormwatch.severity import Severity
from stormwatch.version import ENGINE_VERSION

__version__ = ENGINE_VERSION

__all__ = [
    "ArtifactTree",
    "DiagnosticsModel",
    "Entry",
    "LoadResult",
    "LocalTree",
    "MemoryTree",
    "SessionNotFoundError",
    "SessionStatus",
    "SessionSummary",
    "Severity",
    "TimelineMarker",
    "build_model",
    "load_artifacts",
    "load_tree",
]
