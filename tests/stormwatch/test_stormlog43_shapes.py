"""Shapes stormlog 0.4.3's own code writes (tests/stormlog43_writers.py), against 0.4.3's model.

* Diagnose bundles, CUDA's (``stormlog diagnose``) and JAX's (``stormlog.jax.diagnose``), one per rank.
  ``run_diagnose`` stamps no job id and each bundle's world size is what the ranks seen so far imply, so
  neither tool joins the four into one job: both pick the same one session. Bundle samples are
  synthesized legacy (v3) records, which stormwatch reads as 0.3.5 does: a missing rank's deltas and
  hidden gaps are 0 where 0.4.3 has null (docs/conformance.md); everything else equals 0.4.3.
* A CUDA bundle whose first bucket holds only the tracker's start event (null allocated and reserved):
  0.4.3 cannot read its own bundle (``int(None)``); stormwatch drops that one sample with a warning naming
  it, and then equals 0.4.3 given the bundle without it.
* Telemetry sinks that rolled over, lost their oldest segments to retention and hold rollups, identity from
  torchelastic's or SLURM's environment: equal to 0.4.3. With a restart (two sessions in each rank's sink)
  0.4.3 joins no job across the ranks (it joins only inputs of one session each) and picks one session;
  stormwatch does the same. Without one, the four ranks are one job.

Each job is compared given the job folder (stormwatch finds each rank's sink or bundle under it) and
given the path list 0.4.3 gets (each rank's sink or bundle folder). Loader warnings are compared by count,
and no Python warning may be raised while stormwatch loads and models.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from stormwatch import load_artifacts
from tests.reference_model import _clean_env, canonical_model, model_differences, our_model, reference_model
from tests.stormlog43_writers import (
    FirstBucket,
    Launcher,
    SinkPolicy,
    write_cuda_bundle_job,
    write_jax_bundle_job,
    write_sink_job,
)

Model = dict[str, Any]
WORLD_SIZE = 4
#: Row fields 0.4.3 leaves null for a rank without samples; stormwatch, on legacy (v3) data, says 0 as 0.3.5 does.
NULLABLE_FIELDS = ("allocated_delta_bytes", "reserved_delta_bytes", "device_used_delta_bytes",
                   "hidden_gap_latest_bytes", "hidden_gap_peak_abs_bytes")


class Shape(Enum):
    """The jobs 0.4.3 writes here, each built once per module."""

    CUDA_BUNDLES = "cuda-bundles"
    CUDA_BUNDLES_START_ONLY = "cuda-bundles-start-only"
    JAX_BUNDLES = "jax-bundles"
    SINKS_TORCHELASTIC = "sinks-torchelastic"
    SINKS_SLURM = "sinks-slurm"
    SINKS_SLURM_NO_RESTART = "sinks-slurm-no-restart"


@dataclass(frozen=True)
class Written:
    """A job folder and the per-rank folders 0.4.3 is given (``rank_<n>/<leaf>``)."""

    root: Path
    leaf: str

    def rank_folders(self) -> list[Path]:
        return sorted(self.root.glob(f"rank_*/{self.leaf}"))


_WRITERS: dict[Shape, Callable[[Path], Written]] = {
    Shape.CUDA_BUNDLES: lambda job: Written(write_cuda_bundle_job(job, FirstBucket.SAMPLED), "bundle"),
    Shape.CUDA_BUNDLES_START_ONLY: lambda job: Written(write_cuda_bundle_job(job, FirstBucket.START_ONLY),
                                                       "bundle"),
    Shape.JAX_BUNDLES: lambda job: Written(write_jax_bundle_job(job), "bundle"),
    Shape.SINKS_TORCHELASTIC: lambda job: Written(
        write_sink_job(job, Launcher.TORCHELASTIC, job_id="elastic-run-7", policy=SinkPolicy()), "telemetry"),
    Shape.SINKS_SLURM: lambda job: Written(
        write_sink_job(job, Launcher.SLURM, job_id="918273", policy=SinkPolicy()), "telemetry"),
    Shape.SINKS_SLURM_NO_RESTART: lambda job: Written(
        write_sink_job(job, Launcher.SLURM, job_id="918274", policy=SinkPolicy(), session_durations_s=(0.5,)),
        "telemetry"),
}
BUNDLES = (Shape.CUDA_BUNDLES, Shape.JAX_BUNDLES)
RESTARTED = (Shape.SINKS_TORCHELASTIC, Shape.SINKS_SLURM)
SINKS = (*RESTARTED, Shape.SINKS_SLURM_NO_RESTART)
READABLE = (*BUNDLES, *SINKS)  # shapes 0.4.3 itself reads


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, stormlog43: Path) -> Callable[[Shape], Written]:
    """Each shape's job, written on first use (``stormlog43``: 0.4.3 is installed before the writers run)."""
    jobs: dict[Shape, Written] = {}

    def get(shape: Shape) -> Written:
        if shape not in jobs:
            jobs[shape] = _WRITERS[shape](tmp_path_factory.mktemp(shape.value) / "job")
        return jobs[shape]
    return get


_LOAD_WARNINGS_43 = r"""
import json, sys
from pathlib import Path
from stormlog.tui import distributed_diagnostics as dd
print(json.dumps(dd.load_distributed_artifacts([Path(p) for p in json.load(sys.stdin)]).warnings))
"""


def reference_load_warnings(paths: list[Path], stormlog43: Path) -> list[str]:
    """0.4.3's ``load_distributed_artifacts(paths).warnings``."""
    done = subprocess.run([sys.executable, "-c", _LOAD_WARNINGS_43], input=json.dumps([str(p) for p in paths]),
                          text=True, capture_output=True, check=True,
                          env={**_clean_env(), "PYTHONPATH": str(stormlog43)})
    return list(json.loads(done.stdout))


def ours_quietly(paths: list[Path], *, job_folder: bool) -> tuple[Model, tuple[str, ...]]:
    """stormwatch's model and loader warnings; fails on any Python warning raised meanwhile."""
    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        model = our_model(paths, job_folder=job_folder)
        said = load_artifacts(paths).warnings  # one folder alone is loaded as a job folder
    assert [str(w.message) for w in raised] == []
    return canonical_model(model), said


def as_legacy_oracle(model: Model) -> Model:
    """0.4.3's model with a sampleless rank's null deltas and hidden gaps as 0.3.5's zeros."""
    rows = [{**row, **{f: 0 for f in NULLABLE_FIELDS if row[f] is None}} if row["samples"] == 0 else row
            for row in model["rows"]]
    return {**model, "rows": rows}


class Form(Enum):
    """How stormwatch is given a job: its folder (it finds each rank under it), or 0.4.3's path list."""

    JOB_FOLDER = "job folder"
    PATH_LIST = "path list"


def inputs(job: Written, form: Form) -> tuple[list[Path], bool]:
    """The paths stormwatch is given, and whether they are one job folder."""
    return ([job.root], True) if form is Form.JOB_FOLDER else (job.rank_folders(), False)


FORMS = tuple(Form)


# --- what 0.4.3 wrote: the test is about the shape it claims -----------------------------------------


@pytest.mark.parametrize("shape", SINKS, ids=[s.value for s in SINKS])
def test_sinks_rolled_over_pruned_and_wrote_rollups(shape: Shape,
                                                              written: Callable[[Shape], Written]) -> None:
    for folder in written(shape).rank_folders():
        manifest = json.loads((folder / "manifest.json").read_text())
        rollups = json.loads((folder / "rollups.json").read_text())
        kept_sessions = {segment["session_id"] for segment in manifest["segments"]}
        sessions = 2 if shape in RESTARTED else 1
        assert len(manifest["sessions"]) == sessions and len(kept_sessions) == sessions, folder  # all hold events
        assert len(manifest["segments"]) == SinkPolicy().retention_max_files
        assert rollups["coverage"]["pruned_segment_count"] > 0  # retention deleted the oldest
        assert sorted(path.name for path in folder.glob("segment-*.jsonl")) == [
            segment["filename"] for segment in manifest["segments"]]


@pytest.mark.parametrize(("shape", "job_id"), [(Shape.SINKS_TORCHELASTIC, "elastic-run-7"),
                                               (Shape.SINKS_SLURM, "918273"),
                                               (Shape.SINKS_SLURM_NO_RESTART, "918274")],
                         ids=["torchelastic", "slurm", "slurm-no-restart"])
def test_sink_identity_comes_from_the_launcher(shape: Shape, job_id: str,
                                               written: Callable[[Shape], Written]) -> None:
    for rank, folder in enumerate(written(shape).rank_folders()):
        sessions = json.loads((folder / "manifest.json").read_text())["sessions"]
        assert {(s["job_id"], s["rank"], s["local_rank"], s["world_size"]) for s in sessions} == {
            (job_id, rank, rank, WORLD_SIZE)}


def test_a_start_only_first_bucket_is_null_and_0_4_3_cannot_read_it(written: Callable[[Shape], Written],
                                                                     stormlog43: Path) -> None:
    job = written(Shape.CUDA_BUNDLES_START_ONLY)
    for folder in job.rank_folders():
        timeline = json.loads((folder / "telemetry_timeline.json").read_text())
        assert (timeline["allocated"][0], timeline["reserved"][0]) == (None, None)
        assert None not in timeline["allocated"][1:]
    with pytest.raises(RuntimeError, match="NoneType"):
        reference_model(job.rank_folders(), version="0.4.3", stormlog43=stormlog43)


# --- the models -------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS, ids=[f.value for f in FORMS])
@pytest.mark.parametrize("shape", SINKS, ids=[s.value for s in SINKS])
def test_sink_model_equals_0_4_3(shape: Shape, form: Form, written: Callable[[Shape], Written],
                                 stormlog43: Path) -> None:
    job = written(shape)
    expected = canonical_model(reference_model(job.rank_folders(), version="0.4.3", stormlog43=stormlog43))
    if shape in RESTARTED:
        # each rank folder holds two sessions, so 0.4.3 joins no job across them: it picks one session
        assert len(expected["present_ranks"]) == 1
    else:
        assert expected["present_ranks"] == list(range(WORLD_SIZE))  # one job of four ranks
    assert expected["indicators"]  # the climbing script raises 0.4.3's alerts
    paths, job_folder = inputs(job, form)
    actual, _ = ours_quietly(paths, job_folder=job_folder)
    assert model_differences(expected, actual) == []


@pytest.mark.parametrize("form", FORMS, ids=[f.value for f in FORMS])
@pytest.mark.parametrize("shape", BUNDLES, ids=[s.value for s in BUNDLES])
def test_bundle_model_equals_0_4_3_but_for_legacy_zeros(shape: Shape, form: Form,
                                                        written: Callable[[Shape], Written],
                                                        stormlog43: Path) -> None:
    job = written(shape)
    expected = canonical_model(reference_model(job.rank_folders(), version="0.4.3", stormlog43=stormlog43))
    assert len(expected["present_ranks"]) == 1  # no job id: the bundles are not joined, one session is picked
    paths, job_folder = inputs(job, form)
    actual, _ = ours_quietly(paths, job_folder=job_folder)
    assert model_differences(as_legacy_oracle(expected), actual) == []
    # and equal to 0.3.5, the oracle of legacy records, outright
    assert model_differences(canonical_model(reference_model(job.rank_folders())), actual) == []


def test_a_null_first_sample_drops_only_itself(written: Callable[[Shape], Written], stormlog43: Path,
                                               tmp_path: Path) -> None:
    job = written(Shape.CUDA_BUNDLES_START_ONLY)
    trimmed = shutil.copytree(job.root, tmp_path / "job")
    for timeline_path in trimmed.glob("rank_*/bundle/telemetry_timeline.json"):
        timeline = json.loads(timeline_path.read_text())
        timeline_path.write_text(json.dumps({key: values[1:] for key, values in timeline.items()}))
    expected = as_legacy_oracle(canonical_model(reference_model(
        Written(trimmed, "bundle").rank_folders(), version="0.4.3", stormlog43=stormlog43)))
    for form in FORMS:
        paths, job_folder = inputs(job, form)
        actual, said = ours_quietly(paths, job_folder=job_folder)
        assert model_differences(expected, actual) == [], form.value
        dropped = [w for w in said if w.endswith(":1: sample is not a number (sample skipped)")]
        assert sorted(dropped) == [f"{folder / 'telemetry_timeline.json'}:1: sample is not a number (sample skipped)"
                                   for folder in job.rank_folders()]


# --- warnings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS, ids=[f.value for f in FORMS])
@pytest.mark.parametrize("shape", READABLE, ids=[s.value for s in READABLE])
def test_loader_warnings_as_many_as_0_4_3s(shape: Shape, form: Form, written: Callable[[Shape], Written],
                                           stormlog43: Path) -> None:
    """Sinks: none from either. Bundles: one note per synthesized timeline from each."""
    job = written(shape)
    expected = reference_load_warnings(job.rank_folders(), stormlog43)
    assert len(expected) == (WORLD_SIZE if shape in BUNDLES else 0)
    paths, job_folder = inputs(job, form)
    _, said = ours_quietly(paths, job_folder=job_folder)
    assert len(said) == len(expected), (said, expected)
