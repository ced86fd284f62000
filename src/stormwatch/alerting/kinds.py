"""The kinds of finding an alert is about, and which of them are per rank, per job or fleet-wide.

A job's first-cause indicators (``earliest``, ``most_severe``: the engine's
:class:`~stormwatch.analysis.model.IndicatorKind`, one rank each), the job-level ``oom`` (its
first OOM marker), ``missing_ranks`` and ``leak`` (a rank whose memory grows steadily, from the
job's growth figures, one alert per leaking rank), and the fleet-wide ``regression`` (a run
against earlier runs of its name), ``suspect_host`` (a device where first causes gather) and
``capacity`` (a job name whose peak is projected to outgrow its device within a few runs).

Which are sent whatever ``notify_on`` (:data:`ALWAYS_SENT`): the fleet-wide kinds, and ``leak``.
A leak is a warning, but it is stormwatch's own finding about the run (the collector never
reports it as an alert of its own), so a fleet notifying on critical only would otherwise never
hear of a leak until it became an OOM.
"""

from __future__ import annotations

from enum import StrEnum

from stormwatch.analysis.model import IndicatorKind


class AlertKind(StrEnum):
    EARLIEST = IndicatorKind.EARLIEST.value
    MOST_SEVERE = IndicatorKind.MOST_SEVERE.value
    OOM = "oom"
    MISSING_RANKS = "missing_ranks"
    LEAK = "leak"
    REGRESSION = "regression"
    SUSPECT_HOST = "suspect_host"
    CAPACITY = "capacity"

    @property
    def per_rank(self) -> bool:
        """A first-cause indicator on one rank (what job-level and host alerts inhibit)."""
        return self in (AlertKind.EARLIEST, AlertKind.MOST_SEVERE)

    @property
    def fleet_wide(self) -> bool:
        """Evaluated from the fleet's sections, sent whatever ``notify_on``."""
        return self in FLEET_KINDS

    @property
    def always_sent(self) -> bool:
        """Sent whatever ``notify_on`` (:data:`ALWAYS_SENT`)."""
        return self in ALWAYS_SENT

    @property
    def label(self) -> str:
        """For people: ``Most severe``, ``OOM``..."""
        return KIND_LABELS[self]


KIND_LABELS: dict[str, str] = {AlertKind.EARLIEST: "Earliest", AlertKind.MOST_SEVERE: "Most severe",
                               AlertKind.REGRESSION: "Regression", AlertKind.SUSPECT_HOST: "Suspect host",
                               AlertKind.OOM: "OOM", AlertKind.MISSING_RANKS: "Missing ranks",
                               AlertKind.LEAK: "Leak", AlertKind.CAPACITY: "Capacity"}
#: Findings about the fleet rather than one job's first cause (see :mod:`.fleet_findings`): sent once
#: each on every configured channel, whatever ``notify_on``.
FLEET_KINDS = frozenset({AlertKind.REGRESSION, AlertKind.SUSPECT_HOST, AlertKind.CAPACITY})
#: Sent whatever ``notify_on``: the fleet-wide kinds and the job's own ``leak`` (see the module).
ALWAYS_SENT = FLEET_KINDS | {AlertKind.LEAK}
