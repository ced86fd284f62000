"""Fixtures: model.json documents from real diagnoses, rendered pages on disk, a headless Chromium.

Browser tests skip (with the reason) only when /usr/bin/chromium is absent and CI is
unset; under CI they fail instead, so CI can never silently skip them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests import model_builders as mb
from tests.reports.builders import HOSTILE, diagnosed, write_hostile_job

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _job(factory: pytest.TempPathFactory, name: str, write: Any, *, job_id: str | None = None,
         source_name: str | None = None) -> dict[str, Any]:
    root = factory.mktemp(name)
    write(root)
    return diagnosed(root, job_id=job_id or name, source_name=source_name)


@pytest.fixture(scope="session")
def missing_ranks_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """8 ranks, ranks 2 and 6 missing; nested phases, warning/critical alerts and an OOM on every rank."""
    return _job(tmp_path_factory, "train-missing", lambda root: b.write_multi_rank_job(
        root, world_size=8, phases=b.DEFAULT_PHASES, alerts=b.DEFAULT_ALERTS, missing_ranks=[2, 6]))


@pytest.fixture(scope="session")
def collective_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """8 ranks spiking together next to an all_reduce: a confident collective finding."""
    return _job(tmp_path_factory, "collective-allreduce", mb.build_collective_synchronized)


@pytest.fixture(scope="session")
def spike_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _job(tmp_path_factory, "gap-spike", mb.build_gap_transient_spike)


@pytest.fixture(scope="session")
def drift_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _job(tmp_path_factory, "gap-drift", mb.build_gap_persistent_drift)


@pytest.fixture(scope="session")
def clean_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """4 ranks of steady ramps, no alerts: clean, no indicators."""
    return _job(tmp_path_factory, "clean-run", lambda root: b.write_multi_rank_job(root, world_size=4))


@pytest.fixture(scope="session")
def empty_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A job folder with nothing loadable: verdict ``empty``."""
    def write(root: Path) -> None:
        (root / "notes.txt").write_text("not telemetry", encoding="utf-8")
    return _job(tmp_path_factory, "empty-job", write)


@pytest.fixture(scope="session")
def hostile_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _job(tmp_path_factory, "hostile", write_hostile_job, job_id=HOSTILE, source_name=HOSTILE)


@pytest.fixture(scope="session")
def device_only_doc(tmp_path_factory: pytest.TempPathFactory, stormlog43: Path) -> dict[str, Any]:
    """Two schema-v4 ranks with device memory only (written by stormlog 0.4.3)."""
    return _job(tmp_path_factory, "v4-device-only", lambda root: mb.build_v4_device_only(root, stormlog43=stormlog43))


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {CHROMIUM} is missing: the browser tests must run in CI (apt-get install chromium)")
    pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium); these browser tests run under CI=true")


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright (no bundled browser is downloaded).

    Package-scoped: Playwright's sync API keeps an asyncio loop running on the main thread while
    it lives, and Prefect's sync calls made under a running loop return coroutines, so the browser
    must be gone before tests outside this package (flows, tasks) run, whatever the order."""
    _require_chromium()
    from playwright.sync_api import sync_playwright  # a test dependency: missing it is an error, never a skip

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
