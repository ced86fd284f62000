"""Browser tests skip only outside CI when Chromium is absent; under CI they fail instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reports import conftest


def test_missing_chromium_skips_outside_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(conftest, "CHROMIUM", tmp_path / "chromium")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        conftest._require_chromium()


def test_missing_chromium_fails_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(conftest, "CHROMIUM", tmp_path / "chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run in CI"):
        conftest._require_chromium()


def test_present_chromium_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    binary = tmp_path / "chromium"
    binary.write_text("")
    monkeypatch.setattr(conftest, "CHROMIUM", binary)
    monkeypatch.setenv("CI", "true")
    conftest._require_chromium()
