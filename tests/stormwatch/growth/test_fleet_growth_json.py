"""model.json's fleet.growth: written one per present rank, read back equal, older documents without
it read as none, a malformed entry named; and the history's growth columns come from it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from stormwatch.diagnose import diagnose
from stormwatch.growth.figures import GrowthCounter, GrowthGap, RankGrowth
from stormwatch.history.job_names import JobNamePattern
from stormwatch.history.rows import history_rows
from stormwatch.history.schema import GROWTH_COLUMNS
from stormwatch.outputs.document import JobDocument
from stormwatch.outputs.document_fleet import FleetMember
from stormwatch.outputs.json_members import MemberError, Members
from tests.builders import write_multi_rank_job

LEAKING = RankGrowth(rank=0, duration_ns=36_000_000_000_000, allocated_bytes_per_hour=1.9e9,
                     reserved_bytes_per_hour=2.1e9, judged_counter=GrowthCounter.RESERVED, low_bytes_per_hour=2.0e9,
                     high_bytes_per_hour=2.2e9, confidence=1.0, leak=True, leak_min_bytes_per_hour=429496729.6,
                     device_total_bytes=80 << 30, capacity_after_start_s=88_000.5, gap=None)
SHORT = RankGrowth(rank=1, duration_ns=600_000_000_000, allocated_bytes_per_hour=None, reserved_bytes_per_hour=None,
                   judged_counter=None, low_bytes_per_hour=None, high_bytes_per_hour=None, confidence=None,
                   leak=False, leak_min_bytes_per_hour=268435456.0, device_total_bytes=None,
                   capacity_after_start_s=None, gap=GrowthGap.TOO_SHORT)


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> JobDocument:
    folder: Path = tmp_path_factory.mktemp("jobs") / "grow-01"
    write_multi_rank_job(folder, job_id="grow-01", world_size=2, samples=12)
    return JobDocument.from_json(diagnose([str(folder)], job_id="grow-01", source_name="grow").model_json(),
                                 name="grow-01/model.json")


def _with_growth(document: JobDocument, growth: tuple[RankGrowth, ...]) -> JobDocument:
    assert document.fleet is not None
    facts = dataclasses.replace(document.fleet.facts, growth=growth)
    return dataclasses.replace(document, fleet=dataclasses.replace(document.fleet, facts=facts))


def test_fleet_growth_round_trips(document: JobDocument) -> None:
    grown = _with_growth(document, (LEAKING, SHORT))
    read = JobDocument.from_json(grown.to_json(), name="model.json")
    assert read.fleet is not None and read.fleet.facts.growth == (LEAKING, SHORT)
    assert read.to_json() == grown.to_json()
    # the reference model is untouched
    assert orjson.loads(read.to_json())["model"] == orjson.loads(document.to_json())["model"]


def test_a_diagnosed_job_has_one_growth_entry_per_present_rank(document: JobDocument) -> None:
    assert document.fleet is not None
    assert [(item.rank, item.gap) for item in document.fleet.facts.growth] == [
        (0, GrowthGap.TOO_FEW_SAMPLES), (1, GrowthGap.TOO_FEW_SAMPLES)]  # 12 samples a rank


def test_an_older_document_without_growth_reads_as_none(document: JobDocument) -> None:
    assert document.fleet is not None
    data = orjson.loads(document.to_json())
    del data["fleet"]["growth"]
    member = FleetMember.from_json(Members(data["fleet"], "fleet"))
    assert member.facts.growth == () and member.facts.ranks == document.fleet.facts.ranks


@pytest.mark.parametrize(
    ("change", "member", "problem"),
    [
        ({"leak": "yes"}, "fleet.growth[0].leak", "not true or false"),
        ({"gap": "bogus"}, "fleet.growth[0].gap", "growth gap"),
        ({"confidence": 1.5}, "fleet.growth[0]", "outside [0, 1]"),
        ({"judged_counter": None}, "fleet.growth[0]", "judged counter"),
    ],
)
def test_a_malformed_growth_entry_is_named(document: JobDocument, change: dict[str, object], member: str,
                                           problem: str) -> None:
    data = orjson.loads(_with_growth(document, (LEAKING,)).to_json())
    data["fleet"]["growth"][0].update(change)
    with pytest.raises(MemberError) as raised:
        FleetMember.from_json(Members(data["fleet"], "fleet"))
    assert raised.value.member == member and problem in raised.value.problem


def test_history_rows_carry_the_growth_columns(document: JobDocument) -> None:
    audit = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    rows = history_rows([_with_growth(document, (LEAKING, SHORT))], job_names=JobNamePattern(),
                        audit_time=audit).to_pylist()
    assert [{name: row[name] for name in GROWTH_COLUMNS} for row in rows] == [
        {"duration_ns": 36_000_000_000_000, "allocated_growth_bytes_per_hour": 1.9e9,
         "reserved_growth_bytes_per_hour": 2.1e9, "growth_confidence": 1.0, "leak": True,
         "capacity_after_start_s": 88_000.5, "growth_gap": None},
        {"duration_ns": 600_000_000_000, "allocated_growth_bytes_per_hour": None,
         "reserved_growth_bytes_per_hour": None, "growth_confidence": None, "leak": None,
         "capacity_after_start_s": None, "growth_gap": "too_short"},
    ]
    without = history_rows([_with_growth(document, ())], job_names=JobNamePattern(), audit_time=audit).to_pylist()
    assert all(row[name] is None for row in without for name in GROWTH_COLUMNS)
