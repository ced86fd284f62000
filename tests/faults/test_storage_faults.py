"""Storage faults injected by the proxy in front of moto (500, 503 SlowDown, resets, bodies cut short
both ways): each transient fault costs one request and changes nothing, audits complete after retries,
a job that still fails is recorded failed and completed next time, and every output is the old object
or the new one (local crashes: test_local_crash.py)."""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
from botocore.exceptions import BotoCoreError

import stormwatch.tasks.audit_job
import stormwatch.tasks.retry
from stormwatch.flows.parameters import AuditParameters
from stormwatch.tasks.audit_job import AuditOptions, diagnose_inputs
from stormwatch.tasks.storage.inventory import JobInputs
from tests.faults.conftest import FLEET_JOBS, Proxied, upload_fleet
from tests.faults.proxy import Fault, Op
from tests.flows.run_flows import run_audit
from tests.ledger_files import ledger_bytes
from tests.tasks.storage.backends import Backend

OLD = b'{"old": true}'
NEW = orjson.dumps({"new": True, "padding": "x" * 4000})


@dataclass(frozen=True)
class Plan:
    """One fault rule: ``times`` faults on the matching requests after ``skip`` of them pass."""

    label: str
    fault: Fault
    ops: frozenset[Op] | None
    key: str
    times: int = 1
    skip: int = 0
    after: bool = False

    def inject(self, proxied: Proxied) -> None:
        proxied.proxy.inject(self.fault, ops=set(self.ops) if self.ops else None, key=self.key, times=self.times,
                             skip=self.skip, after=self.after)


LIST, GET, PUT = frozenset({Op.LIST}), frozenset({Op.GET}), frozenset({Op.PUT})
STORAGE_PLANS = [
    Plan("listing answered 500, twice", Fault.ERROR_500, LIST, "*", times=2),
    Plan("listing answered 503 SlowDown", Fault.SLOW_DOWN, LIST, "*"),
    Plan("listing connection reset", Fault.RESET, LIST, "*"),
    Plan("listing body cut short", Fault.TRUNCATE, LIST, "*"),
    Plan("input GETs answered 500, three times", Fault.ERROR_500, GET, "*/jobs/*", times=3),
    Plan("input GETs reset, twice", Fault.RESET, GET, "*/jobs/*", times=2),
    Plan("input GET bodies cut short, three times", Fault.TRUNCATE, GET, "*/jobs/*", times=3),
    Plan("report GET answered 500", Fault.ERROR_500, GET, "*/reports/*"),
    Plan("report GET reset", Fault.RESET, GET, "*/reports/*"),
    Plan("report GET body cut short, twice", Fault.TRUNCATE, GET, "*/reports/*", times=2),
    Plan("report PUT answered 500, twice", Fault.ERROR_500, PUT, "*/reports/*", times=2),
    Plan("report PUT answered 503 SlowDown", Fault.SLOW_DOWN, PUT, "*/reports/*"),
    Plan("report PUT applied, answer reset", Fault.RESET, PUT, "*/reports/*", after=True),
    Plan("report PUT applied, answered 500", Fault.ERROR_500, PUT, "*/reports/*", after=True),
    Plan("report PUT body cut short, twice", Fault.TRUNCATE_REQUEST, PUT, "*/reports/*", times=2),
    Plan("the 4th request reset, whatever it is", Fault.RESET, None, "*", skip=3),
]


def storage_round(proxied: Proxied) -> tuple[Any, ...]:
    """Every storage operation an audit makes for one job: listing, entries, reads, previous report, write."""
    storage = proxied.storage
    listing = storage.list_jobs()
    entries = storage.job_entries("critical-job")
    tree = storage.fetch_job("critical-job")
    objects = {entry.key: tree.read(entry.key) for entry in entries}
    previous = storage.read_report("critical-job/model.json")
    storage.write_report("critical-job/model.json", NEW, content_type="application/json")
    return listing, entries, objects, previous


@pytest.mark.parametrize("plan", STORAGE_PLANS, ids=lambda plan: plan.label)
def test_each_transient_fault_costs_one_request_and_changes_nothing(
    proxied: Proxied, fleet_files: Path, plan: Plan
) -> None:
    upload_fleet(proxied.direct, fleet_files)
    proxied.direct.put("reports/critical-job/model.json", OLD)
    baseline = storage_round(proxied)
    baseline_requests = len(proxied.proxy.log)
    baseline_attempts = sum(proxied.counter.attempts.values())
    proxied.direct.put("reports/critical-job/model.json", OLD)

    plan.inject(proxied)
    faulted = storage_round(proxied)

    listing, entries, objects, previous = faulted
    assert faulted == baseline
    assert listing.job_ids == FLEET_JOBS and previous == OLD
    assert objects == {entry.key: proxied.direct.get(f"jobs/critical-job/{entry.key}") for entry in entries}
    assert proxied.direct.get("reports/critical-job/model.json") == NEW
    assert proxied.proxy.injected() == Counter({plan.fault: plan.times})
    assert len(proxied.proxy.log) - baseline_requests == baseline_requests + plan.times
    repeated = sum(proxied.counter.attempts.values()) - 2 * baseline_attempts  # botocore retries + body re-reads
    assert repeated == plan.times
    print(f"{plan.label}: {plan.times} injected, {proxied.counter.retries} botocore retries, "
          f"{repeated - proxied.counter.retries} body re-reads")


def test_a_body_cut_short_every_time_is_an_error_never_partial_bytes(proxied: Proxied) -> None:
    """A truncated model.json must not be read as a damaged one (which the audit would treat as absent)."""
    proxied.direct.put("reports/critical-job/model.json", NEW)
    proxied.proxy.inject(Fault.TRUNCATE, ops={Op.GET}, key="*/model.json", times=None)
    with pytest.raises(Exception) as raised:
        proxied.storage.read_report("critical-job/model.json")
    assert stormwatch.tasks.retry.is_transient(raised.value)  # so the job's task is retried, then fails loudly
    assert len(proxied.proxy.requests(Op.GET)) == proxied.settings.max_attempts


def run(proxied: Proxied, **options: Any) -> dict[str, Any]:
    """An audit with its jobs on threads of this process, where the request counter sees them."""
    return run_audit(AuditParameters(storage=proxied.settings.uri, endpoint_url=proxied.settings.endpoint_url,
                                         engine="threads", **options))


def fleet_jobs(backend: Backend) -> dict[str, dict[str, Any]]:
    return {job["job_id"]: job for job in orjson.loads(backend.get("reports/fleet.json") or b"{}")["jobs"]}


def statuses(backend: Backend) -> dict[str, tuple[str, str | None]]:
    return {job_id: (job["status"], job["verdict"]) for job_id, job in fleet_jobs(backend).items()}


EXPECTED = {"clean-job": ("diagnosed", "clean"), "critical-job": ("diagnosed", "critical"),
            "small-job": ("diagnosed", "clean")}
COLD_PLAN = [
    Plan("jobs listing 500", Fault.ERROR_500, LIST, "*/jobs/", times=2),
    Plan("reports listing reset", Fault.RESET, LIST, "*/reports/"),
    Plan("input GET 500", Fault.ERROR_500, GET, "*/jobs/*", times=2),
    Plan("input GET reset", Fault.RESET, GET, "*/jobs/clean-job/*", times=2),
    Plan("input GET cut short", Fault.TRUNCATE, GET, "*/jobs/small-job/*", times=2),
    Plan("model.json PUT cut short", Fault.TRUNCATE_REQUEST, PUT, "*/model.json", times=2),
    Plan("report.html PUT applied, reset", Fault.RESET, PUT, "*/report.html", after=True),
    Plan("fleet.json PUT 500", Fault.ERROR_500, PUT, "*/fleet.json"),
    Plan("lease PUT applied, reset", Fault.RESET, PUT, "*/.locks/*", after=True),
]
WARM_PLAN = [
    Plan("runs file GET cut short", Fault.TRUNCATE, GET, "*/_fleet/runs/*", times=3),
    Plan("history GET reset", Fault.RESET, GET, "*/history/*"),
    Plan("ledger GET cut short", Fault.TRUNCATE, GET, "*/notifications.jsonl"),
    Plan("lease GET 500", Fault.ERROR_500, GET, "*/.locks/*"),
    Plan("fleet.parquet PUT SlowDown", Fault.SLOW_DOWN, PUT, "*/fleet.parquet"),
]


def planned(plans: list[Plan]) -> Counter[Fault]:
    counts: Counter[Fault] = Counter()
    for plan in plans:
        counts[plan.fault] += plan.times
    return counts


@pytest.mark.usefixtures("prefect_api", "quick_task_retries")
def test_audits_complete_through_faults_on_every_step(proxied: Proxied, fleet_files: Path) -> None:
    upload_fleet(proxied.direct, fleet_files)
    for plan in COLD_PLAN:
        plan.inject(proxied)
    cold = run(proxied)
    assert cold["failed"] == [] and statuses(proxied.direct) == EXPECTED
    assert proxied.proxy.injected() == planned(COLD_PLAN)
    cold_retries = proxied.counter.retries
    assert cold_retries >= sum(plan.times for plan in COLD_PLAN if plan.fault is not Fault.TRUNCATE)
    ledger = ledger_bytes(proxied.direct.get, proxied.direct.stored_keys())  # every decision so far
    assert b"critical-job" in ledger

    proxied.proxy.clear()
    proxied.proxy.log.clear()
    changed = "jobs/small-job/rank_0/events.jsonl"
    proxied.direct.put(changed, (proxied.direct.get(changed) or b"") + b"\n")
    for plan in WARM_PLAN:
        plan.inject(proxied)
    warm = run(proxied)
    # a runs file cut short was read again, not taken as damaged: the unchanged jobs are skipped
    assert (warm["summary"]["diagnosed"], warm["summary"]["skipped"], warm["failed"]) == (1, 2, [])
    assert proxied.proxy.injected() == planned(WARM_PLAN)
    # nothing lost or re-sent
    assert ledger_bytes(proxied.direct.get, proxied.direct.stored_keys()).startswith(ledger)
    assert proxied.direct.get("reports/.locks/audit.json") is None
    print(f"cold audit: {sum(plan.times for plan in COLD_PLAN)} injected, {cold_retries} botocore retries; "
          f"warm audit: {sum(plan.times for plan in WARM_PLAN)} injected, "
          f"{proxied.counter.retries - cold_retries} botocore retries")


@pytest.mark.usefixtures("prefect_api", "quick_task_retries")
def test_a_job_failing_past_every_retry_is_recorded_and_completed_next_audit(
    proxied: Proxied, fleet_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload_fleet(proxied.direct, fleet_files)
    attempts: Counter[str] = Counter()

    def counted(storage: Any, job: JobInputs, *, options: AuditOptions, **more: Any) -> Any:
        attempts[job.job_id] += 1
        return diagnose_inputs(storage, job, options=options, **more)

    monkeypatch.setattr(stormwatch.tasks.audit_job, "diagnose_inputs", counted)
    proxied.proxy.inject(Fault.ERROR_500, ops={Op.GET}, key="*/jobs/clean-job/*", times=None)

    first = run(proxied)
    assert first["failed"] == ["clean-job"]
    jobs = fleet_jobs(proxied.direct)
    assert jobs["clean-job"]["status"] == "failed" and "InternalError" in jobs["clean-job"]["error"]
    assert {job_id: job["status"] for job_id, job in jobs.items() if job_id != "clean-job"} == {
        "critical-job": "diagnosed", "small-job": "diagnosed"}
    assert proxied.direct.get("reports/clean-job/model.json") is None
    failed_attempts = attempts["clean-job"]
    assert failed_attempts == 3  # the job's two retries on a transient error
    injected = proxied.proxy.injected()[Fault.ERROR_500]
    assert injected >= 3 * proxied.settings.max_attempts  # each task attempt: max_attempts requests, all 500

    proxied.proxy.clear()
    second = run(proxied)
    assert second["failed"] == [] and statuses(proxied.direct)["clean-job"] == ("diagnosed", "clean")
    assert (second["summary"]["diagnosed"], second["summary"]["skipped"]) == (1, 2)
    print(f"job failing past every retry: {injected} faults, {failed_attempts} task attempts; next audit ok")


def snapshot(backend: Backend, keys: list[str]) -> dict[str, bytes | None]:
    return {key: backend.get(key) for key in keys}


@pytest.mark.usefixtures("prefect_api", "quick_task_retries")
def test_outputs_stay_old_or_new_when_their_writes_fail(proxied: Proxied, fleet_files: Path) -> None:
    direct = proxied.direct
    upload_fleet(direct, fleet_files)
    run(proxied)
    for key in sorted(direct.stored_keys()):
        if key.startswith("jobs/critical-job/"):
            direct.put(key.replace("critical-job", "critical-job-2", 1), direct.get(key) or b"")  # new findings
    outputs = ["reports/critical-job/model.json", "reports/critical-job/report.html", "reports/fleet.json",
               "reports/fleet.parquet", "reports/index.html", "reports/notifications.jsonl"]
    before = snapshot(direct, outputs)
    ledger_of_before = ledger_bytes(direct.get, direct.stored_keys())

    # every write of critical-job's reports and of the ledger (its file, its segments) has its body cut short
    for key in ("*/reports/critical-job/*", "*/reports/notifications.jsonl", "*/reports/.ledger/*",
                "*/reports/.ledger-archive/*"):
        proxied.proxy.inject(Fault.TRUNCATE_REQUEST, ops={Op.PUT}, key=key, times=None)
    second = run(proxied, force=True)
    assert second["failed"] == ["critical-job"] and "error" in second["notifications"]
    after = snapshot(direct, outputs)
    assert after["reports/critical-job/model.json"] == before["reports/critical-job/model.json"]
    assert after["reports/critical-job/report.html"] == before["reports/critical-job/report.html"]
    assert after["reports/notifications.jsonl"] == before["reports/notifications.jsonl"]
    assert ledger_bytes(direct.get, direct.stored_keys()) == ledger_of_before
    assert fleet_jobs(direct)["critical-job"]["status"] == "failed"  # fleet.json: the new one, whole
    upstream = Counter(entry.upstream for entry in proxied.proxy.log if entry.fault is Fault.TRUNCATE_REQUEST)

    # every write of the fleet files fails: the audit fails, the previous fleet files stay, the lease is freed
    proxied.proxy.clear()
    published = snapshot(direct, outputs)
    ledger_published = ledger_bytes(direct.get, direct.stored_keys())
    for key in ("*/reports/fleet.*", "*/reports/index.html"):
        proxied.proxy.inject(Fault.TRUNCATE_REQUEST, ops={Op.PUT}, key=key, times=None)
    with pytest.raises(BotoCoreError):
        run(proxied)
    fleet_files_only = [key for key in outputs if "/critical-job/" not in key and "notifications" not in key]
    assert snapshot(direct, fleet_files_only) == {key: published[key] for key in fleet_files_only}
    # the notify step runs before publishing (the fold stamps what it observed): its lines were appended
    assert ledger_bytes(direct.get, direct.stored_keys()).startswith(ledger_published)
    assert direct.get("reports/.locks/audit.json") is None
    # critical-job failed last time, so it was diagnosed again and committed before publishing failed
    assert orjson.loads(direct.get("reports/critical-job/model.json") or b"")["job_id"] == "critical-job"
    assert any(key.startswith("reports/.commits/") for key in direct.stored_keys())

    proxied.proxy.clear()
    third = run(proxied)
    # its commit stands: its inputs never changed, so it is simply skipped, and the commit is folded
    assert third["failed"] == [] and fleet_jobs(direct)["critical-job"]["status"] == "skipped"
    assert not any(key.startswith("reports/.commits/") for key in direct.stored_keys())
    assert orjson.loads(direct.get("reports/critical-job/model.json") or b"")["job_id"] == "critical-job"
    assert len(pd.read_parquet(io.BytesIO(direct.get("reports/fleet.parquet") or b""))) > 0
    assert b"critical-job-2" in ledger_bytes(direct.get, direct.stored_keys())
    print(f"write faults: {dict(proxied.proxy.injected())} injected (moto answered the cut bodies: "
          f"{dict(upstream)}); outputs old or new throughout")
