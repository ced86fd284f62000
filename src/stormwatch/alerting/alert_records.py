"""One alert's record: its fingerprint, state, latest observation and what each target was last told.

An :class:`AlertRecord` is an alert's latest episode (a resolved alert that fires again starts a new
one, its targets reset). A target's :class:`TargetState` says when it was last told the alert fires
(``notified_at``, in this episode), whether the resolution was sent (``resolved_at``), the last
decision (``status``) and, while a send is under way, the claim (``claim`` token and ``claimed_at``)
that keeps a second audit from sending it too. Times are ISO 8601 UTC strings.

A record keeps of the finding of the run that last showed it only what its messages and inhibition
read (:func:`kept_finding`); :mod:`.alert_file` stores each such finding once per state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from stormwatch.alerting.findings import IndicatorFact, JobFinding
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import ChannelStatus, FindingKey
from stormwatch.alerting.observations import Fingerprint, Labels
from stormwatch.severity import Severity


class AlertStatus(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


class Transition(StrEnum):
    """What this audit did to an alert."""

    NEW = "firing"
    STILL_FIRING = "still_firing"
    RESOLVED = "resolved"
    NONE = "none"  # not evaluated now


@dataclass(frozen=True)
class TargetState:
    status: ChannelStatus
    notified_at: str | None = None
    resolved_at: str | None = None
    attempts: int = 0
    error: str | None = None
    claim: str | None = None
    claimed_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Members left at their default are left out."""
        out: dict[str, Any] = {"status": self.status.value}
        for name in ("notified_at", "resolved_at", "error", "claim", "claimed_at"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.attempts:
            out["attempts"] = self.attempts
        return out

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> TargetState:
        def text(name: str) -> str | None:
            return None if item.get(name) is None else str(item[name])

        return cls(status=ChannelStatus(item["status"]), notified_at=text("notified_at"),
                   resolved_at=text("resolved_at"), attempts=int(item.get("attempts", 0)), error=text("error"),
                   claim=text("claim"), claimed_at=text("claimed_at"))


@dataclass(frozen=True)
class AlertRecord:
    """One alert's latest episode. ``key``, ``fact``, ``job``: its latest observation (what a message
    says); ``severity``: after inhibition raised it (a source takes the worst of what it inhibits)."""

    fingerprint: Fingerprint
    status: AlertStatus
    severity: Severity
    started_at: str
    last_seen_at: str
    key: FindingKey
    fact: IndicatorFact
    job: JobFinding
    resolved_at: str | None = None
    silenced_by: str | None = None
    inhibited_by: str | None = None
    targets: Mapping[str, TargetState] = field(default_factory=dict)

    @property
    def labels(self) -> Labels:
        """What routes and silences match: the run that last showed it, its name, kind, severity..."""
        fingerprint = self.fingerprint
        job_id = "" if fingerprint.kind is AlertKind.SUSPECT_HOST else self.key.job_id
        return Labels(job_id=job_id, job_name=fingerprint.job_name, kind=fingerprint.kind, severity=self.severity,
                      signal=fingerprint.signal, host=fingerprint.host)


def kept_finding(job: JobFinding, *, rank: int) -> JobFinding:
    """What an alert on ``rank`` keeps of its run's finding: what messages (id, verdict, summary,
    indicators, missing ranks, report link, host, attempt) and inhibition (where ``rank`` ran) read.
    Left out: the other ranks' placements (a 64-rank job's record stays small), the job's OOM (an OOM
    alert's fact is its own) and its start (each fact carries its offset from it)."""
    kept = tuple(item for item in job.placements if item[0] == rank)
    if kept == job.placements and job.oom is None and job.started_at_ns is None:
        return job
    return replace(job, placements=kept, oom=None, started_at_ns=None)
