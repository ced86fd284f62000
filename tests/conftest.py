"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reference_model import ensure_stormlog43


@pytest.fixture(scope="session")
def stormlog43() -> Path:
    """A private stormlog 0.4.3 copy under .pytest_cache (pip-installed on first use),
    the reference for schema-v4 data; import it only in a subprocess."""
    return ensure_stormlog43()
