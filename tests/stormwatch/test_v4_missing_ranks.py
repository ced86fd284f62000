"""Ranks without counters (missing, or present without samples): ``None`` for schema-v4 jobs
as stormlog 0.4.3 writes it, 0 for v2/v3 jobs as stormlog 0.3.5 writes it.

Every job is world 4 with rank 2 missing; the ``silent`` variants also give rank 3 alerts
but no samples. v4 artifacts are written by stormlog 0.4.3's own ``TelemetryEventV4`` +
``telemetry_event_to_dict`` (in a subprocess, :func:`tests.model_builders._run_v4_writer`),
v3 ones by 0.3.5's (:func:`tests.builders.timeline_records`). Each case is compared
field by field with its reference, given the path list and given the job folder.
Bytes are bytes; ``t_s`` float seconds after :data:`tests.builders.START_NS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import model_builders as mb
from tests.builders import GIB, MIB, START_NS, Alert, timeline_records, write_jsonl
from tests.reference_model import canonical_model, model_differences, our_model, reference_model

WORLD_SIZE = 4
PRESENT_RANKS = (0, 1, 3)
MISSING_RANK = 2
SILENT_RANK = 3
N_SAMPLES = 8
INTERVAL_NS = 500_000_000
NULLABLE_FIELDS = ("allocated_delta_bytes", "reserved_delta_bytes", "hidden_gap_latest_bytes",
                   "hidden_gap_peak_abs_bytes")
ALERT_AT_S = 1.0


def _cuda_counters(rank: int, index: int) -> dict[str, int | None]:
    """Full-capability counters: allocated ramps, reserved = 1.25 x allocated, 2 GiB hidden gap."""
    allocated = 4 * GIB + rank * 256 * MIB + index * 32 * MIB
    reserved = allocated * 5 // 4
    used = reserved + 2 * GIB
    return {"allocator_allocated_bytes": allocated, "allocator_reserved_bytes": reserved,
            "allocator_active_bytes": allocated, "allocator_inactive_bytes": reserved // 10,
            "allocator_change_bytes": 32 * MIB if index else 0, "device_used_bytes": used,
            "device_free_bytes": mb.DEVICE_TOTAL_BYTES - used, "device_total_bytes": mb.DEVICE_TOTAL_BYTES}


def _v4_event(rank: int, index: int, *, event_type: str, context: str | None) -> dict[str, Any]:
    """A 0.4.3 ``TelemetryEventV4`` field dict (identity comes from the writer's environment)."""
    return {"schema_version": 4, "session_id": f"{mb.JOB_ID}-rank{rank}",
            "timestamp_ns": START_NS + index * INTERVAL_NS + (0 if event_type == "sample" else 1),
            "event_type": event_type,
            "collector": mb.CUDA_CAPABILITIES["telemetry_collector"], "sampling_interval_ms": 500,
            "pid": 2000 + rank, "host": "node-0", "device_id": rank, **_cuda_counters(rank, index),
            "context": context, "metadata": {"memory_capabilities": mb.CUDA_CAPABILITIES}}


def _v4_ranks(root: Path, stormlog43: Path, ranks: tuple[int, ...], *, silent: int | None) -> list[Path]:
    """The given ranks of the world-4 job as 0.4.3 JSON exports; rank 1 has a warning at
    :data:`ALERT_AT_S`, the ``silent`` rank only a warning (no samples)."""
    spec, paths = [], []
    alert_index = int(ALERT_AT_S * 1e9) // INTERVAL_NS
    for rank in ranks:
        events = [] if rank == silent else [_v4_event(rank, i, event_type="sample", context=None)
                                            for i in range(N_SAMPLES)]
        if rank in (1, silent):
            events.insert(alert_index + 1 if events else 0,
                          _v4_event(rank, alert_index, event_type="warning", context=f"rank {rank} memory high"))
        path = root / f"rank_{rank}" / "events_v4.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        spec.append({"kind": "events", "env": mb._rank_env(rank, WORLD_SIZE), "path": str(path), "events": events})
        paths.append(path)
    mb._run_v4_writer(stormlog43, spec)
    return paths


def _v3_rank(root: Path, rank: int, *, silent: int | None) -> Path:
    """One rank of the world-4 job in 0.3.5's ``TelemetryEventV3`` JSON Lines records; the
    silent rank keeps its start/stop and alert records but none of its samples."""
    samples = mb.gap_samples([2 * GIB] * N_SAMPLES, allocated=4 * GIB + rank * 256 * MIB)
    alerts = [Alert(ALERT_AT_S, "warning", f"rank {rank} memory high")] if rank in (1, silent) else []
    records = timeline_records(samples=samples, alerts=alerts, session_id=f"{mb.JOB_ID}-rank{rank}",
                               host="node-0", pid=1000 + rank, device_id=rank,
                               **mb.env_identity(rank, WORLD_SIZE, local_rank=rank))
    kept = [record for record in records if rank != silent or record["event_type"] != "sample"]
    return write_jsonl(root / f"rank_{rank}" / "events.jsonl", kept)


Builder = Callable[[Path, Path, int | None], list[Path]]


def _build_v4(root: Path, stormlog43: Path, silent: int | None) -> list[Path]:
    return _v4_ranks(root, stormlog43, PRESENT_RANKS, silent=silent)


def _build_v3(root: Path, stormlog43: Path, silent: int | None) -> list[Path]:
    return [_v3_rank(root, rank, silent=silent) for rank in PRESENT_RANKS]


def _build_mixed(root: Path, stormlog43: Path, silent: int | None) -> list[Path]:
    """Ranks 0 and 1 in v3 records, rank 3 in v4: one v4 record makes the whole job 0.4.3's."""
    return [*(_v3_rank(root, rank, silent=silent) for rank in (0, 1)),
            *_v4_ranks(root, stormlog43, (3,), silent=silent)]


@dataclass(frozen=True)
class Case:
    build: Builder
    version: str
    nothing: int | None  # what a rank without counters reports in the four byte fields
    silent: int | None = None
    mixed: bool = False  # v3 and v4 records in one job (see :func:`_comparable`)


CASES: dict[str, Case] = {
    "v4-missing-rank": Case(_build_v4, "0.4.3", None),
    "v4-missing-and-silent-rank": Case(_build_v4, "0.4.3", None, silent=SILENT_RANK),
    "v3-missing-rank": Case(_build_v3, "0.3.5", 0),
    "v3-missing-and-silent-rank": Case(_build_v3, "0.3.5", 0, silent=SILENT_RANK),
    "mixed-v3-v4-missing-rank": Case(_build_mixed, "0.4.3", None, mixed=True),
    "mixed-v3-v4-missing-and-silent-rank": Case(_build_mixed, "0.4.3", None, silent=SILENT_RANK, mixed=True),
}


@dataclass(frozen=True)
class Built:
    root: Path
    paths: list[Path]
    expected: dict[str, Any]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, stormlog43: Path) -> Callable[[str], Built]:
    """Each case's job and its reference model, made once per module."""
    cache: dict[str, Built] = {}

    def get(name: str) -> Built:
        if name not in cache:
            case = CASES[name]
            root = tmp_path_factory.mktemp(name) / "job"
            paths = case.build(root, stormlog43, case.silent)
            expected = canonical_model(reference_model(paths, version=case.version, stormlog43=stormlog43))
            cache[name] = Built(root, paths, expected)
        return cache[name]
    return get


def _comparable(model: dict[str, Any], *, mixed: bool) -> dict[str, Any]:
    """The model, for a mixed job without ``memory_capabilities`` in its markers' metadata.

    stormlog 0.4.3's loader infers capabilities into every record's metadata, v2/v3 ones
    included; stormwatch's loader (``stormwatch.events``, outside the model) infers them for
    v4 records only, so the v3 ranks' lifecycle and alert markers lack them. Nothing else
    in the model depends on it; every other field is still compared.
    """
    if not mixed:
        return model
    markers = {rank: [{**marker, "metadata": {k: v for k, v in marker["metadata"].items()
                                              if k != "memory_capabilities"}} for marker in values]
               for rank, values in model["markers_by_rank"].items()}
    return {**model, "markers_by_rank": markers}


def _rows_by_rank(model: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {row["rank"]: row for row in model["rows"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_reports_ranks_without_counters_as_the_case_says(name: str, built: Callable[[str], Built]) -> None:
    """The scenario still covers its path: rank 2 missing, the silent rank present without samples."""
    case, model = CASES[name], built(name).expected
    rows = _rows_by_rank(model)
    assert model["missing_ranks"] == [MISSING_RANK]
    assert rows[MISSING_RANK]["availability"] == "missing"
    assert [rows[MISSING_RANK][field] for field in NULLABLE_FIELDS] == [case.nothing] * 4
    if case.silent is not None:
        silent = rows[case.silent]
        assert (silent["availability"], silent["samples"], silent["first_anomaly_signal"]) == (
            "present", 0, "alert:warning")
        assert [silent[field] for field in NULLABLE_FIELDS] == [case.nothing] * 4
    assert all(isinstance(rows[0][field], int) for field in NULLABLE_FIELDS)  # measured ranks keep numbers


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_equals_reference(name: str, built: Callable[[str], Built]) -> None:
    job, mixed = built(name), CASES[name].mixed
    actual = canonical_model(our_model(job.paths))
    differences = model_differences(_comparable(job.expected, mixed=mixed), _comparable(actual, mixed=mixed))
    assert not differences, "\n".join(differences)


@pytest.mark.parametrize("name", sorted(CASES))
def test_job_folder_model_equals_reference(name: str, built: Callable[[str], Built]) -> None:
    job, mixed = built(name), CASES[name].mixed
    actual = canonical_model(our_model([job.root], job_folder=True))
    differences = model_differences(_comparable(job.expected, mixed=mixed), _comparable(actual, mixed=mixed))
    assert not differences, "\n".join(differences)


def test_rank_filter_keeps_the_job_rule(built: Callable[[str], Built], stormlog43: Path) -> None:
    """Filtering a mixed job down to its v3 ranks and the missing one still follows 0.4.3:
    the rule looks at every event of the job, as 0.4.3 does not filter before choosing."""
    job = built("mixed-v3-v4-missing-rank")
    selected = {0, MISSING_RANK}
    expected = canonical_model(reference_model(job.paths, selected, version="0.4.3", stormlog43=stormlog43))
    actual = canonical_model(our_model(job.paths, selected))
    assert [row["allocated_delta_bytes"] for row in expected["rows"]][1] is None
    differences = model_differences(_comparable(expected, mixed=True), _comparable(actual, mixed=True))
    assert not differences, "\n".join(differences)
