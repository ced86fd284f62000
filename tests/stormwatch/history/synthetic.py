"""A synthetic fleet history: nights of audits of recurring jobs, with planted regressions and bad
devices, built columnar (numpy) so a million rows take well under a second.

Each night at 02:00 UTC one audit diagnoses ``jobs_per_night`` runs, one per job name
(``name-NN-<night>``), each of a world size fixed per name, its ranks on ``world // 8`` hosts
(one for fewer than 8 ranks) with device = rank % 8. Peaks are the name's base with 2% noise.
A run has a first cause with probability ``cause_rate`` on a uniformly chosen rank; a run placed
on a bad device has its first cause there with probability ``bad_rate``. On the last night the
planted names' peak reserved (×1.3) or hidden-gap peak (×1.5) jump.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa

from stormwatch.history.frame import history_frame
from stormwatch.history.regressions import RegressionMetric
from stormwatch.history.schema import HISTORY_SCHEMA, HISTORY_SCHEMA_VERSION, audit_id, file_metadata

GIB = 1024**3
FIRST_NIGHT = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Fleet:
    """Per-night audit tables (oldest first) and what was planted."""

    nights: tuple[pa.Table, ...]
    audit_times: tuple[datetime, ...]
    regressions: frozenset[tuple[str, RegressionMetric]]  # (job_id, metric) on the last night
    bad_devices: frozenset[tuple[str, int]]

    @property
    def as_of(self) -> datetime:
        return self.audit_times[-1]

    def table(self) -> pa.Table:
        return pa.concat_tables(self.nights)


def synthetic_fleet(
    *,
    nights: int = 30,
    jobs_per_night: int = 40,
    world_sizes: tuple[int, ...] = (1, 8, 8, 16),
    hosts: int = 20,
    cause_rate: float = 0.4,
    bad_rate: float = 0.6,
    bad_devices: tuple[tuple[str, int], ...] = (("node-07", 3),),
    reserved_jumps: int = 5,
    gap_jumps: int = 3,
    seed: int = 0,
) -> Fleet:
    rng = np.random.default_rng(seed)
    names = np.array([f"name-{index:02d}" for index in range(jobs_per_night)])
    worlds = rng.choice(world_sizes, size=jobs_per_night)
    base_reserved = rng.uniform(8, 70, size=jobs_per_night) * GIB
    base_gap = rng.uniform(0.2, 4, size=jobs_per_night) * GIB
    jumped = rng.permutation(jobs_per_night)
    reserved_up, gap_up = set(jumped[:reserved_jumps]), set(jumped[reserved_jumps : reserved_jumps + gap_jumps])
    bad = {(f"node-{h:02d}", d) for h, d in ((int(host[5:]), dev) for host, dev in bad_devices)}
    tables, times, planted = [], [], set()
    for night in range(nights):
        when = FIRST_NIGHT + timedelta(days=night)
        last = night == nights - 1
        job_of_rank = np.repeat(np.arange(jobs_per_night), worlds)
        rank = np.concatenate([np.arange(w) for w in worlds])
        first_host = rng.integers(0, hosts, size=jobs_per_night)
        host_index = (first_host[job_of_rank] + rank // 8) % hosts
        device = rank % 8
        job_ids = np.array([f"{name}-{night:04d}" for name in names])
        noise = rng.normal(1.0, 0.02, size=(2, jobs_per_night))
        reserved, gap = base_reserved * noise[0], base_gap * noise[1]
        if last:
            for index in reserved_up:
                reserved[index] *= 1.3
                planted.add((str(job_ids[index]), RegressionMetric.PEAK_RESERVED))
            for index in gap_up:
                gap[index] *= 1.5
                planted.add((str(job_ids[index]), RegressionMetric.HIDDEN_GAP_PEAK))
        # first causes: a uniformly chosen rank, unless the job touches a bad device that claims it
        cause_rank = np.where(rng.random(jobs_per_night) < cause_rate,
                              (rng.random(jobs_per_night) * worlds).astype(int), -1)
        on_bad = np.array([(f"node-{h:02d}", d) in bad for h, d in zip(host_index, device, strict=True)])
        claims = on_bad & (rng.random(len(rank)) < bad_rate)
        claimed_rank = np.full(jobs_per_night, -1)
        claimed_rank[job_of_rank[claims]] = rank[claims]
        cause_rank = np.where(claimed_rank >= 0, claimed_rank, cause_rank)
        first_cause = rank == cause_rank[job_of_rank]
        has_cause = cause_rank >= 0
        per_rank = rng.uniform(0.9, 1.0, size=len(rank))
        audit = audit_id(when, ((str(job), None) for job in job_ids))
        columns = {
            "audit_id": np.full(len(rank), audit),
            "audit_time": np.full(len(rank), np.datetime64(when.replace(tzinfo=None), "us")),
            "job_id": job_ids[job_of_rank],
            "job_name": names[job_of_rank],
            "session_id": np.array([f"{job}-attempt-1" for job in job_ids])[job_of_rank],
            "world_size": worlds[job_of_rank].astype(np.int32),
            "rank": rank.astype(np.int32),
            "host": np.array([f"node-{h:02d}" for h in range(hosts)])[host_index],
            "device_id": device.astype(np.int32),
            "samples": np.full(len(rank), 1000, dtype=np.int64),
            "peak_allocated_bytes": (reserved[job_of_rank] * per_rank * 0.9).astype(np.int64),
            "peak_reserved_bytes": (reserved[job_of_rank] * np.where(rank == 0, 1.0, per_rank)).astype(np.int64),
            "peak_device_used_bytes": ((reserved + gap)[job_of_rank] * per_rank).astype(np.int64),
            "device_total_bytes": np.full(len(rank), 80 * GIB, dtype=np.int64),
            "hidden_gap_peak_bytes": (gap[job_of_rank] * np.where(rank == 0, 1.0, per_rank)).astype(np.int64),
            "hidden_gap_latest_bytes": (gap[job_of_rank] * 0.5).astype(np.int64),
            "allocated_delta_bytes": np.zeros(len(rank), dtype=np.int64),
            "reserved_delta_bytes": np.zeros(len(rank), dtype=np.int64),
            "first_anomaly_signal": np.where(first_cause, "alert:critical", None),
            "first_anomaly_severity": np.where(first_cause, "critical", None),
            "first_anomaly_timestamp_ns": np.where(first_cause, 1_700_000_000_000_000_000, 0).astype(np.int64),
            "first_cause": first_cause,
            "verdict": np.where(has_cause[job_of_rank], "critical", "clean"),
            "session_verdict": np.where(has_cause[job_of_rank], "critical", "clean"),
            "input_fingerprint": np.full(len(rank), "sha256:synthetic"),
            "job_started_ns": np.full(len(rank), int(when.timestamp() * 1e9) - 3_600_000_000_000, dtype=np.int64),
            "availability": np.full(len(rank), "present"),
            "has_anomaly": first_cause,
            "first_anomaly_phase_path": np.full(len(rank), None),
            "outlier": np.zeros(len(rank), dtype=bool),
            "schema_version": np.full(len(rank), HISTORY_SCHEMA_VERSION, dtype=np.int32),
        }
        columns["duration_ns"] = np.full(len(rank), 3_600_000_000_000, dtype=np.int64)  # v4; growth columns null
        arrays = [pa.array(columns[field.name], type=field.type) if field.name in columns
                  else pa.nulls(len(rank), field.type) for field in HISTORY_SCHEMA]
        table = pa.Table.from_arrays(arrays, schema=HISTORY_SCHEMA).replace_schema_metadata(file_metadata())
        tables.append(table)
        times.append(when)
    return Fleet(tuple(tables), tuple(times), frozenset(planted), frozenset(bad))


def run_rows(
    job_id: str,
    *,
    night: int,
    job_name: str | None = None,
    world_size: int = 2,
    peak_reserved: float | None = 10 * GIB,
    gap_peak: float | None = GIB,
    hosts: tuple[str, ...] = ("node-00",),
    first_cause_rank: int | None = None,
    verdict: str | None = "clean",
    audit: str | None = None,
) -> list[dict[str, object]]:
    """The rank rows of one run audited on ``night`` (02:00 UTC on FIRST_NIGHT + night days):
    rank r on ``hosts[r // 8 % len(hosts)]``, device r % 8; rank 0 carries the job's peaks."""
    when = FIRST_NIGHT + timedelta(days=night)
    rows: list[dict[str, object]] = []
    for rank in range(world_size):
        rows.append({
            "audit_id": audit or f"audit-{when:%Y%m%dT%H%M%SZ}-00000000",
            "audit_time": when,
            "job_id": job_id,
            "job_name": job_name or job_id.rsplit("-", 1)[0],
            "world_size": world_size,
            "rank": rank,
            "host": hosts[rank // 8 % len(hosts)],
            "device_id": rank % 8,
            "peak_reserved_bytes": None if peak_reserved is None else int(peak_reserved * (1.0 if rank == 0 else 0.9)),
            "hidden_gap_peak_bytes": None if gap_peak is None else int(gap_peak * (1.0 if rank == 0 else 0.5)),
            "first_cause": rank == first_cause_rank,
            "verdict": verdict,
            "job_started_ns": int(when.timestamp()) * 10**9,
        })
    return rows


def history_of(rows: list[dict[str, object]]) -> pd.DataFrame:
    """Rows (missing columns null) as the DataFrame the analytics read."""
    columns = {field.name: [row.get(field.name) for row in rows] for field in HISTORY_SCHEMA}
    columns["schema_version"] = [HISTORY_SCHEMA_VERSION] * len(rows)
    return history_frame(pa.Table.from_pydict(columns, schema=HISTORY_SCHEMA))
