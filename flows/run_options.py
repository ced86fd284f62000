"""The options ``audit``, ``serve`` and ``post-job`` share, and what they become: the flow parameters
(:class:`~stormwatch.flows.parameters.AuditParameters`, built before Prefect is imported), secrets in
this process's environment, and the task runner of the flow runs.

Importing this module imports neither Prefect nor pydantic (every command's parser is built from it).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from stormwatch.analysis.collective import CollectivePreset
from stormwatch.severity import FailOn, Severity
from stormwatch.tasks.batches import BatchSizing
from stormwatch.tasks.engine_pool import DEFAULT_JOB_TIMEOUT_S, EngineMode

if TYPE_CHECKING:
    from stormwatch.flows.parameters import AuditParameters

STORAGE_VARIABLE = "STORMWATCH_STORAGE"
SECRET_FLAGS = {"slack_webhook": "STORMWATCH_SLACK_WEBHOOK", "smtp_url": "STORMWATCH_SMTP_URL"}
#: The options of ``audit`` that are no flow parameter, and why. Every other option is the parameter
#: of its destination's name, so a deployment (serve, infra/prefect.yaml, post-job) can set it:
#: tests/flows/test_deployment_options.py walks the options. A new option goes in one of the two.
COMMAND_ONLY = {
    "slack_webhook": "a secret: STORMWATCH_SLACK_WEBHOOK in the run's environment, or slack_webhook_block",
    "smtp_url": "a secret: STORMWATCH_SMTP_URL in the run's environment, or smtp_url_block",
    "verbose": "PREFECT_LOGGING_LEVEL=INFO in the run's environment",
    "break_lease": "a one-off step before a run, not a setting of runs",
    "debug": "the command's own traceback on an error (every command takes it)",
}
_OPTIONAL = ("workers", "batch_bytes", "job_timeout_s", "dask_address",
             "as_of", "job_name_pattern", "history_days", "index_days", "retention_days",
             "baseline_runs", "regression_pct",
             "suspect_days", "max_sessions", "repeat_interval", "group_above")


def storage_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", default=None, metavar="URI",
                        help=f"storage root: a folder or s3://bucket/prefix (default: ${STORAGE_VARIABLE})")
    parser.add_argument("--endpoint-url", default=None, metavar="URL",
                        help="S3-compatible endpoint (default: $AWS_ENDPOINT_URL, else AWS)")
    parser.add_argument("--fail-on", default=FailOn.NEVER.value, choices=[item.value for item in FailOn])
    parser.add_argument("--preset", default=CollectivePreset.MEDIUM.value,
                        choices=[item.value for item in CollectivePreset], help="collective attribution preset")
    parser.add_argument("--max-job-bytes", type=int, default=None, metavar="N",
                        help="refuse (fail) a job whose inputs add up to more than N bytes")
    parser.add_argument("--max-artifact-bytes", type=int, default=None, metavar="N",
                        help="skip (with a warning) any artifact larger than N bytes, unread (default 1 GiB)")
    parser.add_argument("--max-events", type=int, default=None, metavar="N",
                        help="fail a job holding more than N events; the others continue (default 50,000,000)")
    parser.add_argument("--max-sessions", type=int, default=None, metavar="N",
                        help="diagnose at most N sessions of a job: the default one and the most recent; the "
                             "others are listed and counted, with a warning (default 64)")
    leak_min_argument(parser)
    parser.add_argument("--verbose", action="store_true", help="Prefect logs at INFO")
    parser.add_argument("--report-base-url", default=None, metavar="URL",
                        help="http(s) address where reports/ is served, for links in notifications")
    parser.add_argument("--pushgateway", default=None, metavar="URL",
                        help="Prometheus Pushgateway (http://host:9091): each audit replaces this storage's group "
                             "with the metrics of reports/metrics.prom (docs/metrics.md)")
    history = parser.add_argument_group("history (reports/history/) and fleet comparisons")
    history.add_argument("--job-name-pattern", default=None, metavar="REGEX",
                         help="group 1 of this regex, matched against a job id, is its job name (default: the id "
                              "without a trailing run number or date: llama-8r-0142 -> llama-8r)")
    history.add_argument("--history-days", type=int, default=None, metavar="N",
                         help="nights of history kept (default 90)")
    history.add_argument("--index-days", type=int, default=None, metavar="N",
                         help="nights of runs the index and fleet.json show; older nights are linked (default 7)")
    history.add_argument("--retention-days", type=int, default=None, metavar="N",
                         help="prune runs (their runs files and reports/<job>/ reports) last diagnosed more than N "
                              "nights ago; inputs under jobs/ are never touched (default: nothing is pruned)")
    history.add_argument("--baseline-runs", type=int, default=None, metavar="N",
                         help="a job's baseline: the median of its job name's last N runs (default 7; fewer than 3 "
                              "earlier runs: no baseline yet)")
    history.add_argument("--regression-pct", type=float, default=None, metavar="P",
                         help="a run regresses at a peak P%% and 3 MADs above its baseline (default 10)")
    history.add_argument("--suspect-days", type=int, default=None, metavar="D",
                         help="hosts and devices are judged over the last D nights (default 14)")
    notify = parser.add_argument_group("notifications (secrets also from the environment or Prefect Secret blocks)")
    notify.add_argument("--notify-on", default=None, choices=[Severity.WARNING.value, Severity.CRITICAL.value],
                        help="least first-cause severity that notifies (default critical; $STORMWATCH_NOTIFY_ON)")
    notify.add_argument("--slack-webhook", default=None, metavar="URL", help="($STORMWATCH_SLACK_WEBHOOK)")
    notify.add_argument("--smtp-url", default=None, metavar="URL",
                        help="smtp://user:password@host:port or smtps://... ($STORMWATCH_SMTP_URL)")
    notify.add_argument("--email-to", default=None, metavar="ADDR[,ADDR]", help="($STORMWATCH_EMAIL_TO)")
    notify.add_argument("--email-from", default=None, metavar="ADDR", help="($STORMWATCH_EMAIL_FROM)")
    notify.add_argument("--slack-webhook-block", default=None, metavar="NAME", help="Prefect Secret block name")
    notify.add_argument("--smtp-url-block", default=None, metavar="NAME", help="Prefect Secret block name")
    notify.add_argument("--digest", action="store_true", help="one message per audit listing every new critical job")
    notify.add_argument("--routes", default=None, metavar="FILE",
                        help="TOML routes file: receivers by job-id glob, job name, severity, kind (default: "
                             "reports/routes.toml in storage, if there)")
    notify.add_argument("--repeat-interval", default=None, metavar="DURATION",
                        help="send a still-firing alert again after DURATION (7d, 36h, 90m; default 7d)")
    notify.add_argument("--notify-resolved", action="store_true", help="send a message when an alert resolves")
    notify.add_argument("--group-above", type=int, default=None, metavar="N",
                        help="one message per receiver listing its due alerts when it has more than N (default 3)")


def leak_min_argument(parser: argparse.ArgumentParser) -> None:
    """``--leak-min RATE`` (``diagnose`` and the flow commands): checked by
    :func:`~stormwatch.growth.leak_min.parse_leak_min` when the options are built."""
    parser.add_argument("--leak-min", default=None, metavar="RATE",
                        help="growth a rank must reach to be a leak: 512MiB/h, 1.5GiB/h, 268435456/h (bytes), "
                             "0.8%%/h (of the rank's device), 1GiB/h,1%%/h (the larger) or default (the larger "
                             "of 256MiB/h and 0.5%%/h)")


def run_arguments(parser: argparse.ArgumentParser, *, batches: bool, as_of_help: str | None = None) -> None:
    """How jobs are diagnosed: ``batches`` adds the engine pool's flags (``--workers``, ``--batch-bytes``),
    which a single job (post-job, one task, no engine pool) has no use for; ``--engine`` and
    ``--job-timeout`` apply to both (a post-job's job runs in a process of its own, or in its thread)."""
    parser.add_argument("--force", action="store_true", help="re-diagnose jobs whose inputs did not change")
    if batches:
        parser.add_argument("--workers", type=int, default=None, metavar="N",
                            help="engine workers diagnosing jobs at once (default: one per core)")
        parser.add_argument("--engine", default=None, choices=[mode.value for mode in EngineMode],
                            help="where jobs run: worker processes (default), threads, or inline "
                                 "(the default with --dask-address: each Dask worker is a process)")
    else:
        parser.add_argument("--engine", default=None, choices=[mode.value for mode in EngineMode],
                            help="where the job runs: a process of its own, killed at --job-timeout (processes, "
                                 "the default), or the task's thread, never killed (threads, inline)")
    if batches:
        parser.add_argument("--batch-bytes", type=int, default=None, metavar="N",
                            help=f"most input bytes one diagnose-batch task takes (default {BatchSizing().max_bytes})")
    parser.add_argument("--job-timeout", dest="job_timeout_s", type=float, default=None, metavar="SECONDS",
                        help="kill a job running longer than SECONDS and record it failed (\"timed out after "
                             f"N s\"); an audit goes on with the other jobs (default {DEFAULT_JOB_TIMEOUT_S:g})")
    parser.add_argument("--as-of", default=None, metavar="DATETIME",
                        help=as_of_help or "act as of this ISO 8601 time (UTC unless it says otherwise; default now): "
                                           "the audit time, the history partition and every window, so a past "
                                           "night can be replayed")
    parser.add_argument("--dask-address", default=None, metavar="ADDR",
                        help="run the diagnose tasks on an existing Dask cluster (tcp://host:8786) through "
                             "prefect-dask")


def resolve_storage(args: argparse.Namespace) -> str | None:
    return args.storage or os.environ.get(STORAGE_VARIABLE)


def audit_parameters(args: argparse.Namespace, *, storage: str) -> AuditParameters:
    """The flow parameters, built once from the flags (validated: ValueError names a bad value).
    Secret flags are not among them (:func:`hand_secrets_to_environment`)."""
    from stormwatch.flows.parameters import AuditParameters  # pydantic: only for the flow commands

    return AuditParameters.parse({
        "storage": storage,
        "endpoint_url": args.endpoint_url,
        "force": getattr(args, "force", False),
        "fail_on": args.fail_on,
        "preset": args.preset,
        "max_job_bytes": args.max_job_bytes,
        "max_artifact_bytes": args.max_artifact_bytes,
        "max_events": args.max_events,
        "leak_min": getattr(args, "leak_min", None),
        "report_base_url": args.report_base_url,
        "pushgateway": getattr(args, "pushgateway", None),
        "notify_on": args.notify_on or os.environ.get("STORMWATCH_NOTIFY_ON") or Severity.CRITICAL.value,
        "digest": args.digest,
        "email_to": args.email_to,
        "email_from": args.email_from,
        "slack_webhook_block": args.slack_webhook_block,
        "smtp_url_block": args.smtp_url_block,
        "routes": getattr(args, "routes", None),
        "notify_resolved": getattr(args, "notify_resolved", False),
        **optional_choices(args),
    })


def optional_choices(args: argparse.Namespace) -> dict[str, object]:
    """The flags given that have no value otherwise (a command without a flag: its default); with a
    Dask address the engine runs inline on the Dask workers unless told otherwise."""
    choices: dict[str, object] = {}
    engine = getattr(args, "engine", None)
    if engine is None and getattr(args, "dask_address", None):
        engine = EngineMode.INLINE.value
    if engine is not None:
        choices["engine"] = engine
    for name in _OPTIONAL:
        if getattr(args, name, None) is not None:
            choices[name] = getattr(args, name)
    return choices


def hand_secrets_to_environment(args: argparse.Namespace) -> None:
    """Secret flags reach the flow through this process's environment, never as flow parameters
    (Prefect stores parameters in its database)."""
    for name, variable in SECRET_FLAGS.items():
        value = getattr(args, name, None)
        if value:
            os.environ[variable] = value


def task_runner(params: AuditParameters, dask_address: str | None) -> Any:
    """Tasks on a Dask cluster when given its address, else on threads of this process: twice as
    many as engine workers, so the workers are fed while a batch waits for its last job."""
    if dask_address:
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(address=dask_address)
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=2 * params.engine_settings().parallelism)
