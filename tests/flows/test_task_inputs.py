"""Prefect never walks a collection that grows with the stored fleet: an unchanged audit of twenty
jobs visits as many objects of its tasks' arguments as one of two (PREFECT.md: a task's
parameters are walked object by object before it runs, unless quoted)."""

from __future__ import annotations

import importlib
import pkgutil
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prefect.utilities.collections as collections
import pytest

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.parameters import AuditParameters
from tests import builders as b


@pytest.fixture
def visits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts every call of ``visit_collection`` (it recurses through its module's global name)."""
    counted = [0]
    original = collections.visit_collection

    def counting(*args: Any, **kwargs: Any) -> Any:
        counted[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(collections, "visit_collection", counting)
    yield counted


def fleet_of(root: Path, template: Path, jobs: int) -> Path:
    for number in range(jobs):
        shutil.copytree(template, root / "jobs" / f"clean-{number:03d}")
    return root


def unchanged_audit_visits(root: Path, visits: list[int]) -> int:
    params = AuditParameters(storage=str(root))
    assert nightly_audit(params)["summary"]["diagnosed"] > 0
    visits[0] = 0
    again = nightly_audit(params)
    assert again["summary"]["diagnosed"] == 0 and again["summary"]["skipped"] > 0
    return visits[0]


@pytest.mark.usefixtures("prefect_api")
def test_an_unchanged_audit_walks_nothing_that_grows_with_the_fleet(tmp_path: Path, visits: list[int]) -> None:
    template = tmp_path / "template"
    b.write_multi_rank_job(template, world_size=2, samples=12)
    small = unchanged_audit_visits(fleet_of(tmp_path / "small", template, 2), visits)
    large = unchanged_audit_visits(fleet_of(tmp_path / "large", template, 20), visits)
    assert large == small, (small, large)


def test_every_task_skips_the_cache_and_its_input_hashing() -> None:
    from prefect import Task
    from prefect.cache_policies import NO_CACHE

    import stormwatch.tasks

    found = {}
    for module in pkgutil.walk_packages(stormwatch.tasks.__path__, prefix="stormwatch.tasks."):
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, Task):
                found[value.name] = value
    assert len(found) >= 10
    assert sorted(name for name, task in found.items() if task.cache_policy is not NO_CACHE) == []
