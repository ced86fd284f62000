"""HTML reports: a self-contained page per diagnosed job and a fleet index."""

from __future__ import annotations

from stormwatch.reports.render import render_index, render_job

__all__ = ["render_index", "render_job"]
