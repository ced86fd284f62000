"""A local write that crashes midway (half the bytes in the temporary file, or no rename) leaves the
previous model.json, fleet.json or notifications.jsonl whole and no temporary file behind."""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.outputs.fleet import FleetRow
from stormwatch.tasks.audit_job import AuditOptions, audit_one
from stormwatch.tasks.notify.settings import NotifySettings
from stormwatch.tasks.notify.step import notify_step
from stormwatch.tasks.publish import publish_fleet
from tests.faults.conftest import FLEET_JOBS, upload_fleet
from tests.tasks.storage.backends import Backend, local_backend


def temporary_files(root: Path) -> list[str]:
    return sorted(str(path) for path in root.rglob("*.tmp"))


@pytest.fixture
def local_fleet(tmp_path: Path, fleet_files: Path) -> tuple[Backend, list[FleetRow]]:
    """A local root audited once (plain functions): model.json per job, fleet files and a ledger."""
    backend = local_backend(tmp_path / "fleet")
    upload_fleet(backend, fleet_files)
    outcomes = [audit_one(backend.storage, job_id, options=AuditOptions()) for job_id in FLEET_JOBS]
    publish_fleet(backend.storage, [o.row for o in outcomes], generated_at=datetime.now(UTC), storage_uri="x")
    findings = [o.finding for o in outcomes if o.finding is not None]
    notify_step(backend.storage, findings, settings=NotifySettings(), now=datetime.now(UTC))
    assert backend.get("reports/notifications.jsonl")
    return backend, [o.row for o in outcomes]


def _write_model(backend: Backend, rows: list[FleetRow]) -> None:
    audit_one(backend.storage, "critical-job", options=AuditOptions(force=True))


def _write_fleet(backend: Backend, rows: list[FleetRow]) -> None:
    publish_fleet(backend.storage, rows[:1], generated_at=datetime.now(UTC), storage_uri="x")


def _write_ledger(backend: Backend, rows: list[FleetRow]) -> None:
    """An audit whose notify step folds the ledger into notifications.jsonl (rewritten whole)."""
    outcome = audit_one(backend.storage, "critical-job", options=AuditOptions(force=True))
    assert outcome.finding is not None
    moved = dataclasses.replace(outcome.finding, job_id="another-job")  # a finding the ledger has not seen
    notify_step(backend.storage, [moved], settings=NotifySettings(), now=datetime.now(UTC))


@pytest.mark.parametrize("crash", ["fsync", "replace"])
@pytest.mark.parametrize(("target", "write"), [("critical-job/model.json", _write_model),
                                               ("fleet.json", _write_fleet),
                                               ("notifications.jsonl", _write_ledger)])
def test_a_local_write_crashing_midway_keeps_the_old_file_and_no_temporary(
    local_fleet: tuple[Backend, list[FleetRow]], monkeypatch: pytest.MonkeyPatch, target: str, crash: str,
    write: Any,
) -> None:
    backend, rows = local_fleet
    key = f"reports/{target}"
    old = backend.get(key)
    name = Path(target).name
    real_fsync, real_replace = os.fsync, os.replace

    def half_then_crash(fd: int) -> None:  # the temporary file holds half the bytes when the process "dies"
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if path.name.startswith(f".{name}."):
            os.ftruncate(fd, max(1, path.stat().st_size // 2))
            raise OSError("simulated crash while writing")
        real_fsync(fd)

    def crash_on_rename(source: Any, destination: Any) -> None:
        if Path(destination).name == name:
            raise OSError("simulated crash before the rename")
        real_replace(source, destination)

    if crash == "fsync":
        monkeypatch.setattr(os, "fsync", half_then_crash)
    else:
        monkeypatch.setattr(os, "replace", crash_on_rename)
    with pytest.raises(OSError, match="simulated crash"):
        write(backend, rows)
    assert old and backend.get(key) == old
    if key.endswith(".jsonl"):
        assert all(orjson.loads(line) for line in (old or b"").splitlines())
    else:
        orjson.loads(old or b"")
    assert temporary_files(backend.storage.reports_dir) == []  # type: ignore[attr-defined]
