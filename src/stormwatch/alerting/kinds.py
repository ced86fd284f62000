"""The kinds of finding an alert is about, and which of them are per rank, per job or fleet-wide.

A job's first-cause indicators (``earliest``, ``most_severe``: the engine's
:class:`~stormwatch.analysis.model.IndicatorKind`, one rank each), the job-level ``oom`` (its
first OOM marker) and ``missing_ranks``, and the fleet-wide ``regression`` (a run against earlier
runs of its name) and ``suspect_host`` (a device where first causes gather).
"""

from __future__ import annotations

from enum import StrEnum

from stormwatch.analysis.model import IndicatorKind


class AlertKind(StrEnum):
    EARLIEST = IndicatorKind.EARLIEST.value
    MOST_SEVERE = IndicatorKind.MOST_SEVERE.value
    OOM = "oom"
    MISSING_RANKS = "missing_ranks"
    REGRESSION = "regression"
    SUSPECT_HOST = "suspect_host"

    @property
    def per_rank(self) -> bool:
        """A first-cause indicator on one rank (what job-level and host alerts inhibit)."""
        return self in (AlertKind.EARLIEST, AlertKind.MOST_SEVERE)

    @property
    def fleet_wide(self) -> bool:
        """Evaluated from the fleet's sections, sent whatever ``notify_on``."""
        return self in FLEET_KINDS

    @property
    def label(self) -> str:
        """For people: ``Most severe``, ``OOM``..."""
        return KIND_LABELS[self]


KIND_LABELS: dict[str, str] = {AlertKind.EARLIEST: "Earliest", AlertKind.MOST_SEVERE: "Most severe",
                               AlertKind.REGRESSION: "Regression", AlertKind.SUSPECT_HOST: "Suspect host",
                               AlertKind.OOM: "OOM", AlertKind.MISSING_RANKS: "Missing ranks"}
#: Findings about the fleet rather than one job's first cause (see :mod:`.fleet_findings`): sent once
#: each on every configured channel, whatever ``notify_on``.
FLEET_KINDS = frozenset({AlertKind.REGRESSION, AlertKind.SUSPECT_HOST})
