"""Inhibition: a firing source alert mutes the per-rank alerts it explains, which are folded into its message.

Sources, in order of precedence:

- a job-level ``oom`` or ``missing_ranks`` alert inhibits the per-rank alerts (``earliest``,
  ``most_severe``) last seen in the same run (job id): the OOM or the lost rank is the news,
  the ranks' first causes are its symptoms;
- a ``suspect_host`` alert (host, device) inhibits the per-rank alerts whose rank ran on that
  device: one message about the device lists the jobs it hit;
- a ``suspect_host`` alert also inhibits the ``regression`` alerts whose value was set by a rank
  on that device (the regression finding's placement, :mod:`.fleet_findings`; fleet.json marks
  them ``explained_by_suspect``): a device that adds memory to every job placed on it is the
  device's news, not each job team's. The regression is still an alert (its state, its
  resolution, the index's "explained by suspect device" line), told only inside the device's
  message, so a regression the device did not cause (another rank set it) still reaches the team;
- a ``leak`` alert (job id, rank) inhibits the peak reserved ``regression`` alert of the same run
  whose value that rank set (fleet.json marks it ``explained_by_leak``): the leak is the news and
  the run's higher peak its symptom, so the job's team hears it once, in the leak's message.

Only firing alerts inhibit or are inhibited. A source is raised to the worst severity of what it
inhibits, so muting never hides a finding that reaches the notification threshold: it is sent
inside its source's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stormwatch.alerting.alert_records import AlertRecord, AlertStatus
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.observations import Fingerprint
from stormwatch.history.regressions import RegressionMetric
from stormwatch.severity import Severity

JOB_LEVEL = (AlertKind.OOM, AlertKind.MISSING_RANKS)
_PEAK_RESERVED_SIGNAL = f"{AlertKind.REGRESSION.value}:{RegressionMetric.PEAK_RESERVED.value}"


@dataclass(frozen=True)
class Inhibitions:
    """``by``: inhibited alert -> its source; ``severity``: each source's raised severity."""

    by: Mapping[Fingerprint, Fingerprint]
    severity: Mapping[Fingerprint, Severity]
    _folded: dict[Fingerprint, list[Fingerprint]] = field(default_factory=dict, init=False, repr=False,
                                                          compare=False)

    def __post_init__(self) -> None:
        for target in sorted(self.by, key=Fingerprint.sort_key):
            self._folded.setdefault(self.by[target], []).append(target)

    def folded(self, source: Fingerprint) -> list[Fingerprint]:
        """The alerts ``source`` inhibits, in fingerprint order."""
        return self._folded.get(source, [])


def inhibit(records: Mapping[Fingerprint, AlertRecord]) -> Inhibitions:
    """Which firing per-rank and regression alerts are inhibited, and by what."""
    firing = {key: record for key, record in records.items() if record.status is AlertStatus.FIRING}
    job_sources: dict[str, Fingerprint] = {}
    for kind in JOB_LEVEL:  # an OOM before missing ranks
        for key in sorted(firing, key=Fingerprint.sort_key):
            if key.kind is kind:
                job_sources.setdefault(firing[key].key.job_id, key)
    devices: dict[tuple[str, int | None], Fingerprint] = {
        (key.host or "", key.device): key for key in firing if key.kind is AlertKind.SUSPECT_HOST}
    leaks: dict[tuple[str, int], Fingerprint] = {
        (firing[key].key.job_id, firing[key].fact.rank): key for key in firing if key.kind is AlertKind.LEAK}
    by: dict[Fingerprint, Fingerprint] = {}
    for key, record in firing.items():
        if key.kind is AlertKind.REGRESSION:
            place = record.job.rank_at(record.fact.rank)
            source = devices.get(place) if place is not None else None
            if source is None and record.fact.signal == _PEAK_RESERVED_SIGNAL:
                source = leaks.get((record.key.job_id, record.fact.rank))
            if source is not None:
                by[key] = source
            continue
        if not key.kind.per_rank:
            continue
        source = job_sources.get(record.key.job_id)
        if source is None:
            place = record.job.rank_at(record.fact.rank)
            source = devices.get(place) if place is not None else None
        if source is not None:
            by[key] = source
    severity: dict[Fingerprint, Severity] = {}
    for target, source in by.items():
        current = severity.get(source, firing[source].severity)
        worst = firing[target].severity
        severity[source] = worst if worst.level > current.level else current
    return Inhibitions(by, severity)
