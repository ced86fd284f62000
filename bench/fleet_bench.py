"""Fleet benchmark: `stormwatch audit` over a generated fleet, local and S3, against the engine's own work.

    python bench/fleet_bench.py [--jobs-mix 200] [--jobs-tiny 2000] [--fleets mix,tiny]
                                [--storage local,s3] [--modes served,ephemeral] [--seed 0]
                                [--repeat 1] [--keep DIR] [--audit-args "--workers 4"]

    quick run:  python bench/fleet_bench.py --jobs-mix 20 --jobs-tiny 50 --keep /tmp/fleet-bench

The fleets (``<root>/jobs/<job_id>/**``, deterministic by ``--seed``; written once under
``--keep DIR/<fleet>-<N>-seed<S>/`` and reused while their parameters match):
  mix   2-8 ranks x 300-3,000 samples per rank, one shape per job drawn from every shape
        stormlog writes (the writers of shapes_bench.py over jobgen.py's records): JSONL with
        text contexts and tracker metadata, JSONL with null sample contexts, tracker CSV and
        JSON exports, rotated sink directories, diagnose bundles, schema v4, and "mixed" jobs
        whose ranks use different shapes. ~40% of the jobs model memory outside the allocator
        (jobgen's --hidden-memory: critical findings), the rest do not (a warning verdict:
        the allocation spike); bundles carry no device counters, so they are never critical, and
        their ranks do not merge (no job_id, as ``stormlog diagnose`` writes them: one rank's
        session is selected, the others count as missing, a warning verdict).
  tiny  1-2 ranks x 50-200 samples, the same shapes.

For every (fleet, storage, mode), --repeat times, fresh reports each time:
  cold      wall time of ``stormwatch audit --storage URI [--endpoint-url URL] [--audit-args]``
            (a subprocess of the real CLI) with no reports: every job diagnosed; checked in
            reports/fleet.json (summary: diagnosed == jobs)
  start-up  wall time of a subprocess running one empty Prefect flow in the same mode:
            Prefect's own start-up (interpreter, ``import prefect``, flow run bookkeeping,
            and in ephemeral mode the temporary API server)
  rerun     the same audit again, nothing changed: every job skipped (skipped == jobs)
Modes:
  served     a Prefect API server already runs (``SubprocessASGIServer``, started once before
             the mode's runs, not timed); the subprocesses get its PREFECT_API_URL: the
             production shape, where deployments run against a live server
  ephemeral  no PREFECT_API_URL: every subprocess starts Prefect's temporary server itself, on a
             database created beforehand (a PREFECT_HOME of its own, one empty flow run first)
Both use PREFECT.md's quiet settings (analytics off, DO_NOT_TRACK, the task-run recorder,
event persister and triggers services off, a temporary PREFECT_HOME) and run in an empty
working folder (no .env or prefect.toml).
S3: a moto server in this process (real HTTP on 127.0.0.1, fake credentials), the fleet uploaded
once with parallel boto3 puts, audited as s3://stormwatch-bench/<fleet> with --endpoint-url.
The moto server shares the 2 cores with the audit, as a local S3 emulation must.

Engine work: in this process, for every job, what the audit's per-job step does minus storage
writes and Prefect: list the job's files, fetch it (LocalStorage), ``diagnose`` (load, model,
verdict, document), serialise model.json and render the HTML report; one untimed job first
(lazy imports, template compilation). Wall seconds, and CPU seconds (``time.process_time``: every
thread of the process, since Arrow parses and the loader reads on threads of their own, so one
process already keeps about 1.3 of 2 cores busy). Per core = CPU seconds / os.cpu_count(): the
least wall time in which any scheduler could do the work on this machine, the ideal parallel
time. (Wall seconds / cores, the issue's own figure, would count the engine's own threads as
orchestration; it is printed too, as wall-sh.) The same figure serves both storages (S3 adds
the fetch over HTTP, which is counted as orchestration here). The pass also checks the
generator: verdict counts, and any load warning other than the bundles' expected
"Synthesized telemetry events ..." note is printed as bad input.

Orchestration share = 1 - (engine CPU per core) / (cold wall). Targets, on the mix fleet: share
<= 25%, >= 120 jobs/min (cold), rerun - start-up <= 5 s. Figures are printed, never asserted;
the machine is shared, so they are noisy (best of --repeat is shown).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]  # jobgen, shapes_bench; in-tree stormwatch
import jobgen  # noqa: E402
import shapes_bench  # noqa: E402

from stormwatch.flows.prefect_env import LOCAL_SERVER_DEFAULTS  # noqa: E402  (imports no Prefect)

GENERATOR_VERSION = 1  # bump when the generated bytes change: cached fleets are rewritten
MANIFEST = "bench-fleet.json"  # in a fleet's root, beside jobs/ (never listed as a job)
FLEETS = ("mix", "tiny")
STORAGES = ("local", "s3")
MODES = ("served", "ephemeral")
# shape -> weight in a fleet; "mixed": a job whose ranks cycle through MIXED_CYCLE
SHAPE_WEIGHTS = {"jsonl-text": 3, "jsonl-null": 2, "csv": 2, "json": 2, "sink": 2, "bundle": 1, "v4": 2, "mixed": 2}
MIXED_CYCLE = ("jsonl-text", "csv", "json", "sink", "jsonl-null")
FLEET_SIZES = {"mix": ((2, 8), (300, 3_000)), "tiny": ((1, 2), (50, 200))}  # (ranks, samples per rank), inclusive
HIDDEN_SHARE = 0.4  # jobs with memory outside the allocator (critical findings)
BUCKET = "stormwatch-bench"
EXPECTED_WARNING = "Synthesized telemetry events from telemetry_timeline.json"  # a bundle rank, by design
TARGET_SHARE = 0.25
TARGET_JOBS_PER_MIN = 120.0
TARGET_RERUN_OVER_STARTUP_S = 5.0
AUDIT_TIMEOUT_S = 3_600
QUIET_PREFECT = {**LOCAL_SERVER_DEFAULTS, "PREFECT_LOGGING_LEVEL": "WARNING"}  # PREFECT.md's quiet settings
AWS_CLEARED = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL",
               "AWS_ENDPOINT_URL_S3", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_RETRY_MODE",
               "AWS_MAX_ATTEMPTS", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
STARTUP_FLOW = '''\
from prefect import flow


@flow(name="fleet-bench-startup")
def fleet_bench_startup() -> None:
    return None


if __name__ == "__main__":
    fleet_bench_startup()
'''


# --- the fleets -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    shape: str
    ranks: int
    samples: int
    hidden: bool
    data_seed: int  # jobgen's seed for this job's records


@dataclass
class Fleet:
    kind: str
    root: Path  # holds jobs/ (and reports/ after an audit)
    specs: list[JobSpec]
    input_bytes: int
    files: int

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def jobs(self) -> int:
        return len(self.specs)


def plan_fleet(kind: str, jobs: int, seed: int) -> list[JobSpec]:
    """The jobs of a fleet, deterministic by ``seed``."""
    rng = np.random.default_rng([seed, FLEETS.index(kind), 15])
    shapes = list(SHAPE_WEIGHTS)
    weights = np.array([SHAPE_WEIGHTS[s] for s in shapes], dtype=float)
    (r_lo, r_hi), (s_lo, s_hi) = FLEET_SIZES[kind]
    specs = []
    for i in range(jobs):
        shape = shapes[int(rng.choice(len(shapes), p=weights / weights.sum()))]
        ranks = int(rng.integers(r_lo, r_hi + 1))
        samples = int(rng.integers(s_lo, s_hi + 1))
        hidden = bool(rng.random() < HIDDEN_SHARE)
        # jobgen shifts each job's clock by seed days: keep seeds small so timestamps stay in int64 ns
        data_seed = (seed * 7_919 + FLEETS.index(kind) * 20_011 + i) % 40_000
        specs.append(JobSpec(f"{kind}-{i:05d}-{shape}", shape, ranks, samples, hidden, data_seed))
    return specs


def _write_rank(shape: str, rank_dir: Path, records: list[dict[str, Any]], caps: dict[str, Any]) -> None:
    """One rank's records in ``shape``, as shapes_bench.write_shape lays them out."""
    if shape == "jsonl-text":
        shapes_bench._write_lines(rank_dir / "telemetry.jsonl", records)
    elif shape == "jsonl-null":
        shapes_bench.write_null_context(rank_dir / "telemetry.jsonl", records)
    elif shape == "csv":
        shapes_bench.write_tracker_csv(rank_dir / "events.csv", records)
    elif shape == "json":
        shapes_bench.write_tracker_json(rank_dir / "events.json", records)
    elif shape == "sink":
        shapes_bench.write_sink_dir(rank_dir / "telemetry", records)
    elif shape == "bundle":
        shapes_bench.write_bundle(rank_dir, records)
    elif shape == "v4":
        shapes_bench._write_lines(rank_dir / "telemetry.jsonl", [shapes_bench.to_v4(rec, caps) for rec in records])
    else:
        raise ValueError(f"unknown shape {shape!r}")


def write_fleet_job(spec: JobSpec, jobs_dir: Path) -> tuple[int, int]:
    """Write one job under ``jobs_dir/<job_id>/``; returns (bytes, files)."""
    folder = jobs_dir / spec.job_id
    shutil.rmtree(folder, ignore_errors=True)
    caps = shapes_bench.v4_capabilities()
    for rank in range(spec.ranks):
        data = jobgen._rank_lines(rank, spec.ranks, spec.samples, spec.data_seed, spec.job_id, hidden=spec.hidden)
        records = [orjson.loads(line) for line in data.splitlines() if line]
        shape = MIXED_CYCLE[(rank + spec.data_seed) % len(MIXED_CYCLE)] if spec.shape == "mixed" else spec.shape
        _write_rank(shape, folder / f"rank_{rank}", records, caps)
    files = [p for p in folder.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def _write_chunk(specs: list[JobSpec], jobs_dir: str) -> tuple[int, int]:
    logging.disable(logging.WARNING)  # stormlog's sink logs each rotation
    sizes = [write_fleet_job(spec, Path(jobs_dir)) for spec in specs]
    return sum(s for s, _ in sizes), sum(f for _, f in sizes)


def prepare_fleet(keep: Path, kind: str, jobs: int, seed: int) -> Fleet:
    """Write (or reuse, when its manifest has these parameters) the fleet under ``keep``."""
    root = keep / f"{kind}-{jobs}-seed{seed}"
    specs = plan_fleet(kind, jobs, seed)
    params = {"generator": GENERATOR_VERSION, "kind": kind, "jobs": jobs, "seed": seed}
    manifest = root / MANIFEST
    if manifest.exists():
        old = json.loads(manifest.read_text())
        if old.get("params") == params and all((root / "jobs" / s.job_id).is_dir() for s in specs):
            print(f"fleet {root.name}: reused ({jobs} jobs, {old['input_bytes'] / 1e6:,.1f} MB, "
                  f"{old['files']:,} files) from {root}")
            return Fleet(kind, root, specs, old["input_bytes"], old["files"])
    shutil.rmtree(root, ignore_errors=True)
    (root / "jobs").mkdir(parents=True)
    t0 = time.perf_counter()
    workers = max(1, os.cpu_count() or 1)
    chunks = [specs[i::workers * 8] for i in range(workers * 8)]
    with ProcessPoolExecutor(workers) as pool:
        done = list(pool.map(_write_chunk, [c for c in chunks if c], [str(root / "jobs")] * len(chunks)))
    input_bytes, files = sum(b for b, _ in done), sum(f for _, f in done)
    manifest.write_text(json.dumps({"params": params, "input_bytes": input_bytes, "files": files,
                                    "jobs": [asdict(s) for s in specs]}, indent=1))
    print(f"fleet {root.name}: wrote {jobs} jobs, {input_bytes / 1e6:,.1f} MB, {files:,} files "
          f"in {time.perf_counter() - t0:.1f} s under {root}")
    return Fleet(kind, root, specs, input_bytes, files)


def describe(fleet: Fleet) -> str:
    shapes = Counter(s.shape for s in fleet.specs)
    ranks = [s.ranks for s in fleet.specs]
    samples = [s.samples for s in fleet.specs]
    hidden = sum(s.hidden for s in fleet.specs)
    return (f"  {fleet.jobs} jobs, ranks {min(ranks)}-{max(ranks)}, samples/rank {min(samples):,}-{max(samples):,}, "
            f"{hidden} with hidden memory; shapes: " + ", ".join(f"{k} {v}" for k, v in sorted(shapes.items())))


# --- the engine's own work ------------------------------------------------------------------------


@dataclass
class EngineWork:
    """``total_s``: wall seconds of the pass; ``cpu_s``: CPU seconds it used, every thread of this
    process (Arrow's readers and the loader's threads included); ``per_core_s``: ``cpu_s`` over
    the cores, the least wall time any scheduler could spend on the work; ``wall_per_core_s``:
    ``total_s`` over the cores, the issue's first figure, which treats the engine as one thread."""

    total_s: float
    cpu_s: float
    per_core_s: float
    wall_per_core_s: float
    verdicts: Counter[str]
    bad_warnings: list[tuple[str, str]] = field(default_factory=list)


def engine_work(fleet: Fleet) -> EngineWork:
    """Per job: list, fetch (local), diagnose, model.json bytes, HTML report; summed; one job untimed first."""
    from stormwatch.diagnose import DiagnoseOptions, diagnose
    from stormwatch.reports.render import render_job
    from stormwatch.tasks.storage.open import open_storage
    from stormwatch.tasks.storage.protocol import StorageSettings

    storage = open_storage(StorageSettings(uri=str(fleet.root)))
    options = DiagnoseOptions()

    def one(job_id: str) -> Any:
        entries = storage.job_entries(job_id)
        tree = storage.fetch_job(job_id, max_artifact_bytes=options.limits.max_artifact_bytes)
        diagnosis = diagnose(tree, job_id=job_id, source_name=storage.job_source(job_id), options=options,
                             entries=entries)
        diagnosis.model_json()
        render_job(diagnosis.document)
        return diagnosis

    one(fleet.specs[0].job_id)  # warm-up: lazy imports, templates
    verdicts: Counter[str] = Counter()
    bad: list[tuple[str, str]] = []
    total = cpu = 0.0
    for spec in fleet.specs:
        t0, c0 = time.perf_counter(), time.process_time()
        diagnosis = one(spec.job_id)
        total += time.perf_counter() - t0
        cpu += time.process_time() - c0
        verdicts[str(diagnosis.verdict.status.value)] += 1
        bad += [(spec.job_id, w) for w in diagnosis.loaded.warnings if not str(w).startswith(EXPECTED_WARNING)]
    cores = os.cpu_count() or 1
    return EngineWork(total, cpu, cpu / cores, total / cores, verdicts, bad)


# --- S3 (moto) --------------------------------------------------------------------------------------


class MotoS3:
    """A moto server on 127.0.0.1 in this process, a client for it, and the fleets uploaded to it."""

    def __init__(self) -> None:
        import boto3
        from botocore.config import Config
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="testing",
            aws_secret_access_key="testing", config=Config(max_pool_connections=32))
        self.client.create_bucket(Bucket=BUCKET)
        self.uploaded: set[str] = set()

    def uri(self, fleet: Fleet) -> str:
        return f"s3://{BUCKET}/{fleet.name}"

    def upload(self, fleet: Fleet) -> None:
        if fleet.name in self.uploaded:
            return
        jobs_dir = fleet.root / "jobs"
        files = sorted(p for p in jobs_dir.rglob("*") if p.is_file())
        t0 = time.perf_counter()

        def put(path: Path) -> None:
            key = f"{fleet.name}/jobs/{path.relative_to(jobs_dir).as_posix()}"
            self.client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, files))
        print(f"s3: uploaded {fleet.name} ({len(files):,} objects, {fleet.input_bytes / 1e6:,.1f} MB) to "
              f"{self.uri(fleet)} in {time.perf_counter() - t0:.1f} s")
        self.uploaded.add(fleet.name)

    def clear_reports(self, fleet: Fleet) -> None:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=BUCKET, Prefix=f"{fleet.name}/reports/"):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})

    def fleet_json(self, fleet: Fleet) -> dict[str, Any] | None:
        try:
            body = self.client.get_object(Bucket=BUCKET, Key=f"{fleet.name}/reports/fleet.json")["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None
        return orjson.loads(body)

    def stop(self) -> None:
        self.server.stop()


# --- Prefect modes and the audit subprocesses ----------------------------------------------------------


def base_env(prefect_home: Path) -> dict[str, str]:
    """This environment without Prefect or AWS settings of its own, plus the quiet settings and fake credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k not in AWS_CLEARED}
    env.update(QUIET_PREFECT)
    env["PREFECT_HOME"] = str(prefect_home)
    env.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(prefect_home / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(prefect_home / "no-aws-credentials"),
                "AWS_EC2_METADATA_DISABLED": "true"})
    return env


@dataclass
class Run:
    wall_s: float
    rc: int
    stdout: str
    stderr: str


def run_timed(cmd: Sequence[str], env: dict[str, str], cwd: Path) -> Run:
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), env=env, cwd=cwd, capture_output=True, text=True, timeout=AUDIT_TIMEOUT_S,
                          check=False)
    return Run(time.perf_counter() - t0, proc.returncode, proc.stdout, proc.stderr)


def cli_command() -> list[str]:
    """The ``stormwatch`` console script of this interpreter (else ``python -m stormwatch.flows.cli``)."""
    script = Path(sys.executable).parent / "stormwatch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "stormwatch.flows.cli"]


class PrefectMode:
    """Where the subprocesses' flows report: a served API (started here) or their own temporary server."""

    def __init__(self, mode: str, work: Path) -> None:
        self.mode = mode
        self.home = work / f"prefect-{mode}"
        self.home.mkdir(parents=True, exist_ok=True)
        self.cwd = work / "cwd"
        self.cwd.mkdir(exist_ok=True)
        self.startup_script = work / "startup_flow.py"
        self.startup_script.write_text(STARTUP_FLOW)
        self.env = base_env(self.home)
        self.server: Any = None

    def __enter__(self) -> PrefectMode:
        t0 = time.perf_counter()
        if self.mode == "served":
            # Prefect reads its settings at import: this process's environment first (it is imported here only)
            for name in [k for k in os.environ if k.startswith("PREFECT_")]:
                del os.environ[name]
            os.environ.update({**QUIET_PREFECT, "PREFECT_HOME": str(self.home)})
            from prefect.server.api.server import SubprocessASGIServer

            self.server = SubprocessASGIServer()
            self.server.start(timeout=180)
            self.env["PREFECT_API_URL"] = self.server.api_url
            what = f"API server at {self.server.api_url}"
        else:
            what = "temporary server per run"
        first = self.startup()  # creates (ephemeral) or touches (served) the database: untimed
        if first.rc != 0:
            raise RuntimeError(f"empty flow failed in {self.mode} mode:\n{first.stderr[-3000:]}")
        print(f"prefect {self.mode}: {what}, PREFECT_HOME {self.home}; ready in {time.perf_counter() - t0:.1f} s "
              f"(first empty flow {first.wall_s:.1f} s, untimed)")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def startup(self) -> Run:
        return run_timed([sys.executable, str(self.startup_script)], self.env, self.cwd)

    def audit(self, uri: str, endpoint: str | None, extra: Sequence[str]) -> Run:
        cmd = [*cli_command(), "audit", "--storage", uri, *(["--endpoint-url", endpoint] if endpoint else []), *extra]
        return run_timed(cmd, self.env, self.cwd)


# --- measuring ------------------------------------------------------------------------------------------


@dataclass
class Row:
    fleet: Fleet
    storage: str
    mode: str
    engine: EngineWork
    cold: list[float] = field(default_factory=list)
    rerun: list[float] = field(default_factory=list)
    startup: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def cold_s(self) -> float | None:
        return min(self.cold) if self.cold else None

    @property
    def rerun_s(self) -> float | None:
        return min(self.rerun) if self.rerun else None

    @property
    def startup_s(self) -> float | None:
        return min(self.startup) if self.startup else None

    @property
    def jobs_per_min(self) -> float | None:
        return self.fleet.jobs / self.cold_s * 60 if self.cold_s else None

    @property
    def rerun_over_startup(self) -> float | None:
        if self.rerun_s is None or self.startup_s is None:
            return None
        return self.rerun_s - self.startup_s

    @property
    def share(self) -> float | None:
        return 1 - self.engine.per_core_s / self.cold_s if self.cold_s else None

    @property
    def wall_share(self) -> float | None:
        return 1 - self.engine.wall_per_core_s / self.cold_s if self.cold_s else None


def _loud(message: str) -> None:
    bar = "!" * 100
    print(f"\n{bar}\n!!! {message}\n{bar}\n", flush=True)


def check_summary(document: dict[str, Any] | None, key: str, fleet: Fleet, what: str) -> str | None:
    """None when fleet.json says ``key`` == every job (and none failed); else the problem."""
    if document is None:
        return f"{what}: no reports/fleet.json"
    summary = document.get("summary", {})
    if summary.get(key) != fleet.jobs or summary.get("failed", 0) or summary.get("refused", 0):
        return f"{what}: expected {key} == {fleet.jobs}, fleet.json summary says {summary}"
    return None


def audit_once(row: Row, mode: PrefectMode, s3: MotoS3 | None, extra: Sequence[str], log_dir: Path, rnd: int) -> None:
    fleet = row.fleet
    if row.storage == "s3":
        assert s3 is not None
        uri, endpoint = s3.uri(fleet), s3.endpoint
        s3.clear_reports(fleet)

        def read_fleet_json() -> dict[str, Any] | None:
            return s3.fleet_json(fleet)
    else:
        uri, endpoint = str(fleet.root), None
        shutil.rmtree(fleet.root / "reports", ignore_errors=True)

        def read_fleet_json() -> dict[str, Any] | None:
            path = fleet.root / "reports" / "fleet.json"
            return orjson.loads(path.read_bytes()) if path.exists() else None

    tag = f"{fleet.name} {row.storage} {mode.mode}"
    for step, key in (("cold", "diagnosed"), ("startup", None), ("rerun", "skipped")):
        run = mode.startup() if key is None else mode.audit(uri, endpoint, extra)
        log = log_dir / f"{fleet.name}-{row.storage}-{mode.mode}-{rnd}-{step}.log"
        log.write_text(f"rc {run.rc}, {run.wall_s:.2f} s\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}")
        first_line = next((line for line in run.stdout.splitlines() if line.startswith("audited")), "")
        print(f"  [{tag} #{rnd}] {step:8s} {run.wall_s:7.2f} s  rc {run.rc}  {first_line}", flush=True)
        problem = None
        if run.rc not in (0, 3):
            problem = f"{tag} {step}: exit code {run.rc} (log {log}); stderr tail:\n{run.stderr[-2000:]}"
        elif key is not None:
            problem = check_summary(read_fleet_json(), key, fleet, f"{tag} {step}")
        if problem:
            row.problems.append(problem)
            _loud(problem)
        getattr(row, step).append(run.wall_s)


def fmt(value: float | None, spec: str = ".1f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def print_table(rows: list[Row], repeat: int) -> None:
    print(f"\nresults (best of {repeat}; engine: wall s and CPU s of the one-process pass; /core = CPU s / "
          f"{os.cpu_count()} cores; share = 1 - /core / cold, the orchestration share of the cold wall; "
          f"wall-sh = the same with wall s / cores, as if the engine used one thread)")
    head = (f"{'fleet':16s} {'storage':7s} {'mode':9s} {'jobs':>5s} {'input':>9s} {'cold s':>7s} {'jobs/min':>8s} "
            f"{'rerun s':>7s} {'start-up':>8s} {'rerun-su':>8s} {'engine s':>8s} {'cpu s':>6s} {'/core':>6s} "
            f"{'share':>6s} {'wall-sh':>7s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r.fleet.name:16s} {r.storage:7s} {r.mode:9s} {r.fleet.jobs:5d} {r.fleet.input_bytes / 1e6:7.1f}MB "
              f"{fmt(r.cold_s, '7.1f')} {fmt(r.jobs_per_min, '8.0f')} {fmt(r.rerun_s, '7.1f')} "
              f"{fmt(r.startup_s, '8.1f')} {fmt(r.rerun_over_startup, '+8.1f')} {r.engine.total_s:8.1f} "
              f"{r.engine.cpu_s:6.1f} {r.engine.per_core_s:6.1f} "
              f"{fmt(None if r.share is None else r.share * 100, '5.0f', '%')} "
              f"{fmt(None if r.wall_share is None else r.wall_share * 100, '6.0f', '%')}")


def print_targets(rows: list[Row]) -> bool:
    mix = [r for r in rows if r.fleet.kind == "mix"]
    if not mix:
        print("\ntargets: evaluated on the mix fleet, which was not run")
        return True
    print(f"\ntargets (mix fleet, {mix[0].fleet.jobs} jobs; the issue's figures are for 200 jobs on 2 cores):")
    ok = True

    def verdict(value: float | None, good: bool) -> str:
        return "-" if value is None else ("met" if good else "NOT met")

    for r in mix:
        checks = [
            (f"orchestration {fmt(None if r.share is None else r.share * 100, '.0f', '%')} <= 25%",
             verdict(r.share, r.share is not None and r.share <= TARGET_SHARE)),
            (f"{fmt(r.jobs_per_min, '.0f')} jobs/min >= 120",
             verdict(r.jobs_per_min, r.jobs_per_min is not None and r.jobs_per_min >= TARGET_JOBS_PER_MIN)),
            (f"rerun - start-up {fmt(r.rerun_over_startup, '+.1f')} s <= 5 s",
             verdict(r.rerun_over_startup,
                     r.rerun_over_startup is not None and r.rerun_over_startup <= TARGET_RERUN_OVER_STARTUP_S)),
        ]
        ok &= all(v == "met" for _, v in checks)
        print(f"  {r.storage:5s} {r.mode:9s}  " + ";  ".join(f"{text}: {v}" for text, v in checks))
    return ok


def split_list(raw: str, allowed: Sequence[str], what: str, parser: argparse.ArgumentParser) -> list[str]:
    items = [s.strip() for s in raw.split(",") if s.strip()]
    unknown = sorted(set(items) - set(allowed))
    if unknown or not items:
        parser.error(f"unknown {what} {unknown}; choose from {', '.join(allowed)}")
    return list(dict.fromkeys(items))


@contextmanager
def work_folder(keep: Path | None) -> Iterator[tuple[Path, Path]]:
    """(fleet cache, scratch): under --keep (fleets kept, scratch replaced) or a temporary folder."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="stormwatch-fleet-bench-") as tmp:
            yield Path(tmp) / "fleets", Path(tmp) / "work"
        return
    keep = keep.resolve()
    work = keep / "work"
    shutil.rmtree(work, ignore_errors=True)
    yield keep, work


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs-mix", type=int, default=200, help="jobs in the mix fleet")
    parser.add_argument("--jobs-tiny", type=int, default=2_000, help="jobs in the tiny fleet")
    parser.add_argument("--fleets", default=",".join(FLEETS), help=f"comma list of {', '.join(FLEETS)}")
    parser.add_argument("--storage", default=",".join(STORAGES), help=f"comma list of {', '.join(STORAGES)}")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma list of {', '.join(MODES)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="rounds of (cold, start-up, rerun); best of each")
    parser.add_argument("--keep", type=Path, help="keep the generated fleets here (reused when present)")
    parser.add_argument("--audit-args", default="", help='passed to every `stormwatch audit`, e.g. "--workers 4"')
    args = parser.parse_args(argv)
    fleets = split_list(args.fleets, FLEETS, "fleets", parser)
    storages = split_list(args.storage, STORAGES, "storage", parser)
    modes = split_list(args.modes, MODES, "modes", parser)
    sizes = {"mix": args.jobs_mix, "tiny": args.jobs_tiny}
    if any(sizes[f] < 1 for f in fleets) or args.repeat < 1:
        parser.error("job counts and --repeat must be >= 1")
    extra = shlex.split(args.audit_args)

    print(f"fleet bench: {os.cpu_count()} cores, python {sys.version.split()[0]}, fleets {fleets}, "
          f"storage {storages}, modes {modes}, seed {args.seed}, repeat {args.repeat}, "
          f"audit args {extra or '(none)'}")
    problems: list[str] = []
    with work_folder(args.keep) as (cache, work):
        work.mkdir(parents=True, exist_ok=True)
        log_dir = work / "logs"
        log_dir.mkdir()
        prepared: list[Fleet] = []
        engines: dict[str, EngineWork] = {}
        for kind in fleets:
            fleet = prepare_fleet(cache, kind, sizes[kind], args.seed)
            print(describe(fleet))
            t0 = time.perf_counter()
            engine = engine_work(fleet)
            engines[fleet.name] = engine
            print(f"  engine work: {engine.total_s:.2f} s total ({engine.total_s / fleet.jobs * 1000:.1f} ms a job), "
                  f"{engine.cpu_s:.2f} CPU s ({engine.cpu_s / engine.total_s:.2f} cores busy on average), "
                  f"{engine.per_core_s:.2f} CPU s per core; verdicts "
                  + ", ".join(f"{k} {v}" for k, v in sorted(engine.verdicts.items()))
                  + f"  (pass took {time.perf_counter() - t0:.1f} s)")
            if engine.bad_warnings:
                shown = "\n".join(f"    {job}: {w}" for job, w in engine.bad_warnings[:10])
                problem = f"{fleet.name}: {len(engine.bad_warnings)} unexpected load warnings (bad input?):\n{shown}"
                problems.append(problem)
                _loud(problem)
            if engine.verdicts.get("critical", 0) == 0:
                _loud(f"{fleet.name}: no job has a critical finding")
            prepared.append(fleet)

        s3 = MotoS3() if "s3" in storages else None
        rows: list[Row] = []
        try:
            if s3 is not None:
                print(f"s3: moto server at {s3.endpoint}")
                for fleet in prepared:
                    s3.upload(fleet)
            for mode_name in modes:
                with PrefectMode(mode_name, work) as mode:
                    for fleet in prepared:
                        for storage in storages:
                            row = Row(fleet, storage, mode_name, engines[fleet.name])
                            for rnd in range(1, args.repeat + 1):
                                audit_once(row, mode, s3, extra, log_dir, rnd)
                            rows.append(row)
                            problems += row.problems
        finally:
            if s3 is not None:
                s3.stop()
        print_table(rows, args.repeat)
        ok = print_targets(rows)
        print(f"\nlogs of every run: {log_dir}" if args.keep else "")
        if problems:
            _loud(f"{len(problems)} problem(s): the figures above are not valid for those runs")
            for problem in problems:
                print(f"  - {problem.splitlines()[0]}")
            return 2
        print(f"all targets: {'MET' if ok else 'NOT MET'}")
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
