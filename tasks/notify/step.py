"""The audit's notification step: state and configuration read from storage, ``notify_jobs``, all written back.

Reads ``notifications.jsonl`` (the ledger), ``alerts.json`` (the alert state, with its version),
the routes (``--routes`` file or ``reports/routes.toml``) and ``reports/silences.json``. Before
sending, the alert state holding this audit's claims replaces the version read (a conditional
write): if another audit changed it meanwhile (this one lost its lease, say), nothing is sent.
After sending, the ledger is written first, its lines carrying this audit's claim token, so an
audit killed here leaves claims the next one settles from the ledger at once
(:mod:`stormwatch.alerting.claims`); then the settled state replaces the claimed version (should
another audit have written in between, this audit's outcomes are merged into its state), and
fleet.json's ``alerts`` member and the index are refreshed. An alerts.json that is empty or
unreadable is rebuilt from the ledger (what it shows sent stays told) and its bytes kept under
``reports/damaged/``.

Sending never fails the audit: :func:`notify_jobs` does not raise, a bad routes or silences file
is an error recorded in the ledger and shown on the index (the default receiver gets everything,
no silence applies), and the flow treats a failure of this step (an unreadable storage) as a
logged problem.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

import orjson
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.alerting.alert_state import merged
from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.ledger import LedgerState, read_ledger, undecided, without_unreadable_lines
from stormwatch.analysis.model import IndicatorKind
from stormwatch.outputs.fleet import FleetRow, JobStatus
from stormwatch.outputs.media_types import MediaType
from stormwatch.reports.render import render_index
from stormwatch.tasks.audit_job import report_link
from stormwatch.tasks.notify.config_store import load_alert_config, report_name
from stormwatch.tasks.notify.dispatch import NotifyResult, default_receiver, notify_jobs
from stormwatch.tasks.notify.ledger_store import LedgerRead, read_ledger_bytes, write_ledger
from stormwatch.tasks.notify.settings import NotifySettings
from stormwatch.tasks.runs_store import window_rows
from stormwatch.tasks.storage.lease import acquire_waiting, default_owner, holder
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import (
    ALERTS_KEY,
    FLEET_JSON_KEY,
    INDEX_HTML_KEY,
    NOTIFICATIONS_KEY,
    Storage,
    StorageSettings,
    damaged_key,
    model_json_key,
    report_html_key,
)

_COMMIT_ROUNDS = 5
#: The lease every notify step holds while it decides and sends: the audit's and each post-job's, one at a
#: time, so a claim in alerts.json is never a live writer's (stormwatch.alerting.claims). Held seconds.
NOTIFY_LEASE = "notify"
NOTIFY_LEASE_WAIT_S = 300.0


@dataclass(frozen=True)
class KeptJobs:
    """Every job an audit kept unchanged (their ids, a column) and the reports' base URL: the jobs whose
    alerts a lost alert state recalls are looked up here, not passed one by one."""

    job_ids: pd.Series
    report_base_url: str | None = None

    def chosen(self, job_ids: frozenset[str]) -> list[UnchangedJob]:
        return [UnchangedJob(FleetRow(job_id=str(job_id), status=JobStatus.SKIPPED), None)
                for job_id in self.job_ids[self.job_ids.isin(list(job_ids))]]


@dataclass(frozen=True)
class UnchangedJob:
    """A job the audit did not diagnose again: its carried fleet row and its report's link."""

    row: FleetRow
    report_url: str | None


def unchanged_findings(
    storage: Storage, jobs: Sequence[UnchangedJob], ledger: LedgerState, *, settings: NotifySettings
) -> list[JobFinding]:
    """The findings of unchanged jobs that still need a decision, read from their model.json; the
    others cost no read. A job needs one when it was committed but never notified (an audit killed
    between its commit and its notify step: its run was never observed, so neither a new alert nor a
    resolution was decided), or when the ledger lacks its decision (:func:`undecided`: a failed
    ledger write, a ledger from before the alert state). A missing or damaged model.json gives none."""
    needed = []
    for job in jobs:
        row = job.row
        indicators = {IndicatorKind.EARLIEST: row.earliest, IndicatorKind.MOST_SEVERE: row.most_severe}
        never_notified = row.committed_at is not None and row.notified_at is None
        if never_notified or undecided(ledger, row.job_id, indicators, channels=settings.channels,
                                       notify_on=settings.notify_on):
            needed.append(job)
    return stored_findings(storage, needed)


def stored_findings(storage: Storage, jobs: Sequence[UnchangedJob]) -> list[JobFinding]:
    """The findings of ``jobs`` as their model.json holds them; a missing or damaged one gives none."""
    findings: list[JobFinding] = []
    for job in jobs:
        data = storage.read_report(model_json_key(job.row.job_id))
        try:
            document = orjson.loads(data) if data else None
            if isinstance(document, dict):
                findings.append(JobFinding.from_document(document, report_url=job.report_url))
        except (orjson.JSONDecodeError, ValueError):
            continue
    return findings


def repair_ledger(storage: Storage, ledger: bytes | None, *, now: datetime,
                  state: LedgerState | None = None) -> tuple[bytes | None, tuple[str, ...]]:
    """The ledger without its unreadable lines, rewritten so, the original kept under ``reports/damaged/``;
    and the line saying so (none when every line reads; ``state``: ``ledger`` read already). Run under
    the audit lease: nobody appends meanwhile."""
    if ledger is None or not (state or read_ledger(ledger)).problems:
        return ledger, ()
    repair = without_unreadable_lines(ledger)
    kept = damaged_key(NOTIFICATIONS_KEY, now)
    storage.write_report(kept, ledger, content_type=MediaType.NDJSON)
    storage.write_report(NOTIFICATIONS_KEY, repair.kept, content_type=MediaType.NDJSON)
    lines = ", ".join(str(number) for number in repair.dropped[:10]) + (" ..." if len(repair.dropped) > 10 else "")
    noun = "line" if len(repair.dropped) == 1 else "lines"
    return repair.kept, (f"{report_name(storage, NOTIFICATIONS_KEY)} {noun} {lines} unreadable: taken out, the file "
                         f"as it was kept as {report_name(storage, kept)}",)


def commit_alerts(storage: Storage, result: NotifyResult, *, version: str | None, read: bytes | None) -> bool:
    """Write the settled alert state over ``version`` (the one read, or this audit's claim); on a
    conflict merge this audit's outcomes into the newer state. False when it never landed."""
    data: bytes | None = result.alerts
    for _ in range(_COMMIT_ROUNDS):
        if data is None:
            return False
        if version is None:
            written = storage.create_report_exclusive(ALERTS_KEY, data, content_type=MediaType.JSON)
        elif data == read:
            return True  # nothing changed (a rerun)
        else:
            written = storage.replace_report_if(ALERTS_KEY, data, version=version, content_type=MediaType.JSON)
        if written is not None:
            return True
        current = storage.read_report_versioned(ALERTS_KEY)
        read, version = (None, None) if current is None else current
        data = result.alerts if current is None else merged(read, result.token, result.settled)
    return False


def publish_overview(storage: Storage, overview: Mapping[str, object], *, notified: Collection[str] = (),
                     stamp: str | None = None) -> bool:
    """fleet.json with its ``alerts`` member replaced and the rows of the ``notified`` job ids marked
    ``notified_at`` = ``stamp`` (their runs were observed by a notify step that ran to its end), and
    the index rendered again over the window's stored runs; False without a fleet.json."""
    data = storage.read_report(FLEET_JSON_KEY)
    if not data:
        return False
    document = orjson.loads(data)
    document["alerts"] = overview
    listed = [job for job in document.get("jobs", ()) if isinstance(job, dict)]
    window = document.get("window")
    since = window.get("since") if isinstance(window, dict) else None
    stored = window_rows(storage, since=date.fromisoformat(since), now=datetime.now(UTC)) if since else []
    ids = {row.job_id for row in stored}
    shown = [*(row.as_json() for row in stored), *(job for job in listed if job.get("job_id") not in ids)]
    for job in [*listed, *shown]:
        if job.get("job_id") in notified:
            job["notified_at"] = stamp
    storage.write_report(FLEET_JSON_KEY, orjson.dumps(document), content_type=MediaType.JSON)
    index = render_index(document, jobs=sorted(shown, key=lambda job: str(job.get("job_id"))))
    storage.write_report(INDEX_HTML_KEY, index.encode("utf-8"), content_type=MediaType.HTML)
    return True


def notify_step(
    storage: Storage,
    findings: Sequence[JobFinding],
    *,
    settings: NotifySettings,
    now: datetime,
    unchanged: Sequence[UnchangedJob] = (),
    fleet_evaluated: bool = False,
    overview: bool = True,
    kept: KeptJobs | None = None,
    whole: bool = True,
) -> dict[str, object]:
    """Decide and send for ``findings`` (``fleet_evaluated``: they include the fleet's regressions and
    suspect devices, computed now); returns counts for the flow's summary. ``overview``: refresh
    fleet.json's ``alerts`` member and the index (a post-job does not: it rewrites nothing
    fleet-wide, and the next fold marks its job notified, :mod:`stormwatch.tasks.compact`; the audit
    does not either: it publishes the ``overview`` returned, with the ``observed`` job ids stamped).
    ``kept``: every unchanged job, for the alerts a lost alert state recalls (``unchanged``: those
    looked at anyway). ``whole``: this step holds the audit lease: it repairs the ledger, carries the
    post-jobs' segments into its own and folds the ledger now and then; else (a post-job) its new
    ledger lines are a segment of its own (:mod:`stormwatch.tasks.notify.ledger_store`), and a claim
    lost to another writer is decided again."""
    lease = acquire_waiting(storage, name=NOTIFY_LEASE, owner=default_owner("notify"), wait_s=NOTIFY_LEASE_WAIT_S,
                            poll_s=0.2)
    if lease is None:
        busy = holder(storage, name=NOTIFY_LEASE)
        why = (f"nothing decided: after {NOTIFY_LEASE_WAIT_S:g} s another notify step still holds the notify lease "
               f"{busy.describe() if busy else '(released just now)'}; the next audit decides these runs")
        return {"sent": 0, "failed": 0, "skipped": 0, "channels": [str(channel) for channel in settings.channels],
                "problems": [why], "receivers": [], "refused": why}
    summary: dict[str, object] = {}
    try:
        with lease.kept_alive():
            for _ in range(_COMMIT_ROUNDS):  # a claim refused (the state changed meanwhile): decide again
                summary = _notify_once(storage, findings, settings=settings, now=now, unchanged=unchanged,
                                       fleet_evaluated=fleet_evaluated, overview=overview, kept=kept, whole=whole)
                if "refused" not in summary or whole:
                    break
    finally:
        lease.release()
    return summary


def _notify_once(
    storage: Storage,
    findings: Sequence[JobFinding],
    *,
    settings: NotifySettings,
    now: datetime,
    unchanged: Sequence[UnchangedJob],
    fleet_evaluated: bool,
    overview: bool,
    kept: KeptJobs | None,
    whole: bool,
) -> dict[str, object]:
    found = read_ledger_bytes(storage)
    read = found.data
    state = read_ledger(read)  # once (the newest line of each alert, and the lines since the last audit)
    ledger, repaired = repair_ledger(storage, read, now=now, state=state) if whole else (read, ())
    if repaired:  # notifications.jsonl holds every segment's lines now: the write below deletes them
        state = read_ledger(ledger)
        found = LedgerRead(ledger, found.segments, base_bytes=len(ledger or b""))
    current = storage.read_report_versioned(ALERTS_KEY)
    alerts, version = (None, None) if current is None else current
    if unchanged:  # jobs whose decision the ledger lacks (a failed write, no alert state yet): evaluated again
        findings = [*findings, *unchanged_findings(storage, unchanged, state, settings=settings)]
    config = load_alert_config(storage, routes_file=settings.alerting.routes_file, default=default_receiver(settings))
    claimed: list[str | None] = [version]

    def claim(data: bytes) -> bool:
        if version is None:
            claimed[0] = storage.create_report_exclusive(ALERTS_KEY, data, content_type=MediaType.JSON)
        else:
            claimed[0] = storage.replace_report_if(ALERTS_KEY, data, version=version, content_type=MediaType.JSON)
        return claimed[0] is not None

    evaluated = {finding.job_id for finding in findings}

    def revive(job_ids: frozenset[str]) -> list[JobFinding]:  # the alert state was lost: see notify_jobs
        wanted = job_ids - evaluated
        known = [job for job in unchanged if job.row.job_id in wanted]
        seen = {job.row.job_id for job in known}
        others = [] if kept is None else [UnchangedJob(job.row, report_link(
            storage, report_html_key(job.row.job_id), base_url=kept.report_base_url))
            for job in kept.chosen(frozenset(wanted - seen))]
        return stored_findings(storage, [*known, *others])

    result = notify_jobs(findings, ledger=ledger, settings=settings, now=now, alerts=alerts, routes=config.routes,
                         silences=config.silences, fleet_evaluated=fleet_evaluated, config=config.files, claim=claim,
                         repairs=repaired, revive=revive, ledger_state=state)
    summary: dict[str, object] = {
        "sent": result.sent, "failed": result.failed, "skipped": result.skipped,
        "channels": [str(channel) for channel in settings.channels], "problems": list(result.problems),
        "receivers": [item["name"] for item in result.overview.get("receivers", [])],  # type: ignore[attr-defined]
    }
    if result.refused:
        return {**summary, "refused": result.refused}
    if result.rebuilt is not None and alerts:  # the damaged state is kept for people, never read again
        storage.write_report(damaged_key(ALERTS_KEY, now), alerts, content_type=MediaType.JSON)
    # the sends recorded first (segments folded in): a claim left in alerts.json is settled from these lines
    if result.changed or repaired or (whole and found.segments):
        write_ledger(storage, result.ledger, read=found, whole=whole, now=now, fold=bool(repaired))
    stored = commit_alerts(storage, result, version=claimed[0], read=None if claimed[0] != version else alerts)
    if not stored:
        summary["problems"] = [*result.problems, "alerts.json could not be written: it kept changing"]
    notified = {finding.job_id for finding in findings} | {job.row.job_id for job in unchanged}
    if overview:
        publish_overview(storage, result.overview, notified=notified, stamp=now.isoformat())
    else:
        summary["overview"] = result.overview
        summary["observed"] = sorted(notified)
    return summary


@task(name="notify", cache_policy=NO_CACHE)
def notify_task(
    storage_settings: StorageSettings,
    findings: Sequence[JobFinding],
    settings: NotifySettings,
    now: datetime,
    unchanged: Sequence[UnchangedJob] = (),
    fleet_evaluated: bool = False,
    overview: bool = True,
    kept: KeptJobs | None = None,
    whole: bool = True,
) -> dict[str, object]:
    return notify_step(storage_for(storage_settings), findings, settings=settings, now=now, unchanged=unchanged,
                       fleet_evaluated=fleet_evaluated, overview=overview, kept=kept, whole=whole)
