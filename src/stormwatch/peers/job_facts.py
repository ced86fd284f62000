"""A job's fleet facts together: what model.json's ``fleet`` member holds beside the regression the
audit adds (:class:`~stormwatch.outputs.document_fleet.FleetMember`), next to ``model`` (whose
reference fields it never touches).
"""

from __future__ import annotations

from dataclasses import dataclass

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


def fleet_facts(
    loaded: LoadResult, model: DiagnosticsModel, *, thresholds: OutlierThresholds = DEFAULT_THRESHOLDS
) -> FleetFacts:
    """The facts of the job ``loaded`` holds, as ``model`` (built from ``loaded.events``) diagnosed it."""
    ranks = rank_facts(loaded.events, model)
    return FleetFacts(ranks, outlier_ranks(ranks, thresholds=thresholds), job_coverage(loaded, model))
