"""Growth figures, headroom and capacity for the page tests (issue 30): :class:`RankGrowth` values built
directly, put into a model.json's ``fleet`` member, and fleet.json rows and sections that carry leaks,
headroom, capacity warnings and regressions owned by a rank or a suspect device."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stormwatch.growth.figures import GrowthCounter, GrowthGap, RankGrowth
from stormwatch.history.capacity_trend import CapacityWarning
from tests import builders as b
from tests.reports.attention_builders import job, placed
from tests.reports.builders import make_fleet
from tests.reports.fleet_builders import make_job_fleet, make_regression, make_suspect, with_fleet_intel

HOUR_NS = 3_600 * 10**9
DEVICE_BYTES = 80 * b.GIB


def leaking(rank: int, *, per_hour_bytes: float = 1.2 * b.GIB, after_s: float = 3.4 * 3600,
            confidence: float = 0.99) -> RankGrowth:
    """A leaking rank: reserved grows ``per_hour_bytes`` and fills its 80 GiB device ``after_s`` after start."""
    return RankGrowth(rank=rank, duration_ns=2 * HOUR_NS, allocated_bytes_per_hour=per_hour_bytes * 0.9,
                      reserved_bytes_per_hour=per_hour_bytes, judged_counter=GrowthCounter.RESERVED,
                      low_bytes_per_hour=per_hour_bytes * 0.8, high_bytes_per_hour=per_hour_bytes * 1.2,
                      confidence=confidence, leak=True, leak_min_bytes_per_hour=400 * b.MIB,
                      device_total_bytes=DEVICE_BYTES, capacity_after_start_s=after_s, gap=None)


def steady(rank: int, *, per_hour_bytes: float = -12 * b.MIB) -> RankGrowth:
    """A rank that does not grow (a figure, no leak)."""
    return RankGrowth(rank=rank, duration_ns=2 * HOUR_NS, allocated_bytes_per_hour=per_hour_bytes,
                      reserved_bytes_per_hour=0.0, judged_counter=GrowthCounter.ALLOCATED,
                      low_bytes_per_hour=per_hour_bytes - b.MIB, high_bytes_per_hour=per_hour_bytes + b.MIB,
                      confidence=0.1, leak=False, leak_min_bytes_per_hour=400 * b.MIB,
                      device_total_bytes=DEVICE_BYTES, capacity_after_start_s=None, gap=None)


def gap(rank: int, reason: GrowthGap = GrowthGap.TOO_FEW_SAMPLES) -> RankGrowth:
    """A rank without a growth figure, for ``reason``."""
    return RankGrowth(rank=rank, duration_ns=HOUR_NS, allocated_bytes_per_hour=None, reserved_bytes_per_hour=None,
                      judged_counter=None, low_bytes_per_hour=None, high_bytes_per_hour=None, confidence=None,
                      leak=False, leak_min_bytes_per_hour=None, device_total_bytes=DEVICE_BYTES,
                      capacity_after_start_s=None, gap=reason)


def with_growth(document: Mapping[str, Any], figures: Sequence[RankGrowth]) -> dict[str, Any]:
    """``document`` (a model.json with a ``fleet`` member) with ``fleet.growth`` set to ``figures``."""
    fleet = dict(document["fleet"])
    fleet["growth"] = [item.as_json() for item in figures]
    return {**document, "fleet": fleet}


def leak_member(*, rank: int = 3, host: str = "gpu-node-01", device_id: int = 3) -> dict[str, Any]:
    """A fleet.json row's ``leak``: 1.2 GiB/h on an 80 GiB device, full 3.4 h after start."""
    return {"rank": rank, "host": host, "device_id": device_id, "bytes_per_hour": 1.2 * b.GIB,
            "device_total_bytes": DEVICE_BYTES, "capacity_after_start_s": 3.4 * 3600}


def leaking_job(job_id: str, *, verdict: str = "clean", leaks: int = 1, **leak: Any) -> dict[str, Any]:
    """A fleet.json row of a run whose ranks leak (``leaks`` of them; the first named)."""
    return {**job(job_id, verdict=verdict), "leaks": leaks, "leak": leak_member(**leak), "used_percent": 61.0,
            "unused_gib_hours": 62.5}


def capacity_entry(*, job_name: str = "llama-7b", job_id: str = "llama-7b-0142") -> dict[str, Any]:
    """A fleet.json ``capacity`` entry, as the capacity trend writes it (peak up 6 % a run over 5 runs,
    70 GiB of 80 GiB now: past the device within 3 runs)."""
    return CapacityWarning(job_name=job_name, world_size=8, runs=5, growth_pct_per_run=6.0,
                           latest_peak_bytes=70 * b.GIB, device_total_bytes=DEVICE_BYTES, runs_to_capacity=3,
                           job_id=job_id, peaks_bytes=tuple(int(size * b.GIB) for size in (55, 59, 62, 66, 70)),
                           rank=0, host="gpu-node-02", device_id=0).as_json()


def owned_regression(*, job_id: str, explained: bool, rank: int = 2, host: str = "node-bad",
                     device_id: int = 2) -> dict[str, Any]:
    """A regression whose value rank ``rank`` on ``host``/``device_id`` set; ``explained``: that device is
    a suspect of the same audit."""
    return {**make_regression(job_id=job_id, job_name=job_id.rsplit("-", 1)[0]), "rank": rank, "host": host,
            "device_id": device_id, "explained_by_suspect": explained}


def headroom_member(under: Sequence[tuple[str, float]], *, unused_gib_hours: float = 12_345.6,
                    counted: int = 40, listed: int | None = None) -> dict[str, Any]:
    """fleet.json's ``headroom``: ``under`` the (job id, used percent) of the jobs under half, the first
    ``listed`` of them listed (all by default)."""
    shown = under if listed is None else under[:listed]
    return {"unused_gib_hours": unused_gib_hours, "jobs_counted": counted, "under_percent": 50.0,
            "jobs_under_half_count": len(under),
            "jobs_under_half": [{"job_id": job_id, "used_percent": percent, "report": f"{job_id}/report.html"}
                                for job_id, percent in shown]}


def growth_document(document: Mapping[str, Any], *, host: str = "gpu-node-{rank}") -> dict[str, Any]:
    """A 4-rank model.json (the clean job) placed on ``host`` (formatted with the rank): rank 0 leaks fast,
    1 does not grow, 2 has no figure (no device total), 3 leaks slowly; ranks peak at 31 + rank GiB of 80."""
    placed_doc = make_job_fleet(document, host=host, outliers=[], regression=None)
    return with_growth(placed_doc, [leaking(0), steady(1), gap(2, GrowthGap.NO_DEVICE_TOTAL),
                                    leaking(3, per_hour_bytes=300 * b.MIB, after_s=40 * 3600)])


def growth_fleet() -> dict[str, Any]:
    """A fleet.json: a critical OOM job, a clean run with 2 leaking ranks, a capacity warning for llama-7b,
    a regression a suspect device (node-bad/2) explains and one rank 5 on node-04 carried, and headroom."""
    rows = [job("oom-job", cause=placed(oom=True)), leaking_job("leaky-1", leaks=2),
            job("train-b-12", verdict="clean"), job("train-c-11", verdict="clean")]
    fleet = with_fleet_intel(make_fleet(jobs=rows), suspects=[make_suspect(host="node-bad", device_id=2)],
                             regressions=[owned_regression(job_id="train-b-12", explained=True),
                                          owned_regression(job_id="train-c-11", explained=False, rank=5,
                                                           host="node-04", device_id=5)])
    return {**fleet, "capacity": [capacity_entry(job_id="train-c-11", job_name="llama-7b")],
            "headroom": headroom_member([("train-c-11", 12.5), ("train-b-12", 31.0)])}
