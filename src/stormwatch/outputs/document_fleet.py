"""model.json's ``fleet`` member: the job's fleet facts (:mod:`stormwatch.peers`) and, once the audit
has compared the job with the earlier runs of its name, its regression summary::

    "fleet": {
      "ranks": [RankFacts, ...],          # one per present rank, rank order (bytes)
      "outlier_ranks": [{rank, metric, value_bytes, median_bytes, robust_z}, ...],
      "coverage": {Coverage},             # value -> events maps keyed by strings
      "regression": null | RegressionSummary,
      "growth": [RankGrowth, ...]         # one per present rank, rank order (bytes/hour, seconds)
    }

Coverage written before a job's abrupt ends were counted lacks ``ended_abruptly`` and
``ended_abruptly_ranks``: they read as 0 and none (:class:`~stormwatch.peers.coverage.Coverage`'s
defaults). A document written before growth was measured has no ``growth``: it reads as none.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from stormwatch.growth.figures import GrowthCounter, GrowthGap, RankGrowth
from stormwatch.history.job_regression import RegressionSummary
from stormwatch.outputs.json_members import MemberError, Members, integer_key, is_integer, shown
from stormwatch.peers.coverage import Coverage
from stormwatch.peers.job_facts import FleetFacts
from stormwatch.peers.outliers import OutlierMetric, OutlierRank
from stormwatch.peers.rank_facts import RankFacts


def _rank_facts(members: Members) -> RankFacts:
    return RankFacts(
        rank=members.integer("rank"),
        host=members.optional_text("host"),
        device_id=members.optional_integer("device_id"),
        samples=members.integer("samples"),
        peak_allocated_bytes=members.optional_integer("peak_allocated_bytes"),
        peak_reserved_bytes=members.optional_integer("peak_reserved_bytes"),
        peak_device_used_bytes=members.optional_integer("peak_device_used_bytes"),
        device_total_bytes=members.optional_integer("device_total_bytes"),
        hidden_gap_peak_bytes=members.optional_integer("hidden_gap_peak_bytes"),
    )


def _outlier(members: Members) -> OutlierRank:
    return OutlierRank(rank=members.integer("rank"), metric=members.enum("metric", OutlierMetric, "an outlier metric"),
                       value_bytes=members.integer("value_bytes"), median_bytes=members.integer("median_bytes"),
                       robust_z=members.optional_number("robust_z"))


def _counts(members: Members, name: str) -> list[tuple[str, int, str]]:
    """A value -> events map: (value, events, path) in its order."""
    out = []
    for key, value, path in members.entries(name):
        if not is_integer(value):
            raise MemberError(path, f"{shown(value)} is not an integer")
        out.append((key, int(value), path))
    return out


def _coverage(members: Members) -> Coverage:
    versions = [(integer_key(key, path, what="a schema version"), events)
                for key, events, path in _counts(members, "schema_versions")]
    return Coverage(
        expected_ranks=members.integer("expected_ranks"),
        present_ranks=members.integer("present_ranks"),
        missing_ranks=members.integers("missing_ranks"),
        ranks_present_percent=members.optional_number("ranks_present_percent"),
        sessions=members.integer("sessions"),
        sessions_without_stop=members.integer("sessions_without_stop"),
        session_ids_without_stop=members.texts("session_ids_without_stop"),
        schema_versions=tuple(versions),
        collectors=tuple((key, events) for key, events, _ in _counts(members, "collectors")),
        load_warnings=members.integer("load_warnings"),
        ended_abruptly=members.integer("ended_abruptly", 0),
        ended_abruptly_ranks=members.integers("ended_abruptly_ranks", ()),
    )


def rank_growth_from_json(members: Members) -> RankGrowth:
    """One ``fleet.growth`` entry; MemberError naming it when malformed or breaking the record's invariants."""
    try:
        return RankGrowth(
            rank=members.integer("rank"),
            duration_ns=members.optional_integer("duration_ns"),
            allocated_bytes_per_hour=members.optional_number("allocated_bytes_per_hour"),
            reserved_bytes_per_hour=members.optional_number("reserved_bytes_per_hour"),
            judged_counter=members.optional_enum("judged_counter", GrowthCounter, "a growth counter"),
            low_bytes_per_hour=members.optional_number("low_bytes_per_hour"),
            high_bytes_per_hour=members.optional_number("high_bytes_per_hour"),
            confidence=members.optional_number("confidence"),
            leak=members.flag("leak"),
            leak_min_bytes_per_hour=members.optional_number("leak_min_bytes_per_hour"),
            device_total_bytes=members.optional_integer("device_total_bytes"),
            capacity_after_start_s=members.optional_number("capacity_after_start_s"),
            gap=members.optional_enum("gap", GrowthGap, "a growth gap"),
        )
    except ValueError as error:
        if isinstance(error, MemberError):
            raise
        raise MemberError(members.path, str(error)) from error  # the record's own invariants


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetMember:
    """The ``fleet`` member: ``facts`` as the engine found them for the session, ``regression`` filled
    by the audit from the history (None: not compared, or no metric had a value)."""

    facts: FleetFacts
    regression: RegressionSummary | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "ranks": [dataclasses.asdict(fact) for fact in self.facts.ranks],
            "outlier_ranks": [{**dataclasses.asdict(outlier), "metric": outlier.metric.value}
                              for outlier in self.facts.outlier_ranks],
            "coverage": self.facts.coverage.as_dict(),
            "regression": None if self.regression is None else self.regression.as_json(),
            "growth": [growth.as_json() for growth in self.facts.growth],
        }

    @classmethod
    def from_json(cls, members: Members) -> FleetMember:
        """Raises :class:`~stormwatch.outputs.json_members.MemberError` naming a malformed member."""
        regression = members.optional_member("regression")
        facts = FleetFacts(members.each("ranks", _rank_facts), members.each("outlier_ranks", _outlier),
                           _coverage(members.member("coverage")), members.each("growth", rank_growth_from_json, ()))
        return cls(facts=facts, regression=None if regression is None else RegressionSummary.from_json(regression))
