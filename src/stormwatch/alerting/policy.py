"""How alerts behave over time and where the routes come from: one frozen policy, part of the notify settings.

``repeat_interval``: a still-firing alert is sent again to a target only when at least this long
has passed since it was last sent there (default 7 days) and an audit observes it again.
``notify_resolved``: send a message when an alert resolves (a receiver's ``send_resolved`` wins).
``group_above``: a receiver with more due alerts than this in one audit gets one message listing
them all instead of one per job (default 3). ``routes_file``: a local TOML file (else
``reports/routes.toml`` in storage, when there). ``job_name_pattern``: as the audit's (job names
group runs into one alert). A send another audit claimed is never waited for: only the audit lease's
holder sends, so such a claim is a stopped audit's, settled at once from the ledger
(:mod:`stormwatch.alerting.claims`).

A plain dataclass, checked when built (ValueError, never quoting a value); the notify settings
(pydantic) validate it as a field of theirs. Durations as people write them (``7d``, ``P7D``) are
read at the edge, ``stormwatch.tasks.notify.settings.parse_duration``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from stormwatch.history.job_names import JobNamePattern

DEFAULT_REPEAT_INTERVAL = timedelta(days=7)
DEFAULT_GROUP_ABOVE = 3


@dataclass(frozen=True)
class AlertPolicy:
    """Invariants: ``repeat_interval`` positive, ``group_above`` >= 0, and
    ``job_name_pattern`` (when given) a valid :class:`~stormwatch.history.job_names.JobNamePattern`."""

    repeat_interval: timedelta = DEFAULT_REPEAT_INTERVAL
    notify_resolved: bool = False
    group_above: int = DEFAULT_GROUP_ABOVE
    routes_file: str | None = None
    job_name_pattern: str | None = None

    def __post_init__(self) -> None:
        if self.repeat_interval <= timedelta(0):
            raise ValueError("repeat interval must be positive")
        if isinstance(self.group_above, bool) or self.group_above < 0:
            raise ValueError("group_above must be a whole number, 0 or more")
        if self.job_name_pattern is not None:
            JobNamePattern(self.job_name_pattern)

    def job_names(self) -> JobNamePattern:
        return JobNamePattern(self.job_name_pattern) if self.job_name_pattern else JobNamePattern()
