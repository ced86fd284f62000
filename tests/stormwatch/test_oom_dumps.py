"""OOM flight-recorder dumps written by stormlog 0.4.3's own tracker: evidence, never events counted twice."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stormwatch import load_artifacts
from stormwatch.formats.oom_dump import OomDump, read_dump
from tests.reference_model import model_differences, our_model, reference_model
from tests.stormlog43_oom import RankSpec, write_oom_job

GIB = 1024**3


@pytest.fixture(scope="module")
def with_sink(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four ranks with sinks; rank 3 runs out of memory and its flight recorder dumps."""
    return write_oom_job(tmp_path_factory.mktemp("oom") / "job", [RankSpec(0), RankSpec(1), RankSpec(2),
                                                                   RankSpec(3, oom=True)])


@pytest.fixture(scope="module")
def dump_alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """As above, but rank 3 writes no sink: the dump is all its telemetry."""
    return write_oom_job(tmp_path_factory.mktemp("oom-alone") / "job", [RankSpec(0), RankSpec(1), RankSpec(2),
                                                                         RankSpec(3, sink=False, oom=True)])


def sinks(job: Path) -> list[Path]:
    return sorted(job.glob("rank_*/telemetry"))


def dump_events(job: Path) -> Path:
    (found,) = job.glob("rank_3/oom_dumps/oom_dump_*/events.json")
    return found


def test_a_dump_beside_the_sink_counts_no_event_twice(with_sink: Path) -> None:
    ours = our_model([with_sink], job_folder=True)
    assert model_differences(reference_model(sinks(with_sink), version="0.4.3"), ours) == []
    # 0.4.3 given the dump as well counts its ring buffer a second time: a deliberate difference
    doubled = reference_model([*sinks(with_sink), dump_events(with_sink)], version="0.4.3")
    assert doubled["rows"][3]["samples"] > ours["rows"][3]["samples"]


def test_a_dump_alone_gives_its_rank_every_event(dump_alone: Path) -> None:
    ours = our_model([dump_alone], job_folder=True)
    assert ours["rows"][3]["availability"] == "present" and ours["rows"][3]["samples"] > 0
    expected = reference_model([*sinks(dump_alone), dump_events(dump_alone)], version="0.4.3")
    # 0.4.3 gives markers of legacy-shaped records the capabilities it infers for them; stormwatch
    # reads legacy records as 0.3.5, their oracle, does (docs/conformance.md)
    for marker in expected["markers_by_rank"]["3"]:
        assert marker["metadata"].pop("memory_capabilities")["sampling_source"] == "legacy"
    assert model_differences(expected, ours) == []


def test_what_the_dump_says_is_read(with_sink: Path) -> None:
    loaded = load_artifacts(with_sink)
    (dump,) = loaded.oom_dumps
    assert dump.sentence() == "out of memory on rank 3: tried to allocate 2.0 GiB with 1.1 GiB free of 80 GiB"
    assert (dump.rank, dump.backend, dump.exception_type, dump.context) == (3, "cuda", "OutOfMemoryError",
                                                                         "train/backward")
    assert dump.folder.startswith("rank_3/oom_dumps/oom_dump_")
    assert dump.session_id in {session.session_id for session in loaded.sessions}  # rank 3's own session
    assert not [warning for warning in loaded.warnings if "oom" in warning.lower()]


@pytest.mark.parametrize(("damage", "warned"), [
    ("metadata.json", "metadata.json: unreadable"),
    ("events.json", "events.json"),
], ids=["metadata cut short", "events cut short"])
def test_a_damaged_dump_is_named_and_the_rest_still_loads(with_sink: Path, tmp_path: Path, damage: str,
                                                         warned: str) -> None:
    job = shutil.copytree(with_sink, tmp_path / "job")
    target = dump_events(job).parent / damage
    target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    loaded = load_artifacts(job)
    assert any(warned in warning and str(target.parent) in warning for warning in loaded.warnings), loaded.warnings
    ours = our_model([job], job_folder=True)
    assert model_differences(reference_model(sinks(job), version="0.4.3"), ours) == []


@pytest.mark.parametrize(("metadata", "sentence"), [
    ({"exception_message": "CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of "
                           "79.19 GiB of which 20.06 MiB is free.", "custom_metadata": {"rank": 0}},
     "out of memory on rank 0: tried to allocate 0.5 GiB with 0.0 GiB free of 79.2 GiB"),
    ({"exception_message": "RESOURCE_EXHAUSTED: Out of memory", "custom_metadata": {
        "rank": 2, "sample_free_bytes": 3 * GIB, "sample_total_bytes": 16 * GIB}},
     "out of memory on rank 2: with 3.0 GiB free of 16 GiB"),
    ({"exception_message": "boom", "custom_metadata": {"total_memory_bytes": 24 * GIB}},
     "out of memory: on a 24 GiB device"),
    ({"custom_metadata": "not an object"}, "out of memory"),
], ids=["pytorch MiB", "device sample", "total only", "nothing known"])
def test_a_dump_says_what_it_knows_in_one_line(metadata: dict[str, object], sentence: str) -> None:
    import orjson

    dump = read_dump("oom_dump_x", orjson.dumps(metadata))
    assert dump.sentence() == sentence
    assert OomDump.from_json(dump.as_json()) == dump


def test_the_document_the_verdict_and_the_report_say_it(with_sink: Path, tmp_path: Path) -> None:
    import html

    import orjson

    from stormwatch.flows.cli import main

    assert main(["diagnose", str(with_sink), "--out", str(tmp_path / "out")]) == 0
    document = orjson.loads((tmp_path / "out" / "model.json").read_bytes())
    said = "out of memory on rank 3: tried to allocate 2.0 GiB with 1.1 GiB free of 80 GiB"
    (dump,) = document["oom_dumps"]
    assert dump["sentence"] == said and dump["requested_bytes"] == 2 * GIB
    assert document["verdict"]["summary"].endswith(f"; {said}")
    page = html.unescape((tmp_path / "out" / "report.html").read_text())
    assert "Out of memory on rank 3: tried to allocate 2.0 GiB with 1.1 GiB free of 80 GiB (oom, critical)" in page


def test_records_of_another_session_in_a_dump_are_named_and_skipped(with_sink: Path, tmp_path: Path) -> None:
    import orjson

    job = shutil.copytree(with_sink, tmp_path / "job")
    events = dump_events(job)
    records = orjson.loads(events.read_bytes())
    for index in (2, 5):
        records[index]["session_id"] = "someone-else"
        records[index]["timestamp"] += 1e-4  # not in the sink: only the session check can refuse them
    events.write_bytes(orjson.dumps(records))
    loaded = load_artifacts(job)
    (warning,) = [warning for warning in loaded.warnings if "another session" in warning]
    (dump,) = loaded.oom_dumps
    assert warning == f"OOM dump {events}: records 3, 6 of another session than the dump's {dump.session_id} (skipped)"
    assert "someone-else" not in {session.session_id for session in loaded.sessions}
    assert model_differences(reference_model(sinks(job), version="0.4.3"), our_model([job], job_folder=True)) == []
