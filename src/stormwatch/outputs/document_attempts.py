"""A job document's ``attempts`` entries: each attempt (:class:`~stormwatch.outputs.attempts.Attempt`)
with ``ranks``, its session's rank rows (what fleet.parquet holds of it).

A rank row is the model's row of the rank (:class:`~stormwatch.analysis.model.RankDiagnosticsRow`)
with the rank's identity and peaks from the session's fleet facts (None where the facts do not
list the rank, bytes) and ``outlier``: flagged on any metric, None when the session has no fleet
facts. In JSON its members sit side by side: the row's, then the facts', then ``outlier``, then
``growth``: the rank's entry of the session's ``fleet.growth`` (null: none, or written before growth).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from stormwatch.analysis.model import DiagnosticsModel, RankDiagnosticsRow
from stormwatch.growth.figures import RankGrowth
from stormwatch.outputs.attempts import Attempt
from stormwatch.outputs.document_fleet import FleetMember, rank_growth_from_json
from stormwatch.outputs.document_model import rank_row_from_json
from stormwatch.outputs.json_members import Members


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionRankRow:
    """One rank of a session: its model row, identity and peaks (bytes), and whether it stands out."""

    row: RankDiagnosticsRow
    host: str | None = None
    device_id: int | None = None
    peak_reserved_bytes: int | None = None
    peak_device_used_bytes: int | None = None
    device_total_bytes: int | None = None
    outlier: bool | None = None
    growth: RankGrowth | None = None

    def as_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.row), "host": self.host, "device_id": self.device_id,
                "peak_reserved_bytes": self.peak_reserved_bytes, "peak_device_used_bytes": self.peak_device_used_bytes,
                "device_total_bytes": self.device_total_bytes, "outlier": self.outlier,
                "growth": None if self.growth is None else self.growth.as_json()}

    @classmethod
    def from_json(cls, members: Members) -> SessionRankRow:
        """Raises :class:`~stormwatch.outputs.json_members.MemberError` naming a malformed member."""
        return cls(row=rank_row_from_json(members), host=members.optional_text("host"),
                   device_id=members.optional_integer("device_id"),
                   peak_reserved_bytes=members.optional_integer("peak_reserved_bytes"),
                   peak_device_used_bytes=members.optional_integer("peak_device_used_bytes"),
                   device_total_bytes=members.optional_integer("device_total_bytes"),
                   outlier=members.optional_flag("outlier"), growth=_growth(members))


def _growth(members: Members) -> RankGrowth | None:
    found = members.optional_member("growth")
    return None if found is None else rank_growth_from_json(found)


def session_rank_rows(model: DiagnosticsModel, fleet: FleetMember | None) -> tuple[SessionRankRow, ...]:
    """A session's rank rows, in the model's row order, from its model and fleet member."""
    if fleet is None:
        return tuple(SessionRankRow(row=row) for row in model.rows)
    facts = {fact.rank: fact for fact in fleet.facts.ranks}
    outliers = {item.rank for item in fleet.facts.outlier_ranks}
    growth = {item.rank: item for item in fleet.facts.growth}
    rows = []
    for row in model.rows:
        fact = facts.get(row.rank)
        rows.append(SessionRankRow(
            row=row, outlier=row.rank in outliers, host=None if fact is None else fact.host,
            device_id=None if fact is None else fact.device_id,
            peak_reserved_bytes=None if fact is None else fact.peak_reserved_bytes,
            peak_device_used_bytes=None if fact is None else fact.peak_device_used_bytes,
            device_total_bytes=None if fact is None else fact.device_total_bytes, growth=growth.get(row.rank)))
    return tuple(rows)


@dataclass(frozen=True, kw_only=True, slots=True)
class AttemptEntry:
    """One entry of ``attempts``: the attempt, and its session's rank rows (none when not diagnosed)."""

    attempt: Attempt
    ranks: tuple[SessionRankRow, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {**self.attempt.as_json(), "ranks": [rank.as_json() for rank in self.ranks]}

    @classmethod
    def from_json(cls, members: Members) -> AttemptEntry:
        """Raises :class:`~stormwatch.outputs.json_members.MemberError` naming a malformed member."""
        return cls(attempt=Attempt.from_json(members), ranks=members.each("ranks", SessionRankRow.from_json, ()))
