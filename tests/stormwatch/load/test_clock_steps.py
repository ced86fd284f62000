"""A rank whose sample clock steps back in file order: found while loading (JSONL, JSON, a sink's
segments), named in a warning by file and line (a JSON document's record), carried into the rank
group as ``clock_backwards_ranks``, and given no growth figure; jitter under the tolerance is not a
step, and the events frame is what it was."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from stormwatch.analysis.model import build_model
from stormwatch.events.schema import COLUMNS
from stormwatch.formats.jsonl import read_jsonl
from stormwatch.growth.figures import GrowthGap
from stormwatch.load.clock_steps import CLOCK_STEP_TOLERANCE_S, scan_clock
from stormwatch.load.loader import load_artifacts
from stormwatch.peers.job_facts import fleet_facts
from tests import builders as b

JOB = "clock-1"
BAD_RANK = 2
WORLD = 4
STEP_BACK_S = 600.0  # the clock steps back 10 minutes halfway
LEAK_BYTES_PER_HOUR = 2 * b.GIB
NS = 1_000_000_000


def _records(rank: int, *, leak_bytes_per_hour: float) -> list[dict[str, Any]]:
    """Rank ``rank``'s records as :func:`tests.builders.write_multi_rank_job` writes them."""
    return b.timeline_records(
        samples=b.training(rank, leak_bytes_per_hour=leak_bytes_per_hour), rank=rank, world_size=WORLD,
        local_rank=rank, job_id=JOB, session_id=f"{JOB}-rank{rank}", host="node-0", pid=1000 + rank,
        device_id=rank)


def _halfway_sample(records: list[dict[str, Any]]) -> int:
    samples = [index for index, record in enumerate(records) if record["event_type"] == "sample"]
    return samples[len(samples) // 2]


def _stepped_back(records: list[dict[str, Any]], *, at: int, back_s: float) -> list[dict[str, Any]]:
    """File order kept; every record from ``at`` on stamped ``back_s`` earlier (a clock step)."""
    return [{**record, "timestamp_ns": record["timestamp_ns"] - round(back_s * NS)} if index >= at else record
            for index, record in enumerate(records)]


def _jittered(records: list[dict[str, Any]], *, back_s: float) -> list[dict[str, Any]]:
    """Every tenth sample stamped ``back_s`` before the sample before it (a writer's reordering)."""
    out, previous, count = [], None, 0
    for record in records:
        if record["event_type"] == "sample":
            count += 1
            if previous is not None and count % 10 == 0:
                record = {**record, "timestamp_ns": previous - round(back_s * NS)}
            previous = record["timestamp_ns"]
        out.append(record)
    return out


def _write(root: Path, fmt: str, bad: list[dict[str, Any]]) -> Path:
    """The job: ranks 0, 1, 3 clean and flat, rank ``BAD_RANK``'s records ``bad``; the bad rank's file."""
    b.write_multi_rank_job(root, world_size=WORLD, job_id=JOB, fmt=fmt, missing_ranks=(BAD_RANK,),
                           samples=lambda rank: b.training(rank, leak_bytes_per_hour=0.0))
    folder = root / f"rank_{BAD_RANK}"
    if fmt == "jsonl":
        return b.write_jsonl(folder / "events.jsonl", bad)
    if fmt == "json":
        return b.write_json(folder / "events.json", bad)
    return b.write_sink(folder / "telemetry", records=bad, rollover_max_events=8, retention_max_files=10_000)


def _where(path: Path, fmt: str, sample: dict[str, Any]) -> str:
    """What the warning must name: the file and line (JSON: record) holding ``sample``."""
    if fmt == "json":
        number = json.loads(path.read_text()).index(sample) + 1
        return f"{path.name}: record {number}:"
    files = sorted(path.glob("segment-*.jsonl")) if fmt == "sink" else [path]
    for file in files:
        for number, line in enumerate(file.read_text().splitlines(), 1):
            if json.loads(line) == sample:
                return f"{file.name}:{number}:"
    raise AssertionError(f"no sample {sample}")


@pytest.mark.parametrize("fmt", ["jsonl", "json", "sink"])
def test_a_leaking_rank_whose_clock_steps_back_gets_no_figure_and_a_warning(tmp_path: Path, fmt: str) -> None:
    records = _records(BAD_RANK, leak_bytes_per_hour=LEAK_BYTES_PER_HOUR)
    at = _halfway_sample(records)
    bad = _stepped_back(records, at=at, back_s=STEP_BACK_S)
    path = _write(tmp_path, fmt, bad)

    loaded = load_artifacts([tmp_path])
    assert loaded.clock_backwards_ranks == {BAD_RANK}
    (warning,) = [w for w in loaded.warnings if "clock steps back" in w]
    assert _where(path, fmt, bad[at]) in warning
    assert f"rank {BAD_RANK}'s clock steps back 570.0 s" in warning  # 10 minutes less one 30 s sample interval

    model = build_model(loaded.events)
    growth = {item.rank: item for item in fleet_facts(loaded, model).growth}
    assert growth[BAD_RANK].gap is GrowthGap.CLOCK_BACKWARDS and not growth[BAD_RANK].leak
    for rank in (0, 1, 3):  # the others keep their figures
        assert growth[rank].gap is None and growth[rank].reserved_bytes_per_hour is not None
        assert not growth[rank].leak


@pytest.mark.parametrize(("jitter_s", "flagged"), [
    (CLOCK_STEP_TOLERANCE_S / 2, False),  # a writer's threads reordering: not a step
    (CLOCK_STEP_TOLERANCE_S * 2, True),
])
def test_jitter_under_the_tolerance_is_no_step(tmp_path: Path, jitter_s: float, flagged: bool) -> None:
    _write(tmp_path, "jsonl", _jittered(_records(BAD_RANK, leak_bytes_per_hour=LEAK_BYTES_PER_HOUR), back_s=jitter_s))
    loaded = load_artifacts([tmp_path])
    assert loaded.clock_backwards_ranks == ({BAD_RANK} if flagged else set())
    assert any("clock steps back" in w for w in loaded.warnings) is flagged
    growth = {item.rank: item for item in fleet_facts(loaded, build_model(loaded.events)).growth}
    if not flagged:  # its leak is still found
        assert growth[BAD_RANK].gap is None and growth[BAD_RANK].leak


def test_a_clean_job_has_no_steps_and_the_events_frame_keeps_its_columns(tmp_path: Path) -> None:
    _write(tmp_path, "jsonl", _records(BAD_RANK, leak_bytes_per_hour=0.0))
    loaded = load_artifacts([tmp_path])
    assert loaded.clock_backwards_ranks == frozenset()
    assert not any("clock" in w for w in loaded.warnings)
    assert tuple(loaded.events.columns) == COLUMNS


def test_one_file_of_interleaved_ranks_names_only_the_rank_that_stepped_back(tmp_path: Path) -> None:
    clean = _records(0, leak_bytes_per_hour=0.0)
    records = _records(BAD_RANK, leak_bytes_per_hour=0.0)
    bad = _stepped_back(records, at=_halfway_sample(records), back_s=STEP_BACK_S)
    # interleaved as one writer would append them: each rank in its own order, the two merged by position
    mixed = [record for pair in zip(clean, bad, strict=True) for record in pair]
    path = b.write_jsonl(tmp_path / "both.jsonl", mixed)
    loaded = load_artifacts([path], session_id=f"{JOB}-rank{BAD_RANK}")
    assert loaded.clock_backwards_ranks == {BAD_RANK}
    assert load_artifacts([path], session_id=f"{JOB}-rank0").clock_backwards_ranks == frozenset()
    (warning,) = [w for w in loaded.warnings if "clock steps back" in w]
    assert f"both.jsonl:{2 * _halfway_sample(records) + 2}:" in warning


@pytest.mark.parametrize(("stamps_s", "expected"), [
    ([0, 30, 60, 90], ()),
    ([0, 30, 29.5, 60], ()),                       # under the tolerance
    ([0, 30, 20, 50, 10], ((2, 10.0),)),           # the first step only
    ([100, 0], ((1, 100.0),)),
])
def test_scan_finds_the_first_step_back(stamps_s: list[float], expected: tuple[tuple[int, float], ...]) -> None:
    records = [b.make_record(timestamp_ns=b.START_NS + round(t * NS), rank=1, world_size=2) for t in stamps_s]
    # a non-sample stamped earlier is not a sample clock
    records.insert(1, b.make_record(timestamp_ns=b.START_NS - 3600 * NS, rank=1, world_size=2, event_type="peak"))
    frame = load_frame(records)
    found = scan_clock(frame).steps
    assert tuple((step.row - 1, step.back_s) for step in found) == expected  # row 1 is the peak


def load_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    data = "".join(json.dumps(record) + "\n" for record in records).encode()
    return read_jsonl(data, label="t.jsonl", default_session_id="s").frame



def test_a_csv_export_names_the_line(tmp_path: Path) -> None:
    path = b.write_cpu_tracker_export(tmp_path / "events.csv", fmt="csv", samples=b.ramp(40, interval_s=30.0))
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    at = [index for index, row in enumerate(rows) if row["event_type"] == "sample"][20]
    for row in rows[at:]:  # the clock steps back 10 minutes at the 21st sample
        row["timestamp_ns"] = str(int(row["timestamp_ns"]) - round(STEP_BACK_S * NS))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    loaded = load_artifacts([path])
    assert loaded.clock_backwards_ranks == {0}
    (warning,) = [w for w in loaded.warnings if "clock steps back" in w]
    assert f"events.csv:{at + 2}: rank 0's clock steps back 570.0 s" in warning  # line 1 is the header
