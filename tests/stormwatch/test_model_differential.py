"""stormwatch's diagnostics model against stormlog's, on artifacts stormlog itself wrote.

Each case is a job (tests/model_builders.py), an optional rank filter and collective
preset, and the reference version (0.3.5; 0.4.3 for schema-v4 data). Three checks per
case: the reference still shows the signal the scenario is meant to exercise (so a
scenario cannot silently stop covering its path); ours equals the reference given the
path list; ours given the job folder equals the reference given each rank's path.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from stormlog.tui.distributed_diagnostics import parse_rank_filter as reference_parse_rank_filter

from tests import model_builders as mb
from tests.builders import START_NS
from tests.reference_model import (
    canonical_model,
    indicator_summary,
    model_differences,
    our_model,
    reference_model,
)

Model = dict[str, Any]
Expected = tuple[str, str, int] | None  # (signal, severity, rank) of an indicator; None: no indicators
MS = 1_000_000

JOBS: dict[str, Callable[[Path], list[Path]]] = {
    "single-rank-alerts": mb.build_single_rank_alerts,
    "gap-transient-spike": mb.build_gap_transient_spike,
    "gap-persistent-drift": mb.build_gap_persistent_drift,
    "gap-fragmentation": mb.build_gap_fragmentation,
    "collective-synchronized": mb.build_collective_synchronized,
    "collective-single-rank": mb.build_collective_single_rank,
    "collective-unmarked": mb.build_collective_unmarked,
    "collective-merged-intervals": mb.build_collective_merged_intervals,
    "collective-early-spike": mb.build_collective_early_spike,
    "missing-ranks": mb.build_missing_ranks,
    "cpu-only": mb.build_cpu_only,
    "legacy-job": mb.build_legacy_job,
    "inconsistent-world-size": mb.build_inconsistent_world_size,
    "ordering-ties": mb.build_ordering_ties,
}
V4_JOBS: dict[str, Callable[..., list[Path]]] = {
    "v4-device-only": mb.build_v4_device_only,
    "v4-cpu-tracker": mb.build_v4_cpu_tracker,
    "v4-allocated-only": mb.build_v4_allocated_only,
    "v4-cuda-inactive-fragmentation": mb.build_v4_cuda_inactive_fragmentation,
}


@dataclass(frozen=True)
class Case:
    job: str
    earliest: Expected
    most_severe: Expected
    selected: frozenset[int] | None = None
    preset: str = "medium"
    version: str = "0.3.5"
    reasons: frozenset[str] = frozenset()  # must all be in most_severe's reason codes
    check: Callable[[Model], Any] | None = field(default=None, compare=False)  # extra asserts


def _at(kind: str, offset_ns: int) -> Callable[[Model], None]:
    def check(model: Model) -> None:
        got = {i["kind"]: i["timestamp_ns"] for i in model["indicators"]}[kind]
        assert got == START_NS + offset_ns, (kind, got - START_NS)
    return check


def _all(*checks: Callable[[Model], Any]) -> Callable[[Model], None]:
    def check(model: Model) -> None:
        for one in checks:
            result = one(model)
            assert result is None or result, one
    return check


def _single_rank_alerts(m: Model) -> None:
    earliest = m["indicators"][0]
    assert earliest["phase_path"] == "(likely) train / backward"  # a phase open on two threads
    kinds = {marker["kind"] for marker in m["markers_by_rank"]["0"]}
    assert {"oom", "alert", "phase", "lifecycle"} <= kinds


def _same_timestamp(m: Model) -> bool:
    return m["indicators"][0]["timestamp_ns"] == m["indicators"][1]["timestamp_ns"]


def _rows_signal(expected: dict[int, str | None]) -> Callable[[Model], None]:
    def check(m: Model) -> None:
        got = {row["rank"]: row["first_anomaly_signal"] for row in m["rows"]}
        assert got == expected
    return check


def _reason_present(code: str, present: bool) -> Callable[[Model], None]:
    def check(m: Model) -> None:
        assert (code in m["indicators"][0]["reason_codes"]) == present
    return check


CONFIDENT = ("collective:collective_confident", "critical", 0)
SUSPECT_RANK5 = ("collective:collective_suspect", "info", 5)
SUSPECT_RANK0 = ("collective:collective_suspect", "info", 0)
SYNC_REASONS = frozenset({"cross_rank_synchrony", "marker_collective_token", "marker_spike_overlap"})
COLLECTIVE_PADDING_MS = {"low": 100, "medium": 120, "high": 160}

CASES: dict[str, Case] = {
    "single-rank-alerts": Case(
        "single-rank-alerts", ("alert:warning", "warning", 0), ("alert:critical", "critical", 0),
        check=_all(_single_rank_alerts, _at("earliest", 2000 * MS), _at("most_severe", 3500 * MS))),
    "gap-transient-spike": Case(
        "gap-transient-spike", ("gap_ratio_breach", "warning", 0), ("gap:transient_spike", "critical", 0),
        check=_same_timestamp),  # breach and spike tie; the breach is listed first
    "gap-persistent-drift": Case(
        "gap-persistent-drift", ("gap_ratio_breach", "warning", 0), ("gap:persistent_drift", "critical", 0),
        check=_all(_at("earliest", 3500 * MS), _at("most_severe", 5500 * MS))),  # breach at exactly 5.0 %
    "gap-fragmentation": Case(
        "gap-fragmentation", ("gap_ratio_breach", "warning", 0), ("gap:fragmentation_like", "critical", 0),
        check=_all(_same_timestamp, _at("most_severe", 0))),
    **{f"collective-synchronized-{preset}": Case(
        "collective-synchronized", CONFIDENT, CONFIDENT, preset=preset,
        reasons=SYNC_REASONS | {"allocator_device_divergence"},
        check=_all(_at("earliest", (2950 - COLLECTIVE_PADDING_MS[preset]) * MS),
                   lambda m: m["indicators"][0]["phase_path"] == "train / all_reduce",
                   _rows_signal(dict.fromkeys(range(8), "collective:collective_confident"))))
       for preset in ("low", "medium", "high")},
    **{f"collective-single-rank-{preset}": Case(
        "collective-single-rank", SUSPECT_RANK5, SUSPECT_RANK5, preset=preset,
        reasons=frozenset({"single_rank_only", "marker_collective_token"}),
        check=lambda m: m["indicators"][0]["confidence"] == 0.51)
       for preset in ("medium", "high")},
    "collective-single-rank-low": Case("collective-single-rank", None, None, preset="low"),
    **{f"collective-unmarked-{preset}": Case(
        "collective-unmarked", SUSPECT_RANK0, SUSPECT_RANK0, preset=preset,
        reasons=frozenset({"weak_marker_signal", "cross_rank_synchrony"}))
       for preset in ("medium", "high")},
    "collective-unmarked-low": Case("collective-unmarked", None, None, preset="low"),
    **{f"collective-merged-intervals-{preset}": Case(  # low drops the weak spike: nothing to merge
        "collective-merged-intervals", CONFIDENT, CONFIDENT, preset=preset,
        reasons=SYNC_REASONS | ({"weak_marker_signal"} if preset != "low" else set()),
        check=_all(_at("earliest", (800 - COLLECTIVE_PADDING_MS[preset]) * MS),
                   _reason_present("weak_marker_signal", preset != "low")))
       for preset in ("low", "medium", "high")},
    "collective-early-spike": Case(  # clamped to the trace start, then to each rank's first sample
        "collective-early-spike", CONFIDENT, CONFIDENT, reasons=SYNC_REASONS,
        check=lambda m: [r["first_anomaly_timestamp_ns"] - START_NS for r in m["rows"]]
        == [r * 15 * MS for r in range(8)]),
    "missing-ranks": Case(
        "missing-ranks", ("alert:warning", "warning", 1), ("alert:critical", "critical", 4),
        check=lambda m: (m["missing_ranks"], [r["availability"] for r in m["rows"][6:]])
        == ([6, 7], ["missing", "missing"])),
    "missing-ranks-filter-1-2": Case(
        "missing-ranks", ("alert:warning", "warning", 1), ("collective:collective_confident", "critical", 2),
        selected=frozenset({1, 2}), reasons=SYNC_REASONS,  # synchrony still counts every rank
        check=lambda m: (m["expected_ranks"], list(m["per_rank_timelines"])) == ([1, 2], ["1", "2"])),
    "missing-ranks-filter-0,2,4-7": Case(
        "missing-ranks", ("alert:critical", "critical", 4), ("alert:critical", "critical", 4),
        selected=frozenset({0, 2, 4, 5, 6, 7}),
        check=lambda m: (m["present_ranks"], m["missing_ranks"], [r["rank"] for r in m["rows"]])
        == ([0, 2, 4, 5], [6, 7], [0, 2, 4, 5, 6, 7])),
    "cpu-only": Case(
        "cpu-only", ("alert:warning", "warning", 0), CONFIDENT, reasons=SYNC_REASONS,
        check=lambda m: m["indicators"][1]["confidence"] == 0.95),  # no device total: -0.05
    "legacy-job": Case(
        "legacy-job", ("gap_ratio_breach", "warning", 0), ("alert:critical", "critical", 2),
        check=_at("most_severe", 1_349_999_872)),  # float seconds -> ns
    "inconsistent-world-size": Case(
        "inconsistent-world-size", None, None,
        check=lambda m: (len(m["warnings"]), m["expected_ranks"]) == (1, [0, 1, 2, 3])),
    "ordering-ties": Case(
        "ordering-ties", ("gap_ratio_breach", "warning", 0), ("alert:critical", "critical", 1),
        check=_all(_at("earliest", 1000 * MS), _rows_signal(
            {0: "gap_ratio_breach", 1: "gap_ratio_breach", 2: "alert:warning", 3: "gap_ratio_breach"}))),
    "v4-device-only": Case(
        "v4-device-only", ("alert:warning", "warning", 1), ("alert:warning", "warning", 1), version="0.4.3",
        check=lambda m: (len(m["warnings"]), list(m["per_rank_timelines"]["0"]), m["rows"][0]["allocated_delta_bytes"])
        == (1, ["timestamps_ns", "device_used"], None)),
    "v4-cpu-tracker": Case(
        "v4-cpu-tracker", ("alert:critical", "critical", 0), ("alert:critical", "critical", 0), version="0.4.3",
        check=lambda m: len(m["warnings"]) == 1),  # fragmentation analysis disabled
    "v4-allocated-only": Case(
        "v4-allocated-only", ("alert:critical", "critical", 0), ("alert:critical", "critical", 0), version="0.4.3",
        check=lambda m: (len(m["warnings"]), m["per_rank_timelines"]["1"]["gap"][0],
                         m["rows"][1]["reserved_delta_bytes"]) == (1, None, None)),
    "v4-cuda-inactive-fragmentation": Case(  # 0.4.3's inactive/reserved ratio; 0.3.5's would find nothing
        "v4-cuda-inactive-fragmentation", ("gap_ratio_breach", "warning", 0), ("gap:fragmentation_like", "critical", 0),
        version="0.4.3", check=lambda m: m["warnings"] == []),
}


@dataclass
class Built:
    root: Path
    paths: list[Path]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Callable[[str], Built]:
    """Build each job once per module (under its own folder, which is the job folder)."""
    built: dict[str, Built] = {}

    def get(job: str) -> Built:
        if job not in built:
            root = tmp_path_factory.mktemp(job) / "job"
            if job in V4_JOBS:
                paths = V4_JOBS[job](root, stormlog43=request.getfixturevalue("stormlog43"))
            else:
                paths = JOBS[job](root)
            built[job] = Built(root, paths)
        return built[job]
    return get


@pytest.fixture(scope="module")
def expected_model(scenario: Callable[[str], Built], request: pytest.FixtureRequest) -> Callable[[str], Model]:
    """The reference's model per case, computed once per module."""
    models: dict[str, Model] = {}

    def get(name: str) -> Model:
        if name not in models:
            case = CASES[name]
            folder = request.getfixturevalue("stormlog43") if case.version != "0.3.5" else None
            models[name] = canonical_model(reference_model(
                scenario(case.job).paths, None if case.selected is None else set(case.selected),
                preset=case.preset, version=case.version, stormlog43=folder))
        return models[name]
    return get


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_shows_the_scenario_signal(name: str, expected_model: Callable[[str], Model]) -> None:
    case, model = CASES[name], expected_model(name)
    summary = indicator_summary(model)
    if case.earliest is None:
        assert summary == {}
    else:
        assert summary["earliest"][:3] == case.earliest
        assert summary["most_severe"][:3] == case.most_severe
        assert case.reasons <= set(summary["most_severe"][3])
    if case.check is not None:
        result = case.check(model)
        assert result is None or result


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_equals_reference(name: str, scenario: Callable[[str], Built],
                                expected_model: Callable[[str], Model]) -> None:
    case = CASES[name]
    selected = None if case.selected is None else set(case.selected)
    actual = canonical_model(our_model(scenario(case.job).paths, selected, preset=case.preset))
    differences = model_differences(expected_model(name), actual)
    assert not differences, "\n".join(differences)


@pytest.mark.parametrize("name", sorted(CASES))
def test_job_folder_model_equals_reference_given_each_rank(
        name: str, scenario: Callable[[str], Built], expected_model: Callable[[str], Model]) -> None:
    """The job folder, loaded as ``diagnose`` loads it: every rank under it one job."""
    case = CASES[name]
    selected = None if case.selected is None else set(case.selected)
    actual = canonical_model(our_model([scenario(case.job).root], selected, preset=case.preset, job_folder=True))
    differences = model_differences(expected_model(name), actual)
    assert not differences, "\n".join(differences)


def test_model_differences_is_strict_except_where_design_allows(expected_model: Callable[[str], Model]) -> None:
    """The comparison is not vacuous: it ignores only details, warning wording and legacy
    ids, and catches a wrong rank, a float for an int, rank order, an extra row field."""
    base = expected_model("legacy-job")
    assert any(m["session_id"] == "legacy#0" for ms in base["markers_by_rank"].values() for m in ms)

    def fresh() -> Model:
        return copy.deepcopy(base)

    allowed = fresh()
    allowed["indicators"][0]["details"] = "worded differently"
    allowed["warnings"] = [f"other wording {i}" for i in range(len(base["warnings"]))]
    assert model_differences(base, allowed) == []

    wrong_rank, float_ts, extra_warning, reordered, extra_field = (fresh() for _ in range(5))
    wrong_rank["indicators"][1]["rank"] += 1
    float_ts["rows"][0]["first_anomaly_timestamp_ns"] = float(base["rows"][0]["first_anomaly_timestamp_ns"])
    extra_warning["warnings"].append("one more")
    reordered["per_rank_timelines"] = dict(reversed(list(base["per_rank_timelines"].items())))
    extra_field["rows"][0]["device_used_delta_bytes"] = 0
    for changed in (wrong_rank, float_ts, extra_warning, reordered, extra_field):
        assert len(model_differences(base, changed)) == 1, model_differences(base, changed)
    assert model_differences(expected_model("collective-synchronized-low"),
                             expected_model("collective-synchronized-medium"))


# --- parse_rank_filter ----------------------------------------------------------------------

EIGHT = list(range(8))
RANK_FILTERS: list[tuple[str | None, list[int]]] = [
    ("all", EIGHT), ("ALL", EIGHT), ("*", EIGHT), ("", EIGHT), ("   ", EIGHT), (None, EIGHT),
    ("0,2,4-7", EIGHT), (" 1 - 2 ", EIGHT), ("1,,2,", EIGHT), ("5-5", EIGHT), ("+3", EIGHT),
    ("0,9,12-13", EIGHT), ("3-9", [0, 2, 5, 7]), ("0-100", [1, 3]), ("2", []), ("a", []),
    ("3-1", EIGHT), ("1-", EIGHT), ("-1", EIGHT), ("a", EIGHT), ("1-2-3", EIGHT), ("1.5", EIGHT),
    ("0,x", EIGHT), (",", EIGHT),
]


@pytest.mark.parametrize(("expr", "available"), RANK_FILTERS, ids=[f"{e!r}-{len(a)}" for e, a in RANK_FILTERS])
def test_parse_rank_filter_equals_reference(expr: str | None, available: list[int]) -> None:
    from stormwatch.analysis.rank_filter import parse_rank_filter

    try:
        expected: set[int] | type[Exception] = reference_parse_rank_filter(expr, available)  # type: ignore[arg-type]
    except ValueError:
        expected = ValueError
    if expected is ValueError:
        with pytest.raises(ValueError):
            parse_rank_filter(expr, available)
    else:
        assert parse_rank_filter(expr, available) == expected


def test_rank_filter_table_covers_errors_and_drops() -> None:
    """The table above exercises both reference outcomes: errors and out-of-range drops."""
    outcomes = []
    for expr, available in RANK_FILTERS:
        try:
            outcomes.append(reference_parse_rank_filter(expr, available))  # type: ignore[arg-type]
        except ValueError:
            outcomes.append(None)
    assert outcomes.count(None) == 7
    assert reference_parse_rank_filter("0,9,12-13", EIGHT) == {0}
    assert reference_parse_rank_filter("a", []) == set()  # no ranks: never an error
