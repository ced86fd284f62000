"""Per-job facts that fleet comparisons build on: what each rank held (:mod:`.rank_facts`), which
ranks stand out from their peers (:mod:`.outliers`), how complete the job's telemetry is
(:mod:`.coverage`), and the three together as model.json's ``fleet`` member (:mod:`.job_facts`).

Pure like the rest of the engine: DataFrames and models in, frozen dataclasses out.
"""

from __future__ import annotations

from stormwatch.peers.coverage import Coverage, job_coverage
from stormwatch.peers.job_facts import FleetFacts, fleet_facts
from stormwatch.peers.outliers import OutlierMetric, OutlierRank, OutlierThresholds, outlier_ranks
from stormwatch.peers.rank_facts import RankFacts, rank_facts

__all__ = [
    "Coverage",
    "FleetFacts",
    "OutlierMetric",
    "OutlierRank",
    "OutlierThresholds",
    "RankFacts",
    "fleet_facts",
    "job_coverage",
    "outlier_ranks",
    "rank_facts",
]
