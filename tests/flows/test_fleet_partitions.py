"""Fleet state kept per night: runs files, a bounded fleet.json, the index window, retention, version 1."""

from __future__ import annotations

import hashlib
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pandas as pd
import pytest

from stormwatch.flows.audit import nightly_audit
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.post_job import post_job
from stormwatch.outputs.fleet import FleetRow
from stormwatch.tasks import history as history_store
from stormwatch.tasks.comparisons import REUSED_SECTIONS
from tests import builders as b
from tests.tasks.storage.backends import Backend

pytestmark = pytest.mark.usefixtures("prefect_api")

NIGHT_1 = datetime(2026, 11, 1, 2, tzinfo=UTC)


def add_runs(tmp: Path, backend: Backend, names: list[str]) -> None:
    for name in names:
        if "crit" in name:
            b.write_multi_rank_job(tmp / name, world_size=2, alerts=b.DEFAULT_ALERTS, phases=b.DEFAULT_PHASES)
        else:
            b.write_multi_rank_job(tmp / name, world_size=2, samples=12)
        backend.upload(tmp / name, f"jobs/{name}")


def run(backend: Backend, at: datetime, **options: object) -> dict:
    return nightly_audit(AuditParameters(storage=backend.settings.uri, endpoint_url=backend.settings.endpoint_url,
                                         as_of=at, **options))


def fleet(backend: Backend) -> dict:
    return orjson.loads(backend.get("reports/fleet.json") or b"{}")


def runs_files(backend: Backend) -> list[str]:
    return sorted(key for key in backend.stored_keys() if key.startswith("reports/_fleet/runs/"))


def input_hashes(backend: Backend) -> dict[str, str]:
    return {key: hashlib.sha256(backend.get(key) or b"").hexdigest()
            for key in sorted(backend.stored_keys()) if key.startswith("jobs/")}


def test_each_night_appends_its_runs_and_fleet_json_shows_the_window(backend: Backend, tmp_path: Path) -> None:
    add_runs(tmp_path, backend, ["train-crit-1", "train-ok-1"])
    run(backend, NIGHT_1, index_days=3)
    first = runs_files(backend)
    assert len(first) == 1 and "date=2026-11-01" in first[0]
    add_runs(tmp_path, backend, ["train-ok-2"])
    later = NIGHT_1 + timedelta(days=5)
    result = run(backend, later, index_days=3)
    assert result["summary"]["jobs"] == 3 and result["summary"]["skipped"] == 2
    assert result["critical"] == ["train-crit-1"] and result["exit_code"] in (0, 3)
    files = runs_files(backend)
    assert first[0] in files and len(files) == 2  # night 1's file is never rewritten
    document = fleet(backend)
    assert document["schema_version"] == 2
    assert [job["job_id"] for job in document["jobs"]] == ["train-ok-2"]  # the window: 3 nights
    assert document["window"] == {"days": 3, "since": "2026-11-04", "runs": 1}
    nights = {night["night"]: night for night in document["nights"]}
    assert nights["2026-11-01"]["shown"] is False and nights["2026-11-01"]["runs"] == 2
    assert nights["2026-11-01"]["critical"] == 1 and nights["2026-11-06"]["shown"] is True
    assert document["latest"]["train-ok"]["job_id"] == "train-ok-2"
    assert document["latest"]["train-crit"]["job_id"] == "train-crit-1"
    index = (backend.get("reports/index.html") or b"").decode()
    assert "Older nights" in index and "_fleet/runs/date=2026-11-01/" in index
    assert "The runs of the last 3 nights (since 2026-11-04): 1 of 3 current runs." in index
    ranks = pd.read_parquet(io.BytesIO(backend.get("reports/fleet.parquet") or b""))
    assert set(ranks["job_id"]) == {"train-ok-2"}


def test_fleet_json_lists_each_job_names_newest_run_and_the_index_every_run(
        backend: Backend, tmp_path: Path) -> None:
    add_runs(tmp_path, backend, ["train-crit-1", "train-ok-1"])
    run(backend, NIGHT_1)
    add_runs(tmp_path, backend, ["train-crit-2", "train-ok-2", "train-ok-3"])
    run(backend, NIGHT_1 + timedelta(days=1))
    data = backend.get("reports/fleet.json") or b""
    assert b"\n" not in data  # not indented: its size is the rows'
    document = orjson.loads(data)
    assert document["window"]["runs"] == 5 and document["summary"]["jobs"] == 5
    newest = {"train-crit": "train-crit-2", "train-ok": "train-ok-3"}
    assert [job["job_id"] for job in document["jobs"]] == sorted(newest.values())  # one per job name
    assert {name: item["job_id"] for name, item in document["latest"].items()} == newest
    assert [item["job_id"] for item in document["attention"]] == ["train-crit-2"]  # train-crit-1 is superseded
    index = (backend.get("reports/index.html") or b"").decode()
    assert all(f"train-{run_id}" in index for run_id in ("crit-1", "crit-2", "ok-1", "ok-2", "ok-3"))


def test_attention_lists_critical_runs_of_the_window_first(backend: Backend, tmp_path: Path) -> None:
    add_runs(tmp_path, backend, ["a-ok-1", "b-crit-1"])
    run(backend, NIGHT_1)
    attention = fleet(backend)["attention"]
    assert [item["job_id"] for item in attention] == ["b-crit-1"] and attention[0]["verdict"] == "critical"


def test_a_damaged_runs_file_is_named_moved_and_its_runs_diagnosed_once(backend: Backend, tmp_path: Path) -> None:
    add_runs(tmp_path, backend, ["train-ok-1"])
    run(backend, NIGHT_1)
    (key,) = runs_files(backend)
    backend.put(key, b"PAR1 torn")
    result = run(backend, NIGHT_1 + timedelta(days=1))
    assert any(key.removeprefix("reports/") in line and "not a readable runs file" in line
               for line in result["repaired"])
    assert result["summary"]["diagnosed"] == 1 and result["summary"]["jobs"] == 1  # counted once
    assert key not in runs_files(backend)
    assert any(k.startswith("reports/damaged/_fleet/runs/") for k in backend.stored_keys())
    assert run(backend, NIGHT_1 + timedelta(days=2))["summary"]["skipped"] == 1


def test_retention_prunes_old_runs_and_their_reports_never_inputs(backend: Backend, tmp_path: Path) -> None:
    add_runs(tmp_path, backend, ["old-ok-1"])
    run(backend, NIGHT_1)
    add_runs(tmp_path, backend, ["new-ok-1"])
    before = input_hashes(backend)
    kept = run(backend, NIGHT_1 + timedelta(days=10))  # no flag: nothing pruned
    assert kept["summary"]["jobs"] == 2 and "reports/old-ok-1/model.json" in backend.stored_keys()
    result = run(backend, NIGHT_1 + timedelta(days=11), retention_days=5)
    assert input_hashes(backend) == before
    keys = backend.stored_keys()
    assert not any(key.startswith("reports/old-ok-1/") for key in keys)
    assert not any("date=2026-11-01" in key for key in runs_files(backend))
    assert result["summary"]["jobs"] == 1
    assert fleet(backend)["retention"]["pruned"]["retired_runs"] == 1
    again = run(backend, NIGHT_1 + timedelta(days=12), retention_days=5)  # a retired run is left alone
    assert again["summary"]["diagnosed"] == 0 and again["summary"]["jobs"] == 1


def test_a_version_1_fleet_json_is_read_and_migrated(backend: Backend, tmp_path: Path) -> None:
    add_runs(tmp_path, backend, ["train-ok-1"])
    run(backend, NIGHT_1)
    document = fleet(backend)
    (row,) = [FleetRow.from_json(item) for item in document["jobs"]]
    ranks = pd.read_parquet(io.BytesIO(backend.get("reports/fleet.parquet") or b""))
    for key in runs_files(backend):
        backend.storage.delete_report(key.removeprefix("reports/"))
    old = {"schema_version": 1, "generated_at": document["generated_at"], "storage": document["storage"],
           "summary": document["summary"], "jobs": [{**row.as_json(), "status": "diagnosed"}]}
    backend.put("reports/fleet.json", orjson.dumps(old))
    assert set(ranks["job_id"]) == {"train-ok-1"}  # fleet.parquet as version 1 wrote it: every job's ranks
    result = run(backend, NIGHT_1 + timedelta(days=1))
    assert result["summary"]["skipped"] == 1 and result["summary"]["diagnosed"] == 0
    assert runs_files(backend)  # the version-1 rows now live in a runs file
    assert fleet(backend)["schema_version"] == 2


def test_an_audit_with_nothing_new_takes_the_comparisons_from_fleet_json(
        backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_runs(tmp_path, backend, ["train-crit-1", "train-ok-1"])
    run(backend, NIGHT_1)
    add_runs(tmp_path, backend, ["train-ok-2"])
    night_2 = NIGHT_1 + timedelta(days=1)
    run(backend, night_2)
    computed = fleet(backend)
    assert {trend["night"]: trend for trend in computed["trends"]}[night_2.date().isoformat()]["jobs"] == 1
    reads: list[object] = []
    original = history_store.read_history
    monkeypatch.setattr(history_store, "read_history",
                        lambda *a, **k: reads.append(k.get("names")) or original(*a, **k))

    run(backend, night_2)  # nothing changed, the same audit time: the history is not read
    reused = fleet(backend)
    assert reads == []
    assert reused["history"]["basis"] == computed["history"]["basis"]
    assert {name: reused[name] for name in REUSED_SECTIONS} == {name: computed[name] for name in REUSED_SECTIONS}

    run(backend, night_2 + timedelta(hours=1))  # another audit time: computed again
    assert reads == [None] and fleet(backend)["history"]["basis"] != computed["history"]["basis"]

    add_runs(tmp_path, backend, ["train-ok-3"])  # a post-job's history file: computed again, with its run
    later = night_2 + timedelta(hours=2)
    post_job("train-ok-3", AuditParameters(storage=backend.settings.uri, endpoint_url=backend.settings.endpoint_url,
                                           as_of=later))
    reads.clear()
    run(backend, later)
    assert reads == [None]
    trends = {trend["night"]: trend for trend in fleet(backend)["trends"]}
    assert trends[later.date().isoformat()]["jobs"] == 2  # train-ok-2 and the post-job's train-ok-3
