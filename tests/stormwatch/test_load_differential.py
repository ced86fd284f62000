"""stormwatch's loader against stormlog 0.3.5's, on artifacts stormlog itself wrote."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests import builders as b
from tests.reference import canonical, differences, load_ours, reference

Case = Callable[[Path], list[Path]]


def _job(fmt: str, layout: str) -> Case:
    def build(root: Path) -> list[Path]:
        return b.write_multi_rank_job(
            root, world_size=4, fmt=fmt, layout=layout, missing_ranks=(2,),
            phases=b.DEFAULT_PHASES, alerts=b.DEFAULT_ALERTS,
        )
    return build


def _one(writer: Callable[[Path], object], name: str) -> Case:
    def build(root: Path) -> list[Path]:
        writer(root / name)
        return [root / name]
    return build


def _bundle(manifest: str | None, *, as_file: bool) -> Case:
    def build(root: Path) -> list[Path]:
        folder = root / "rank_1"
        b.write_diagnose_bundle(folder, timestamps_s=[1.0, 1.5, 2.0], allocated=[10, 20, 30], manifest=manifest)
        return [folder / "telemetry_timeline.json"] if as_file else [folder]
    return build


def _sink(root: Path) -> list[Path]:
    records = b.timeline_records(samples=20, session_id="sx", phases=b.DEFAULT_PHASES, alerts=b.DEFAULT_ALERTS)
    b.write_sink(root / "sink", records=records)
    return [root / "sink"]


def _legacy_pair(root: Path) -> list[Path]:
    first = [b.make_legacy_record(timestamp_s=1.0 + i, allocated=1000 * i) for i in range(5)]
    second = [b.make_legacy_record(timestamp_s=1.5 + i, allocated=2000 * i) for i in range(5)]
    return [b.write_json(root / "a_events.json", first), b.write_json(root / "b_events.json", second)]


def _v2(root: Path) -> list[Path]:
    return [b.write_json(root / "v2.json", b.timeline_records(samples=6, schema_version=2))]


def _two_sessions(root: Path) -> list[Path]:
    records = b.timeline_records(samples=5, session_id="old") + b.timeline_records(
        samples=5, session_id="new", start_ns=b.START_NS + 10**10, lifecycle=False
    )
    return [b.write_jsonl(root / "mixed.jsonl", records)]


def _overlapping_exports(root: Path) -> list[Path]:
    """One session exported twice with records in common: merged, repeats dropped."""
    records = b.timeline_records(samples=12, session_id="dup", phases=b.DEFAULT_PHASES, alerts=b.DEFAULT_ALERTS)
    return [b.write_jsonl(root / "late.jsonl", records[5:]), b.write_json(root / "early_events.json", records[:9])]


CASES: dict[str, Case] = {
    **{f"{fmt}-{layout}": _job(fmt, layout) for fmt in ("json", "jsonl", "sink") for layout in ("rank_dirs", "flat")},
    "phases-alerts-oom-json": _one(lambda p: b.write_phase_events(p), "phases.json"),
    "cpu-tracker-json": _one(
        lambda p: b.write_cpu_tracker_export(p, fmt="json", alerts=b.DEFAULT_ALERTS, phases=b.DEFAULT_PHASES),
        "cpu.json",
    ),
    **{
        f"bundle-{m}-{'file' if f else 'dir'}": _bundle(m, as_file=f)
        for m in ("new", "old", None)
        for f in (True, False)
    },
    "sink-rollover-retention": _sink,
    "legacy-flat-merge": _legacy_pair,
    "schema-v2": _v2,
    "two-sessions-jsonl": _two_sessions,
    "overlapping-exports": _overlapping_exports,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_path_list_equals_reference(name: str, tmp_path: Path) -> None:
    paths = CASES[name](tmp_path)
    expected = canonical(reference(paths))
    actual = canonical(load_ours(paths))
    assert differences(expected, actual, compare_warnings="count") == []


@pytest.mark.parametrize("fmt", ["json", "jsonl", "sink"])
@pytest.mark.parametrize("layout", ["rank_dirs", "flat"])
def test_job_folder_equals_reference_given_each_rank(fmt: str, layout: str, tmp_path: Path) -> None:
    """One folder is one job: equal to the reference given each rank's path."""
    paths = _job(fmt, layout)(tmp_path / "job")
    expected = canonical(reference(paths))
    actual = canonical(load_ours([tmp_path / "job"]))
    assert differences(expected, actual, compare_warnings="ignore") == []
    assert len({s["rank"] for s in actual["sessions"] if s["world_size"] == 4}) == 3


def test_explicit_session_id_and_unknown_session(tmp_path: Path) -> None:
    paths = _two_sessions(tmp_path)
    expected = canonical(reference(paths, session_id="old"))
    assert differences(expected, canonical(load_ours(paths, session_id="old"))) == []
    from stormwatch import SessionNotFoundError, load_artifacts

    with pytest.raises(SessionNotFoundError, match="nope"):
        load_artifacts(paths, session_id="nope")


def test_csv_equals_reference_except_recovered_metadata(tmp_path: Path) -> None:
    """CSV metadata is a Python literal: the reference loses it, stormwatch recovers it."""
    path = tmp_path / "cpu.csv"
    b.write_cpu_tracker_export(path, fmt="csv", alerts=(b.oom_alert(1.0),), phases=b.DEFAULT_PHASES)
    expected = canonical(reference([path]))
    actual = canonical(load_ours([path]))
    assert actual["events"] == expected["events"]
    assert actual["sessions"] == expected["sessions"]
    assert not any(m["kind"] in ("phase", "oom") for m in expected["markers"])
    assert any(m["kind"] == "phase" for m in actual["markers"])
    assert any(m["kind"] == "oom" for m in actual["markers"])
