"""``nightly-audit``: diagnose every changed job under a storage root, then publish the fleet.

Steps: one inventory of the storage (every job's inputs, refused ids apart) and the
previous fleet.json; jobs whose inputs and options are unchanged keep their rows
without a request of their own; the others are diagnosed in batches sized by bytes
(:mod:`stormwatch.tasks.batches`), one ``diagnose-batch`` task each, in parallel on
the flow's task runner (threads by default, a Dask cluster when asked), their jobs
on the engine's worker processes (:mod:`stormwatch.tasks.engine_pool`), each batch committing
its diagnosed jobs (:mod:`stormwatch.tasks.commits`: a job is done once its outputs, history rows
and fleet row are durable, and a rerun after a kill diagnoses exactly the jobs not done); fleet.json,
fleet.parquet and index.html; link artifacts; notifications for critical first causes.
The whole run holds the storage's audit lease (:mod:`stormwatch.tasks.storage.lease`):
a second audit started meanwhile returns at once with exit code 1, so outputs are never
written, nor notifications sent, twice. A job that fails is recorded as failed with its error; the
others go on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import pandas as pd
from prefect import flow, get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact
from prefect.futures import PrefectFuture, as_completed
from prefect.states import State

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.fleet_findings import fleet_findings
from stormwatch.diagnose import DiagnoseOptions
from stormwatch.flows.history_step import by_job_name, read_earlier, record_and_compare, reusable_comparisons
from stormwatch.flows.outcome import audit_run_name, audit_state
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.progress import JobProgress
from stormwatch.flows.run_artifacts import audit_tables
from stormwatch.flows.run_logs import attach_project_loggers
from stormwatch.flows.unwalked import unwalked
from stormwatch.history.frame import ANALYTICS_COLUMNS, empty_history
from stormwatch.history.schema import audit_id
from stormwatch.outputs.fleet import FleetRow, JobStatus, failed_row
from stormwatch.outputs.fleet_summary import counted_frame, counts
from stormwatch.outputs.verdict import ExitCode, VerdictStatus, exit_code_for
from stormwatch.severity import FailOn
from stormwatch.tasks import heartbeat
from stormwatch.tasks.audit_job import AuditOptions, JobOutcome, failed_outcome
from stormwatch.tasks.batches import Batch, batch_by_bytes
from stormwatch.tasks.commit_outcomes import clear_commits_task, folded_commits
from stormwatch.tasks.diagnose import diagnose_batch, read_previous, take_inventory
from stormwatch.tasks.engine_pool import EngineSettings, close_shared_pools
from stormwatch.tasks.fleet_view import FleetView, fleet_view, notify_candidates, rows_to_fold, window_start
from stormwatch.tasks.history import HistoryRead
from stormwatch.tasks.history_compact import compact_history_step
from stormwatch.tasks.metrics import metrics_step
from stormwatch.tasks.notify.settings import NotifySettings
from stormwatch.tasks.notify.step import KeptJobs, UnchangedJob, notify_task
from stormwatch.tasks.plan import AuditPlan, plan_audit, unchanged_exit_code
from stormwatch.tasks.publish import fold_id, publish_view_task
from stormwatch.tasks.repair import sweep_temporaries_task
from stormwatch.tasks.retention import retention_task
from stormwatch.tasks.storage.lease import AUDIT_LEASE, Lease, LeaseRecord, acquire, default_owner, holder
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import INDEX_HTML_KEY, StorageSettings, report_html_key
from stormwatch.tasks.timeouts import AUDIT_FLOW_TIMEOUT_S

#: Reports listed in the audit's markdown artifact (the index lists them all).
ARTIFACT_REPORTS = 200
REPORTS_ARTIFACT = "stormwatch-audit-reports"


def _batch_outcomes(future: PrefectFuture[list[JobOutcome]], batch: Batch) -> list[JobOutcome]:
    """The batch's outcomes; when the task run itself failed (a crashed Dask worker, say), a failed
    row per job carrying its error (the local result, not the API's state)."""
    try:
        result: Any = future.result(raise_on_failure=False)
    except Exception as exc:  # a crashed run raises even without raise_on_failure
        result = exc
    if isinstance(result, list) and all(isinstance(item, JobOutcome) for item in result):
        return result
    error = result if isinstance(result, BaseException) else f"batch ended without outcomes: {result!r}"
    return [failed_outcome(job.job_id, error) for job in batch.jobs]


def run_batches(
    settings: StorageSettings,
    batches: Sequence[Batch],
    options: AuditOptions,
    engine: EngineSettings,
    *,
    earlier: Mapping[str, pd.DataFrame] | None = None,
    progress: bool = False,
    audit: str = "",
    dask_address: str | None = None,
) -> list[JobOutcome]:
    """Submit one task per batch and collect an outcome per job, failed ones included; each batch
    commits its diagnosed jobs under ``audit`` (the audit's id). ``earlier``: earlier runs by job
    name; each batch gets those of its own jobs' names. ``dask_address``: the batches run on that
    Dask cluster even when the flow's own task runner is threads (a deployment's parameter)."""
    earlier = earlier or {}
    if dask_address and not _runs_on_dask():
        from prefect_dask import DaskTaskRunner

        with DaskTaskRunner(address=dask_address) as runner:  # arguments as they are: Dask unquotes nothing
            return _collect_batches({runner.submit(diagnose_batch, parameters={
                "settings": settings, "batch": batch, "options": options, "engine": engine,
                "earlier": _names_of(batch, earlier, options), "audit": audit}): batch
                for batch in batches}, progress=progress)

    futures = {diagnose_batch.submit(settings, unwalked(batch), options, engine,
                                     unwalked(_names_of(batch, earlier, options)), audit): batch
               for batch in batches}
    return _collect_batches(futures, progress=progress)


def _names_of(batch: Batch, earlier: Mapping[str, pd.DataFrame], options: AuditOptions) -> dict[str, pd.DataFrame]:
    wanted = {options.job_names.name_of(job.job_id) for job in batch.jobs}
    return {name: rows for name, rows in earlier.items() if name in wanted}


def _runs_on_dask() -> bool:
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    return context is not None and type(context.task_runner).__name__ == "DaskTaskRunner"


def _collect_batches(futures: Mapping[PrefectFuture[list[JobOutcome]], Batch], *, progress: bool) -> list[JobOutcome]:
    """Every batch's outcomes as it finishes (each a sign of progress for the lease)."""
    outcomes: list[JobOutcome] = []
    with JobProgress(sum(len(batch.jobs) for batch in futures.values()), enabled=progress) as bar:
        for future in as_completed(list(futures)):
            batch = futures[future]
            done = _batch_outcomes(future, batch)
            heartbeat.beat()
            outcomes += done
            bar.step(done[-1].row.job_id if done else "", jobs=len(batch.jobs))
    return outcomes


def audit_options(params: AuditParameters) -> AuditOptions:
    """The per-job options from the flow parameters (ValueError names a bad one): every session of a job
    is diagnosed (at most ``max_sessions``), so an earlier attempt's finding is the job's."""
    diagnose = DiagnoseOptions.parse(fail_on=params.fail_on.value, preset=params.preset.value,
                                     max_artifact_bytes=params.max_artifact_bytes, max_events=params.max_events,
                                     all_sessions=True, max_sessions=params.max_sessions,
                                     leak_min=params.leak_min)
    return AuditOptions(diagnose=diagnose, force=params.force, max_bytes=params.max_job_bytes,
                        report_base_url=params.report_base_url, audit_time=params.audit_time(),
                        job_names=params.job_names(), regression=params.regression_thresholds())


def notify_settings(params: AuditParameters, *, digest: bool) -> NotifySettings:
    """Channels from this run's environment (STORMWATCH_SLACK_WEBHOOK, STORMWATCH_SMTP_URL, ...) or the
    Prefect Secret blocks the parameters name, resolved once here: flow parameters never carry a secret
    (Prefect stores parameters). Parameter values win over the environment."""
    return NotifySettings.from_sources(flags=params.notify_flags(digest=digest), environ=os.environ,
                                       blocks=params.secret_blocks(), alerting=params.alert_policy())


def notify_outcomes(
    settings: StorageSettings,
    outcomes: Sequence[JobOutcome],
    notify: NotifySettings,
    *,
    unchanged: Sequence[UnchangedJob] = (),
    fleet: Sequence[JobFinding] | None = None,
    now: datetime | None = None,
    overview: bool = True,
    kept: KeptJobs | None = None,
    whole: bool = True,
) -> dict[str, Any]:
    """Run the notify step (for unchanged jobs, only those the ledger has not settled; ``fleet``:
    regressions and suspect hosts, None when not computed; ``now``: the audit time; ``overview``: see
    :func:`~stormwatch.tasks.notify.step.notify_step`; ``kept``: the unchanged jobs, for
    alerts to recall; ``whole``: the caller holds the audit lease, see
    :func:`~stormwatch.tasks.notify.step.notify_step`); its failure is logged, never the audit's."""
    findings = [outcome.finding for outcome in outcomes if outcome.finding is not None] + list(fleet or ())
    future = notify_task.submit(settings, unwalked(findings), notify, now or datetime.now(UTC), unwalked(unchanged),
                                fleet is not None, overview, unwalked(kept), whole)
    result: Any = future.result(raise_on_failure=False)
    if isinstance(result, BaseException):
        get_run_logger().error("notifications not processed: %s", type(result).__name__)
        return {"error": type(result).__name__}
    return dict(result)


def _markdown_url(url: str) -> str:
    """A URL that cannot end a markdown link early: brackets, parentheses, spaces percent-encoded."""
    return quote(url, safe=":/%")


def _link_text(job_id: str) -> str:
    return re.sub(r"[\[\]()<>`*_|]", "", job_id)[:120] or "report"


def link_reports(settings: StorageSettings, rows: Sequence[FleetRow], options: AuditOptions) -> int:
    """Two Prefect artifacts whatever the number of jobs (each costs the API a request): a link to
    the index, and one markdown list of the reports this run published, the most severe first (up
    to :data:`ARTIFACT_REPORTS`; the index lists them all). Returns the reports published."""
    storage = storage_for(settings)
    create_link_artifact(link=options.report_link(storage, INDEX_HTML_KEY), link_text="fleet index",
                         key="stormwatch-fleet-index", description="stormwatch fleet index")
    published = [row for row in rows if row.status is JobStatus.DIAGNOSED and row.report]
    published.sort(key=lambda row: (-(row.verdict.rank if row.verdict else 0), row.job_id))
    if published:
        links = [_markdown_url(options.report_link(storage, str(row.report))) for row in published[:ARTIFACT_REPORTS]]
        lines = [f"- {row.verdict}: [{_link_text(row.job_id)}]({link})"
                 for row, link in zip(published, links, strict=False)]
        if len(published) > ARTIFACT_REPORTS:
            lines.append(f"- ... {len(published) - ARTIFACT_REPORTS} more in the fleet index")
        create_markdown_artifact(markdown="\n".join([f"{len(published)} reports published", "", *lines]),
                                 key=REPORTS_ARTIFACT, description="reports published by this audit")
    return len(published)


def summarise(fresh: Sequence[FleetRow], fleet: dict[str, Any], *, plan: AuditPlan | None = None,
              fail_on: FailOn = FailOn.NEVER, counted: pd.DataFrame | None = None) -> dict[str, Any]:
    """What the flow returns: fleet counts, the worst exit code (of the jobs diagnosed now and of the
    unchanged ones under this run's ``fail_on``), jobs needing attention."""
    counted_codes = (ExitCode.CLEAN, ExitCode.FINDINGS)
    codes = [int(row.exit_code) for row in fresh if row.exit_code in counted_codes]
    kept = None if plan is None else unchanged_exit_code(plan, fail_on)
    if kept in counted_codes:
        codes.append(int(kept))
    findings = sorted({row.job_id for row in fresh if row.exit_code == ExitCode.FINDINGS}
                      | ({str(row.job_id) for row in plan.kept.itertuples(index=False)
                          if isinstance(row.verdict, str) and exit_code_for(row.verdict, fail_on) == ExitCode.FINDINGS}
                         if plan is not None else set()))
    critical = (sorted(counted["job_id"][counted["verdict"] == VerdictStatus.CRITICAL.value].astype(str))
                if counted is not None else
                sorted(row.job_id for row in fresh if row.verdict is VerdictStatus.CRITICAL))
    return {
        "summary": fleet["summary"],
        "exit_code": max(codes, default=int(ExitCode.CLEAN)),
        JobStatus.FAILED.value: sorted(row.job_id for row in fresh if row.status is JobStatus.FAILED),
        JobStatus.REFUSED.value: sorted(row.job_id for row in fresh if row.status is JobStatus.REFUSED),
        VerdictStatus.CRITICAL.value: critical,
        "findings": findings,  # job ids at or above fail_on, named by the Failed state
    }


@dataclass(frozen=True)
class AuditRun:
    """What the jobs of an audit came to: the rows made now (diagnosed, failed, refused), the
    outcomes of the jobs diagnosed now, the plan (unchanged jobs as columns), the fleet view and
    the fleet-wide sections."""

    fresh: list[FleetRow]
    outcomes: list[JobOutcome]
    plan: AuditPlan
    view: FleetView
    files: Mapping[str, Sequence[str]]
    sections: dict[str, Any]


def audit_jobs(
    settings: StorageSettings, params: AuditParameters, options: AuditOptions, *, progress: bool
) -> AuditRun:
    """Sweep, inventory, plan, batches: the work done under the lease before publishing."""
    logger = get_run_logger()
    audit_time = options.acting_at()
    inventory = take_inventory(settings)
    heartbeat.beat()
    repaired = sweep_temporaries_task(settings, unwalked(inventory))
    previous = read_previous(settings, unwalked(inventory), window_start(audit_time, params.index_days))
    # earlier nights' small history files in one each, before the history is read and its basis taken
    compact_history_step(settings, audit_time, params.history_days)
    repaired += [*previous.commits.damaged, *previous.damaged]
    previous, pruned, retired = retention_task(settings, unwalked(previous), params.retention_days, audit_time,
                                               fold_id(datetime.now(UTC)))
    if pruned is not None and params.retention_days is not None:
        logger.info("%s", pruned.line(params.retention_days))
    heartbeat.beat()
    plan = plan_audit(inventory, previous, options=options, retired=retired)
    repaired += list(plan.damaged)
    engine = params.engine_settings()
    batches = batch_by_bytes(plan.diagnose, sizing=params.batch_sizing(), parallelism=engine.parallelism,
                             repairs=plan.repairs)
    logger.info("%d jobs: %d to diagnose (%d bytes, %d batches), %d unchanged, %d refused ids",
                len(inventory.jobs), len(plan.diagnose), plan.diagnose_bytes, len(batches), plan.unchanged_count,
                len(inventory.refused))
    audit = audit_id(audit_time, [(job.job_id, job.fingerprint) for job in plan.diagnose])
    reuse = None if batches else reusable_comparisons(settings, params, audit_time=audit_time)
    earlier = (read_earlier(settings, params, audit_time=audit_time) if reuse is None
               else HistoryRead(empty_history(ANALYTICS_COLUMNS), (), ()))
    names = {options.job_names.name_of(job.job_id) for job in plan.diagnose}
    outcomes: list[JobOutcome] = []
    if batches:  # an unchanged audit starts no engine workers
        try:
            outcomes = run_batches(settings, batches, options, engine, earlier=by_job_name(earlier.rows, names),
                                   progress=progress, audit=audit, dask_address=params.dask_address)
        finally:
            close_shared_pools()
    repaired += [line for outcome in outcomes for line in outcome.repaired]
    fresh = [outcome.row for outcome in outcomes]
    fresh += [failed_row(item.raw_id, status=JobStatus.REFUSED, error=item.reason) for item in inventory.refused]
    view = fleet_view(plan, fresh, audit_time=audit_time, days=params.index_days, name_of=options.job_names.name_of,
                      fail_on=options.diagnose.fail_on)
    heartbeat.beat()
    sections = record_and_compare(settings, params, audit_time=audit_time, earlier=earlier, outcomes=outcomes,
                                  rows=view.shown, audit=audit, reuse=reuse)
    sections["repaired"] = [*repaired, *sections["history"].pop("repaired")]
    sections["retention"] = {"days": params.retention_days, "retired_runs": int(plan.current["retired"].sum()),
                             "pruned": None if pruned is None else pruned.as_json()}
    for line in sections["repaired"]:
        logger.warning("repaired: %s", line)
    return AuditRun(fresh=fresh, outcomes=outcomes, plan=plan, view=view, files=previous.files, sections=sections)


def publish_audit(settings: StorageSettings, params: AuditParameters, options: AuditOptions, notify: NotifySettings,
                  done: AuditRun, *, lease: Lease) -> dict[str, Any]:
    """Notify, then fold and publish (the fold stamps the runs the notify step observed), then clear
    the folded commits; the flow's result."""
    storage = storage_for(settings)
    index = options.report_link(storage, INDEX_HTML_KEY)
    plan, view = done.plan, done.view
    unchanged = [UnchangedJob(row, options.report_link(storage, report_html_key(row.job_id)))
                 for row in notify_candidates(plan, done.fresh)]
    fleet_wide = fleet_findings(done.sections, index_url=index,
                                report_url_of=lambda job: options.report_link(storage, report_html_key(job)))
    lease.renew()  # still ours before notifying: a lost lease must never send twice
    notifications = notify_outcomes(settings, done.outcomes, notify, unchanged=unchanged, fleet=fleet_wide,
                                    now=options.acting_at(), overview=False,
                                    kept=KeptJobs(plan.kept["job_id"], options.report_base_url))
    overview = notifications.pop("overview", None)
    observed = notifications.pop("observed", None)
    sections = dict(done.sections)
    if overview is not None:
        sections["alerts"] = overview
    stamp = datetime.now(UTC).isoformat()
    sections["folded_at"] = stamp  # the pending post-job commits are folded in now
    seen = None if observed is None else dict.fromkeys(observed, options.acting_at().isoformat())
    fold = rows_to_fold(plan, done.fresh, audit_night=options.acting_at().astimezone(UTC).date(), observed=seen)
    view = view.observed(seen or {})
    lease.renew()  # and before writing fleet-wide outputs (raises LeaseLostError if not)
    fleet = publish_view_task(settings, unwalked(view), unwalked(fold), unwalked(done.files), options.acting_at(),
                              options.job_names.name_of, unwalked(sections))
    clear_commits_task(settings, folded_commits(plan, done.outcomes))  # the runs files hold their rows now
    link_reports(settings, done.fresh, options)
    audit_tables(fleet, done.fresh)
    metrics = metrics_step(settings, params.pushgateway)  # of the fleet just published; never fails the audit
    result = summarise(done.fresh, fleet, plan=plan, fail_on=options.diagnose.fail_on, counted=view.counted)
    result["repaired"] = list(done.sections["repaired"])
    result["index"] = index
    result["notifications"] = notifications
    result["metrics"] = metrics
    return result


def lease_message(busy: LeaseRecord | None) -> str:
    """Why an audit did not run: who holds the lease, until when, and how it ends."""
    if busy is None:
        return "another audit holds the lease (released just now: run again)"
    return (f"another audit holds the lease {busy.describe()}; it ends by then if that audit is gone, "
            "or run `stormwatch audit --break-lease`")


@flow(name="nightly-audit", flow_run_name=audit_run_name, log_prints=False, timeout_seconds=AUDIT_FLOW_TIMEOUT_S)
def nightly_audit(params: AuditParameters, progress: bool = False) -> State[Any]:
    """Audit every job under ``params.storage`` (a folder or ``s3://bucket/prefix``); ``progress``: a
    progress bar on a terminal (the command line asks for it). Ends Completed, Failed (a finding at or
    above ``fail_on``) or Cancelled (the lease is held), the result dict as the state's data
    (:mod:`stormwatch.flows.outcome`). The lease is renewed only while jobs start or finish within
    twice the job timeout (:class:`~stormwatch.tasks.heartbeat.Heartbeat`): a hung audit loses it."""
    attach_project_loggers()
    heartbeat.beat()
    logger = get_run_logger()
    settings = params.storage_settings()
    options = audit_options(params)
    notify = notify_settings(params, digest=params.digest)
    lease = acquire(storage_for(settings), name=AUDIT_LEASE, owner=default_owner("nightly-audit"))
    if lease is None:  # another audit is at work on this storage: do nothing, never wait
        message = lease_message(holder(storage_for(settings), name=AUDIT_LEASE))
        logger.error("not auditing: %s", message)
        result = summarise([], {"summary": counts(counted_frame([], name_of=str, night=datetime.now(UTC).date()))})
        return audit_state({**result, "exit_code": int(ExitCode.ERROR), "lease": message},
                           fail_on=params.fail_on.value)
    try:
        with lease.kept_alive(idle_s=heartbeat.idle_s, stall_s=2 * params.job_timeout_s):
            done = audit_jobs(settings, params, options, progress=progress)
            result = publish_audit(settings, params, options, notify, done, lease=lease)
    finally:
        lease.release()
    logger.info("audit done: %s", result["summary"])
    return audit_state(result, fail_on=params.fail_on.value)
