"""A job's fleet facts together: model.json's ``fleet`` member.

``fleet`` sits beside ``model`` (whose reference fields it never touches)::

    "fleet": {
      "ranks": [RankFacts, ...],          # one per present rank, rank order (bytes)
      "outlier_ranks": [{rank, metric, value_bytes, median_bytes, robust_z}, ...],
      "coverage": {Coverage},
      "regression": null                  # filled from the audit history, not by the engine
    }
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.load.loader import LoadResult
from stormwatch.peers.coverage import Coverage, job_coverage
from stormwatch.peers.outliers import DEFAULT_THRESHOLDS, OutlierRank, OutlierThresholds, outlier_ranks
from stormwatch.peers.rank_facts import RankFacts, rank_facts


@dataclass(frozen=True)
class FleetFacts:
    """Per-rank facts, the ranks that stand out among them, and the job's coverage."""

    ranks: tuple[RankFacts, ...]
    outlier_ranks: tuple[OutlierRank, ...]
    coverage: Coverage

    def as_dict(self) -> dict[str, Any]:
        """The ``fleet`` member as plain JSON data (``regression`` is left ``None``)."""
        return {
            "ranks": [dataclasses.asdict(fact) for fact in self.ranks],
            "outlier_ranks": [
                {**dataclasses.asdict(outlier), "metric": outlier.metric.value} for outlier in self.outlier_ranks
            ],
            "coverage": self.coverage.as_dict(),
            "regression": None,
        }


def fleet_facts(
    loaded: LoadResult, model: DiagnosticsModel, *, thresholds: OutlierThresholds = DEFAULT_THRESHOLDS
) -> FleetFacts:
    """The facts of the job ``loaded`` holds, as ``model`` (built from ``loaded.events``) diagnosed it."""
    ranks = rank_facts(loaded.events, model)
    return FleetFacts(ranks, outlier_ranks(ranks, thresholds=thresholds), job_coverage(loaded, model))
