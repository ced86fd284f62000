"""The engine's version: pyproject.toml's ``version``, read once from the installed package metadata.

Recorded in model.json (``engine_version`` and ``options.engine_version``), so an audit
re-diagnoses every job when the engine changes.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    ENGINE_VERSION = version("stormwatch")
except PackageNotFoundError:  # a source tree that was never installed
    ENGINE_VERSION = "0+unknown"

__all__ = ["ENGINE_VERSION"]
