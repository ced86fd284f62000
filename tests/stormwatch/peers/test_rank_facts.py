"""Per-rank facts over jobs written by stormlog's own writers (tests.builders); bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormwatch.analysis.model import build_model
from stormwatch.load.loader import load_artifacts
from stormwatch.peers.rank_facts import RankFacts, rank_facts
from tests.builders import (
    CPU_CAPABILITIES,
    GIB,
    MIB,
    START_NS,
    Sample,
    make_record,
    make_v4_record,
    ramp,
    timeline_records,
    write_jsonl,
    write_multi_rank_job,
)
from tests.model_builders import build_legacy_job


def facts_of(paths: list[Path] | Path, selected: set[int] | None = None) -> tuple[RankFacts, ...]:
    loaded = load_artifacts(paths if isinstance(paths, list) else [paths])
    return rank_facts(loaded.events, build_model(loaded.events, selected))


def samples_of(rank: int) -> list[Sample]:
    """Reserved peaks mid-run (so a last-value bug shows), device used and total per rank."""
    out = ramp(6, base=GIB + rank * 64 * MIB, device_total=(40 + rank) * GIB)
    peak = out[2]
    out[2] = Sample(peak.t_s, peak.allocated, peak.reserved + 2 * GIB, peak.device_used + 3 * GIB, peak.device_total)
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "json", "sink"])
def test_peaks_identity_and_gap_per_rank(tmp_path: Path, fmt: str) -> None:
    write_multi_rank_job(tmp_path, world_size=4, samples=samples_of, fmt=fmt, gpus_per_node=2, missing_ranks=(2,))
    facts = facts_of(tmp_path)
    assert [fact.rank for fact in facts] == [0, 1, 3]  # present ranks only
    for fact in facts:
        seq = samples_of(fact.rank)
        assert fact.host == f"node-{fact.rank // 2}" and fact.device_id == fact.rank % 2
        assert fact.samples == len(seq)
        assert fact.peak_allocated_bytes == max(s.allocated for s in seq)
        assert fact.peak_reserved_bytes == max(s.reserved for s in seq if s.reserved is not None)
        assert fact.peak_device_used_bytes == max(s.device_used for s in seq if s.device_used is not None)
        assert fact.device_total_bytes == (40 + fact.rank) * GIB
        assert fact.hidden_gap_peak_bytes == 1280 * MIB  # 256 MiB overhead + the 1 GiB jump at the peak


def test_samples_and_gap_match_the_model_rows(tmp_path: Path) -> None:
    write_multi_rank_job(tmp_path, world_size=3, samples=7)
    loaded = load_artifacts([tmp_path])
    model = build_model(loaded.events)
    facts = rank_facts(loaded.events, model)
    assert [(f.rank, f.samples, f.hidden_gap_peak_bytes) for f in facts] == [
        (row.rank, row.samples, row.hidden_gap_peak_abs_bytes) for row in model.rows]


def test_a_rank_filter_keeps_only_the_selected_ranks(tmp_path: Path) -> None:
    write_multi_rank_job(tmp_path, world_size=4, samples=5)
    assert [fact.rank for fact in facts_of(tmp_path, {1, 3})] == [1, 3]


def test_most_frequent_host_and_device_win(tmp_path: Path) -> None:
    hosts = ["b", "a", "b", "a", "b"]  # b three times; device 5 three times
    devices = [5, 5, 7, 7, 5]
    records = [make_record(rank=0, world_size=1, session_id="s", timestamp_ns=START_NS + i, host=host, device_id=dev,
                           allocated=GIB) for i, (host, dev) in enumerate(zip(hosts, devices, strict=True))]
    (fact,) = facts_of(write_jsonl(tmp_path / "events.jsonl", records))
    assert (fact.host, fact.device_id) == ("b", 5)


def test_host_ties_pick_the_smallest_value(tmp_path: Path) -> None:
    records = [make_record(session_id="s", timestamp_ns=START_NS + i, host=host) for i, host in enumerate("yxxy")]
    (fact,) = facts_of(write_jsonl(tmp_path / "events.jsonl", records))
    assert fact.host == "x"


def test_legacy_records_have_no_host(tmp_path: Path) -> None:
    facts = facts_of(build_legacy_job(tmp_path))
    assert [fact.rank for fact in facts] == [0, 1, 2, 3]
    assert all(fact.host is None for fact in facts)  # the loader's "unknown" placeholder
    assert [fact.device_id for fact in facts] == [0, 1, 2, 3]
    assert all(fact.device_total_bytes == 16 * GIB for fact in facts)


def test_counters_a_rank_lacks_give_none(tmp_path: Path) -> None:
    # a CPU tracker (schema v4): no device total; device used only; and a v3 rank with no total at all
    no_allocator = {**CPU_CAPABILITIES, "supports_allocator_allocated": False, "supports_allocator_reserved": False}
    v4 = [make_v4_record(capabilities=no_allocator, session_id="cpu", timestamp_ns=START_NS + i, device_id=-1,
                         device_used=(i + 1) * GIB, job_id="j", rank=0, world_size=2) for i in range(3)]
    v3 = timeline_records(samples=ramp(3, device_total=None), session_id="gpu", job_id="j", rank=1, world_size=2)
    write_jsonl(tmp_path / "rank_0" / "events.jsonl", v4)
    write_jsonl(tmp_path / "rank_1" / "events.jsonl", v3)
    cpu, gpu = facts_of(tmp_path)
    assert (cpu.device_id, cpu.peak_allocated_bytes, cpu.peak_reserved_bytes) == (-1, None, None)
    assert (cpu.peak_device_used_bytes, cpu.device_total_bytes, cpu.hidden_gap_peak_bytes) == (3 * GIB, None, None)
    assert gpu.device_total_bytes is None and gpu.peak_reserved_bytes == GIB + 2 * 8 * MIB + 64 * MIB


def test_nothing_loaded_gives_no_facts(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert facts_of(tmp_path / "empty") == ()
