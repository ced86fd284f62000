"""The flow parameters shared by ``nightly-audit`` and ``post-job``: one typed, validated, frozen model.

The command line builds an :class:`AuditParameters` once from its flags, ``stormwatch serve``
and ``infra/prefect.yaml`` give one to each deployment, and Prefect shows its fields (with
their fixed choices) in the UI. Prefect stores flow parameters in its database, so this
model holds no secret, and cannot: unknown fields are refused (no ``slack_webhook`` or
``smtp_url`` can slip in) and no URL field may carry a password. Secrets reach a flow run
through its environment (``STORMWATCH_SLACK_WEBHOOK``, ``STORMWATCH_SMTP_URL``) or a Prefect
Secret block named here (:mod:`stormwatch.tasks.notify.settings`).

Importing this module never imports Prefect (the command line imports it before Prefect's
settings are in place).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stormwatch.alerting.policy import DEFAULT_GROUP_ABOVE, DEFAULT_REPEAT_INTERVAL, AlertPolicy
from stormwatch.analysis.collective import CollectivePreset
from stormwatch.diagnose import DEFAULT_MAX_SESSIONS
from stormwatch.growth.leak_min import parse_leak_min
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.regressions import RegressionThresholds
from stormwatch.history.suspects import SuspectThresholds
from stormwatch.load.limits import LoadLimits
from stormwatch.severity import FailOn
from stormwatch.tasks.batches import BatchSizing
from stormwatch.tasks.engine_pool import DEFAULT_JOB_TIMEOUT_S, EngineMode, EngineSettings
from stormwatch.tasks.notify.settings import parse_duration, plain_error
from stormwatch.tasks.storage.protocol import StorageSettings

#: The least first-cause severity that notifies (``info`` would notify on everything).
NotifyOn = Literal["warning", "critical"]
_OPTIONAL_TEXT = ("endpoint_url", "report_base_url", "email_to", "email_from", "slack_webhook_block", "smtp_url_block",
                  "routes", "pushgateway", "dask_address", "leak_min")


class AuditParameters(BaseModel):
    """Where to audit and how; the same for a whole audit and for one job (``post-job``).

    Units: ``max_job_bytes`` caps one job's total input in bytes (a larger job fails); ``batch_bytes``
    bounds the input of one diagnose-batch task, in bytes (at least 1 MiB);
    ``max_artifact_bytes`` (bytes) and ``max_events`` (events) are the loader's caps, ``None``
    for their defaults, positive when given; ``leak_min`` is the canonical text of a leak threshold
    (:func:`~stormwatch.growth.leak_min.parse_leak_min`), ``None`` for the default.
    Invariants: frozen; no unknown field; ``storage`` not blank; blank optional texts are ``None``;
    no URL holds a password.
    ``email_to``/``email_from`` ``None`` (``digest`` ``False``) leave them to ``STORMWATCH_EMAIL_TO``/
    ``STORMWATCH_EMAIL_FROM`` (``STORMWATCH_NOTIFY_DIGEST``) in the run's environment; the command line
    fills ``notify_on`` from ``--notify-on``, else ``STORMWATCH_NOTIFY_ON``, else ``critical``.
    ``digest`` applies to the nightly audit only.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True,
                              title="stormwatch audit parameters")

    storage: str = Field(description="storage root: a folder or s3://bucket/prefix")
    endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint (default: boto3's own)")
    force: bool = Field(default=False, description="re-diagnose jobs whose inputs did not change")
    fail_on: FailOn = Field(default=FailOn.NEVER, description="least severity that makes the exit code 3")
    preset: CollectivePreset = Field(default=CollectivePreset.MEDIUM, description="collective-detection preset")
    max_job_bytes: int | None = Field(default=None, description="bytes: fail a job whose inputs add up to more")
    max_artifact_bytes: int | None = Field(default=None, description="bytes: skip a larger artifact, unread")
    max_events: int | None = Field(default=None, description="events: fail a job holding more")
    leak_min: str | None = Field(default=None, description="growth a rank must reach to be a leak: 512MiB/h, "
                                 "1.5GiB/h, 268435456/h (bytes), 0.8%/h (of the device), or default (the larger "
                                 "of 256MiB/h and 0.5%/h)")
    max_sessions: int = Field(default=DEFAULT_MAX_SESSIONS, ge=1,
                              description="sessions of a job diagnosed at most: the default one and the most recent")
    report_base_url: str | None = Field(default=None, description="http(s) address where reports/ is served")
    pushgateway: str | None = Field(default=None, description="Prometheus Pushgateway URL: each audit replaces "
                                   "this storage's group with reports/metrics.prom (docs/metrics.md)")
    notify_on: NotifyOn = Field(default="critical", description="least first-cause severity that notifies")
    digest: bool = Field(default=False, description="one message per audit listing every job (nightly only)")
    email_to: str | None = Field(default=None, description="recipients, comma-separated")
    email_from: str | None = Field(default=None, description="sender address")
    slack_webhook_block: str | None = Field(default=None, description="Prefect Secret block with the webhook URL")
    smtp_url_block: str | None = Field(default=None, description="Prefect Secret block with the SMTP URL")
    routes: str | None = Field(default=None, description="local TOML routes file: receivers by job, name, severity, "
                               "kind (default: reports/routes.toml in storage, if there)")
    repeat_interval: timedelta = Field(default=DEFAULT_REPEAT_INTERVAL,
                                       description="a still-firing alert is sent again after this long (7d, 36h)")
    notify_resolved: bool = Field(default=False, description="send a message when an alert resolves")
    group_above: int = Field(default=DEFAULT_GROUP_ABOVE, ge=0,
                             description="one message per receiver listing its alerts when it has more than this")
    engine: EngineMode = Field(default=EngineMode.PROCESSES,
                               description="where jobs run: worker processes, threads, or inline (on Dask workers)")
    workers: int | None = Field(default=None, ge=1, description="engine workers (processes or threads); default: cores")
    batch_bytes: int = Field(default=BatchSizing().max_bytes, ge=1 << 20,
                             description="bytes: most input one diagnose-batch task takes (a larger job runs alone)")
    job_timeout_s: float = Field(default=DEFAULT_JOB_TIMEOUT_S, gt=0,
                                 description="seconds a job may run before it is killed and recorded failed")
    dask_address: str | None = Field(default=None, description="run the diagnose tasks on this Dask cluster "
                                     "(tcp://host:8786); the engine then runs inline unless told otherwise")
    as_of: datetime | None = Field(default=None, description="audit as of this time (UTC; default: now): "
                                   "the audit time, the history partition and every window")
    job_name_pattern: str | None = Field(default=None, description="regex whose group 1 is the job name of a job id "
                                         "(default: the id without a trailing run number or date)")
    history_days: int = Field(default=90, ge=1, description="days of history kept under reports/history/")
    index_days: int = Field(default=7, ge=1, description="nights of runs the index and fleet.json show")
    retention_days: int | None = Field(default=None, ge=1, description="nights of runs kept: older runs files and "
                                       "their runs' reports are pruned (default: nothing is pruned)")
    baseline_runs: int = Field(default=RegressionThresholds().runs, ge=1,
                               description="earlier runs of a job name whose median is its baseline")
    regression_pct: float = Field(default=RegressionThresholds().min_change * 100, ge=0,
                                  description="percent above the baseline (and 3 MADs) that is a regression")
    suspect_days: int = Field(default=SuspectThresholds().nights, ge=1,
                              description="nights over which hosts and devices are compared with the fleet")

    @field_validator("storage")
    @classmethod
    def _storage(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("storage must not be blank")
        return value

    @field_validator(*_OPTIONAL_TEXT, mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="before")
    @classmethod
    def _dask_runs_inline(cls, values: object) -> object:
        """With a Dask address and no engine given, jobs run inline on the Dask workers (each a process)."""
        if isinstance(values, Mapping) and values.get("dask_address") and values.get("engine") is None:
            return {**values, "engine": EngineMode.INLINE.value}
        return values

    @field_validator("endpoint_url", "report_base_url", "pushgateway", "dask_address")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is not None and "://" in value and urlsplit(value).password is not None:
            raise ValueError("a URL parameter must not hold a password (Prefect stores parameters)")
        return value

    @field_validator("repeat_interval", mode="before")
    @classmethod
    def _duration(cls, value: object) -> timedelta:
        return parse_duration(value)

    @field_validator("as_of")
    @classmethod
    def _as_of_utc(cls, value: datetime | None) -> datetime | None:
        """A naive time is UTC; any other is converted to UTC."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    @field_validator("job_name_pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            JobNamePattern(value)  # JobNamePatternError (a ValueError): does not compile, or has no group
        return value

    @field_validator("leak_min")
    @classmethod
    def _leak_min(cls, value: str | None) -> str | None:
        """Its canonical text (ValueError from :func:`parse_leak_min`: one line naming the value)."""
        return None if value is None else parse_leak_min(value).text

    @model_validator(mode="after")
    def _caps(self) -> AuditParameters:
        """The loader's caps as :class:`LoadLimits` checks them (positive integers)."""
        LoadLimits(**{name: value for name, value in self.load_caps().items() if value is not None})
        return self

    @classmethod
    def parse(cls, values: Mapping[str, object]) -> AuditParameters:
        """From plain values (command-line flags); raises ValueError naming what is wrong, not pydantic's report."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise plain_error(exc) from None

    def load_caps(self) -> dict[str, int | None]:
        """``max_artifact_bytes`` and ``max_events`` (``None``: the loader's default)."""
        return {"max_artifact_bytes": self.max_artifact_bytes, "max_events": self.max_events}

    def audit_time(self) -> datetime:
        """The time this audit acts at: ``as_of``, else now (UTC)."""
        return self.as_of or datetime.now(UTC)

    def job_names(self) -> JobNamePattern:
        return JobNamePattern(self.job_name_pattern) if self.job_name_pattern else JobNamePattern()

    def regression_thresholds(self) -> RegressionThresholds:
        return RegressionThresholds(runs=self.baseline_runs, min_change=self.regression_pct / 100)

    def suspect_thresholds(self) -> SuspectThresholds:
        return SuspectThresholds(nights=self.suspect_days)

    def engine_settings(self) -> EngineSettings:
        return EngineSettings(mode=self.engine, workers=self.workers, job_timeout_s=self.job_timeout_s)

    def batch_sizing(self) -> BatchSizing:
        sizing = BatchSizing()
        return BatchSizing(max_bytes=self.batch_bytes, min_bytes=min(sizing.min_bytes, self.batch_bytes))

    def storage_settings(self) -> StorageSettings:
        return StorageSettings(uri=self.storage, endpoint_url=self.endpoint_url)

    def notify_flags(self, *, digest: bool) -> dict[str, object]:
        """The non-secret notification values, as flags over the environment (``None``/``False``: unset)."""
        return {"notify_on": self.notify_on, "digest": digest, "email_to": self.email_to,
                "email_from": self.email_from}

    def alert_policy(self) -> AlertPolicy:
        """Repeat interval, resolved messages, grouping, the routes file and job names, for the notify step."""
        return AlertPolicy(repeat_interval=self.repeat_interval, notify_resolved=self.notify_resolved,
                           group_above=self.group_above, routes_file=self.routes,
                           job_name_pattern=self.job_name_pattern)

    def secret_blocks(self) -> dict[str, str]:
        """Prefect Secret block names by secret (``slack_webhook``, ``smtp_url``), the named ones only."""
        named = {"slack_webhook": self.slack_webhook_block, "smtp_url": self.smtp_url_block}
        return {name: block for name, block in named.items() if block}

    def as_deployment(self) -> dict[str, Any]:
        """JSON values for a deployment's ``parameters`` (enums as their strings)."""
        return self.model_dump(mode="json")
