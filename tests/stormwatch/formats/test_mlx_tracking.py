"""stormlog 0.4.3's MLX ``tracking.json`` (``{"session_summary": ..., "telemetry_events": [...]}``).

Bundles are written by 0.4.3's own ``CaptureBundle`` (:mod:`tests.stormlog43_mlx`):
three ranks of one job (rank 1's cache counter fails once, so its tracker reports
``collector_degraded`` / ``collector_recovered``), and one single-rank bundle.
stormwatch's diagnostics model must equal 0.4.3's whether it is given the bundle
folders, the ``tracking.json`` files alone or the job folder; no file of a bundle may
warn; a damaged ``tracking.json`` warns naming the file (and the record) while the
rest of the job loads.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stormwatch import load_artifacts
from stormwatch.formats.json_document import read_json, records_of
from stormwatch.formats.json_table import record_table
from stormwatch.formats.json_value import parse_json_value
from tests.builders import GIB, MIB
from tests.reference_model import canonical_model, model_differences, our_model, reference_model
from tests.stormlog43_mlx import MLXRank, write_mlx_bundles

SAMPLES = 24
#: Active memory jumps on the ``all_reduce`` phase's enter, sample and exit (reads 14-16).
SPIKES = {14: 4 * GIB, 15: 6 * GIB, 16: 4 * GIB}
PHASES = {5: "train", 12: "all_reduce"}
JOB = (
    MLXRank(rank=0, samples=SAMPLES, phases=PHASES, spikes=SPIKES),
    MLXRank(rank=1, samples=SAMPLES, base_bytes=GIB + 32 * MIB, phases=PHASES, spikes=SPIKES, cache_failures=(7,)),
    MLXRank(rank=2, samples=SAMPLES, base_bytes=2 * GIB, period=5, phases=PHASES, spikes=SPIKES),
)


@dataclass(frozen=True)
class Job:
    root: Path
    bundles: list[Path]

    @property
    def tracking(self) -> list[Path]:
        return [bundle / "tracking.json" for bundle in self.bundles]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, stormlog43: Path) -> Job:
    root = tmp_path_factory.mktemp("mlx") / "job"
    return Job(root, write_mlx_bundles(root, JOB, stormlog43=stormlog43))


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory, stormlog43: Path) -> Job:
    root = tmp_path_factory.mktemp("mlx-single") / "job"
    return Job(root, write_mlx_bundles(root, [MLXRank(rank=0, samples=40, phases={3: "warmup"})],
                                       stormlog43=stormlog43))


def _assert_equal_models(paths: list[Path], stormlog43: Path, *, job_folder: Path | None = None) -> dict[str, Any]:
    expected = canonical_model(reference_model(paths, version="0.4.3", stormlog43=stormlog43))
    actual = canonical_model(our_model([job_folder] if job_folder else paths, job_folder=job_folder is not None))
    differences = model_differences(expected, actual)
    assert not differences, "\n".join(differences)
    return expected


def test_the_bundle_is_what_stormlog_writes(job: Job) -> None:
    """The writer's output has the shape the issue is about: tracker events of schema v4
    under ``telemetry_events``, their session in ``session_summary``, next to a sink."""
    payload = json.loads(job.tracking[1].read_text())
    events = payload["telemetry_events"]
    assert {e["schema_version"] for e in events} == {4}
    assert {e["session_id"] for e in events} == {payload["session_summary"]["session_id"]}
    assert {"collector_degraded", "collector_recovered", "phase_enter", "start", "stop"} <= {
        e["event_type"] for e in events}
    assert (job.bundles[1] / "telemetry" / "manifest.json").exists()


@pytest.mark.parametrize("inputs", ["bundle folders", "tracking files"])
def test_model_equals_reference(job: Job, stormlog43: Path, inputs: str) -> None:
    paths = job.bundles if inputs == "bundle folders" else job.tracking
    expected = _assert_equal_models(paths, stormlog43)
    assert [(row["rank"], row["availability"], row["samples"]) for row in expected["rows"]] == [
        (rank, "present", SAMPLES) for rank in range(3)]


def test_job_folder_model_equals_reference_given_each_bundle(job: Job, stormlog43: Path) -> None:
    _assert_equal_models(job.bundles, stormlog43, job_folder=job.root)


def test_reference_reads_tracking_json_alone_as_the_bundle(job: Job, stormlog43: Path) -> None:
    """0.4.3 reads tracking.json's events: alone it gives the bundles' model."""
    assert reference_model(job.tracking, version="0.4.3", stormlog43=stormlog43) == reference_model(
        job.bundles, version="0.4.3", stormlog43=stormlog43)


@pytest.mark.parametrize("inputs", ["bundle folder", "tracking file"])
def test_single_bundle_model_equals_reference(single: Job, stormlog43: Path, inputs: str) -> None:
    _assert_equal_models(single.bundles if inputs == "bundle folder" else single.tracking, stormlog43)


def test_no_file_of_a_bundle_warns(job: Job) -> None:
    for paths in ([job.root], job.bundles, job.tracking, *([path] for path in job.bundles),
                  *([path] for path in job.tracking)):
        loaded = load_artifacts(paths)
        assert loaded.warnings == (), paths
        assert len(loaded.events) > 0


def test_tracking_json_takes_the_columnar_path(job: Job) -> None:
    for path in job.tracking:
        data = path.read_bytes()
        records = records_of(parse_json_value(data))
        assert len(records) == len(json.loads(data)["telemetry_events"])
        table = record_table(records, default_session_id="unused")
        assert table is not None and table.rest.size == 0
        parsed = read_json(data, label=str(path), default_session_id="unused")
        assert (len(parsed.frame), parsed.warnings) == (len(records), ())


# --- damaged tracking.json --------------------------------------------------------------------

def _copy(job: Job, tmp_path: Path) -> Job:
    root = tmp_path / "job"
    shutil.copytree(job.root, root)
    return Job(root, [root / bundle.name for bundle in job.bundles])


def _ranks(paths: list[Path]) -> set[int]:
    return {int(rank) for rank in load_artifacts(paths).events["rank"].unique()}


def test_cut_short_tracking_json_warns_and_the_other_ranks_load(job: Job, tmp_path: Path, stormlog43: Path) -> None:
    damaged = _copy(job, tmp_path)
    text = damaged.tracking[1].read_text()
    cut = text.index('"telemetry_events"') + (len(text) - text.index('"telemetry_events"')) // 2
    damaged.tracking[1].write_text(text[:cut])

    loaded = load_artifacts(damaged.tracking)
    assert len(loaded.warnings) == 1
    assert str(damaged.tracking[1]) in loaded.warnings[0] and "malformed JSON at line" in loaded.warnings[0]
    assert _ranks(damaged.tracking) == {0, 2}
    # Its bundle still has the tracker's sink: the rank loads from it, the file still warns.
    folder = load_artifacts([damaged.root])
    assert [str(damaged.tracking[1]) in warning for warning in folder.warnings] == [True]
    assert _ranks([damaged.root]) == {0, 1, 2}
    _assert_equal_models(damaged.tracking, stormlog43)  # 0.4.3 drops the file too


def _rewrite(path: Path, change: dict[str, Any]) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))


def test_wrong_shape_warns_naming_the_file(job: Job, tmp_path: Path) -> None:
    damaged = _copy(job, tmp_path)
    _rewrite(damaged.tracking[1], {"telemetry_events": {"not": "a list"}})
    loaded = load_artifacts(damaged.tracking)
    assert loaded.warnings == (f"Failed to parse JSON telemetry file {damaged.tracking[1]}: "
                               "JSON payload does not contain telemetry events",)
    assert _ranks(damaged.tracking) == {0, 2}


def test_a_bad_record_warns_naming_it_and_only_it_is_dropped(job: Job, tmp_path: Path) -> None:
    damaged = _copy(job, tmp_path)
    events = json.loads(damaged.tracking[0].read_text())["telemetry_events"]
    events[4] = {**events[4], "allocator_allocated_bytes": -1}
    _rewrite(damaged.tracking[0], {"telemetry_events": events})
    loaded = load_artifacts(damaged.tracking)
    assert loaded.warnings == (f"{damaged.tracking[0]}:5: allocator_allocated_bytes must be >= 0 (record skipped)",)
    assert len(loaded.events) == sum(len(json.loads(p.read_text())["telemetry_events"]) for p in job.tracking) - 1


def test_events_of_another_session_fail_the_file_as_stormlog(job: Job, tmp_path: Path, stormlog43: Path) -> None:
    """0.4.3 refuses a tracking.json whose events are not all its summary's session."""
    damaged = _copy(job, tmp_path)
    events = json.loads(damaged.tracking[2].read_text())["telemetry_events"]
    events[6] = {**events[6], "session_id": "someone-else"}
    _rewrite(damaged.tracking[2], {"telemetry_events": events})
    loaded = load_artifacts(damaged.tracking)
    assert len(loaded.warnings) == 1
    assert loaded.warnings[0].startswith(f"Failed to parse JSON telemetry file {damaged.tracking[2]}: ")
    assert "record 7" in loaded.warnings[0]
    assert _ranks(damaged.tracking) == {0, 1}
    _assert_equal_models(damaged.tracking, stormlog43)


def test_an_invalid_session_summary_fails_the_file_as_stormlog(job: Job, tmp_path: Path, stormlog43: Path) -> None:
    damaged = _copy(job, tmp_path)
    summary = json.loads(damaged.tracking[0].read_text())["session_summary"]
    _rewrite(damaged.tracking[0], {"session_summary": {**summary, "host": ""}})
    loaded = load_artifacts(damaged.tracking)
    assert [str(damaged.tracking[0]) in warning and "session_summary" in warning for warning in loaded.warnings] == [
        True]
    _assert_equal_models(damaged.tracking, stormlog43)


def test_the_tracker_s_own_session_summary_is_the_session_s(job: Job) -> None:
    """As 0.4.3 takes it: the summary tracking.json states stands for its session (status, times, identity)."""
    from stormwatch.events.sessions import summary_from_mapping

    for tracking in job.tracking:
        stated = summary_from_mapping(json.loads(tracking.read_text())["session_summary"])
        (found,) = [s for s in load_artifacts([tracking]).sessions if s.session_id == stated.session_id]
        assert (found.status, found.started_at_ns, found.ended_at_ns, found.host, found.pid, found.rank,
                found.world_size) == (stated.status, stated.started_at_ns, stated.ended_at_ns, stated.host,
                                      stated.pid, stated.rank, stated.world_size)
