"""A job's fleet facts together: what model.json's ``fleet`` member holds beside the regression the
audit adds (:class:`~stormwatch.outputs.document_fleet.FleetMember`), next to ``model`` (whose
reference fields it never touches): per-rank facts, outliers, coverage and each rank's memory
growth (:mod:`stormwatch.growth.rank_growth`).
"""

from __future__ import annotations

from dataclasses import dataclass

from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.growth.figures import RankGrowth
from stormwatch.growth.rank_growth import DEFAULT_GROWTH_SETTINGS, GrowthSettings, rank_growth
from stormwatch.load.loader import LoadResult
from stormwatch.peers.coverage import Coverage, job_coverage
from stormwatch.peers.outliers import DEFAULT_THRESHOLDS, OutlierRank, OutlierThresholds, outlier_ranks
from stormwatch.peers.rank_facts import RankFacts, rank_facts


@dataclass(frozen=True)
class FleetFacts:
    """Per-rank facts, the ranks that stand out among them, the job's coverage, and each present
    rank's growth (rank order; empty in documents written before growth was measured)."""

    ranks: tuple[RankFacts, ...]
    outlier_ranks: tuple[OutlierRank, ...]
    coverage: Coverage
    growth: tuple[RankGrowth, ...] = ()


def fleet_facts(
    loaded: LoadResult,
    model: DiagnosticsModel,
    *,
    thresholds: OutlierThresholds = DEFAULT_THRESHOLDS,
    growth_settings: GrowthSettings = DEFAULT_GROWTH_SETTINGS,
) -> FleetFacts:
    """The facts of the job ``loaded`` holds, as ``model`` (built from ``loaded.events``) diagnosed it."""
    ranks = rank_facts(loaded.events, model)
    totals = {fact.rank: None if fact.device_id is not None and fact.device_id < 0 else fact.device_total_bytes
              for fact in ranks}  # a CPU tracker's rank has no device to fill
    growth = rank_growth(loaded.events, [int(rank) for rank in model.present_ranks], settings=growth_settings,
                         clock_backwards_ranks=loaded.clock_backwards_ranks,
                         device_totals_bytes=totals) if len(loaded.events) else ()
    return FleetFacts(ranks, outlier_ranks(ranks, thresholds=thresholds), job_coverage(loaded, model), growth)
