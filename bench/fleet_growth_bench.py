"""Fleet growth: what the nightly audit and post-job cost as stored runs pile up, night after night.

    python bench/fleet_growth_bench.py [--short] [--storage local,s3] [--scenarios growth,post-job,unchanged]
                                       [--nights N] [--runs-per-night R] [--stored S] [--post-jobs P]
                                       [--parallel K] [--seed 0] [--keep DIR] [--timeout 3600]
                                       [--lease-wait 900] [--audit-args "..."]

    --short   CI's form (tests/test_fleet_growth_bench.py): local only, 4 nights x 40 runs, 200 stored,
              6 post-jobs 3 at a time (about 3 minutes on 2 cores)
    default   local: 30 nights x 1,000 new runs, 10,000 stored, 50 post-jobs 8 at a time (hours);
              s3 (moto): 6 nights x 200 new runs, 2,000 stored, 50 post-jobs 8 at a time.
              A size flag given on the command line applies to every storage.

Every audit and post-job is a subprocess of the real CLI (``stormwatch audit|post-job``) run against one
Prefect API server that stays up (``SubprocessASGIServer`` started here, its ``api_url`` exported as
PREFECT_API_URL to the subprocesses; ``$PREFECT_API_URL`` when already set), with PREFECT.md's quiet
settings, a temporary PREFECT_HOME, fake AWS credentials and an empty working folder; each with a
timeout (``--timeout``), in its own session (killed as a group when it runs over).

The runs: small jobs, so that what grows is the stored state, not the diagnosis. Templates are written
once with fleet_bench.py's "tiny" fleet writers (1-2 ranks x 50-200 samples, every shape stormlog
writes; jobgen's records): 16 without memory outside the allocator (a warning verdict: the allocation
spike) and 4 with it (``--hidden-memory``: critical). Each run is a new job folder whose files are hard
links to (locally; copies if linking fails) or parallel PUTs of (S3) one template's files: the job id
is the folder name under ``jobs/``, and the input fingerprint is (key, size, mtime or ETag) per file, so
runs with the same bytes are still distinct jobs. About 3% of the runs are critical (drawn per run from
``--seed``). Job ids ``train-<k>-n<night>``: the job name ``train-<k>`` repeats every night, the run id is
new (``--job-name-pattern '(.+)-n\\d+'`` is given to every audit and post-job).

Scenarios (each on every ``--storage``, a fresh root each: a folder, or ``s3://stormwatch-bench/<prefix>``
on a moto server in this process, real HTTP on 127.0.0.1, ``--endpoint-url``):
  growth     N nights; before night n, R new runs (``train-<k>-n<n>``, k < R); then one
             ``stormwatch audit --storage ROOT --as-of <2026-10-01 + n-1 days>T02:00:00Z``. Checked: exit
             code 0 or 3 (findings, docs/cli.md), fleet.json's summary says jobs == stored runs,
             diagnosed == R, failed == refused == 0.
  unchanged  the same audit again (same --as-of) with nothing changed: over the growth fleet after its
             last night, or, when growth is not run, over the post-job scenario's stored runs; checked
             diagnosed == 0, skipped == stored runs. Compared with Prefect's start-up (below).
  post-job   S stored runs (R job names, S/R runs each), audited once (untimed set-up, its time
             printed); then (a) one new run written and ``stormwatch post-job JOB --storage ROOT`` run
             for it; (b) P new runs, post-job for each one after another, and P other new runs, post-job
             for each K at a time (a thread pool of K launching the subprocesses). Checked: every exit
             code 0 or 3, every job's committed row diagnosed: fleet.json's, or a pending commit's
             (``reports/.commits/``: a post-job may leave its row there for the next audit or
             ``stormwatch compact`` to fold in; the table says how many rows are where). post-job holds
             its own job's lease, never the audit lease, so post-jobs of different jobs run side by side;
             they get ``--lease-wait`` (default 900 s, the CLI's own is 60 s). During each batch a thread
             here reads ``reports/.locks/audit.json`` every 0.2 s: "lease held" is the time the audit lease
             was seen there and by how many holders (tokens): 0 s, 0 holders when no post-job takes it.
             ``--post-jobs-on growth`` runs this scenario against the growth fleet after its last night
             instead of a separate ``--stored`` fleet.

Figures (MB: 10^6 bytes), per audit or post-job subprocess. Each runs under a ~10 MB wrapper (``WRAPPER``:
``python -I -S`` that posix_spawns the command, waits for it and writes its figures): a process's ru_maxrss
starts at its parent's RSS when forked (the high-water mark survives exec), so a command forked from this
bench (~300 MB with moto and numpy) would never report less than that; the wrapper is a child subreaper, so
what the command orphans (the audit's forkserver and engine workers) is reaped there and counts in its
RUSAGE_CHILDREN.
  wall s         perf_counter in the wrapper around the command (its own ~50 ms start-up excluded)
  cpu s          user + system CPU seconds of the command and its reaped descendants (RUSAGE_CHILDREN):
                 close to 2 x wall s on 2 cores means CPU-bound, far below means waiting (server, I/O)
  peak RSS MB    the highest sum of RSS over the command and all its descendants (the audit's forkserver
                 and engine workers), sampled every 50 ms with psutil (shared pages count in every
                 process that maps them, so a forkserver's workers overstate it); "-" without psutil;
                 not sampled in the post-job batches (eight samplers would load the cores they measure)
  max proc MB    the wrapper's RUSAGE_CHILDREN ru_maxrss: the largest single process of the tree, exact,
                 not a sum
  fleet-state written   bytes (and files) under ``<root>/reports/`` created or changed during the
                 subprocess, NOT under a job's own report folder ``reports/<job_id>/``: fleet.json,
                 fleet.parquet, index.html, alerts.json, notifications.jsonl, history/**, .commits/**,
                 any new partition. Locally a file counts when its (size, mtime_ns, inode) differ from
                 before (or it is new), with its size after; on S3 when (ETag, size, LastModified) of a
                 listing differ. Files created and deleted within the run (the lease, temporaries) are
                 not seen.
  job reports written   the same, under ``reports/<job_id>/`` (model.json, report.html, sessions/**)
  fleet.json MB  its size after the night's audit
  by file        fleet-state bytes written per file (folders as ``history/**``, ``.commits/**``): on the
                 first, second and last nights, the unchanged rerun and the single post-job
Prefect's start-up: a subprocess of this interpreter running an empty "post-job-shaped" flow against the
same server (one flow run, two submitted and three called no-op tasks, as post-job runs diagnose, commit,
update-fleet, clear-commits and notify), best of 3, timed the same way, once per storage (right after the
unchanged rerun, or before the first post-job); both the unchanged and the post-job targets are set against
it. The empty-root audit (a root whose ``jobs/`` is empty) is timed and printed too, but it is not the
start-up: the CLI says "no jobs yet" and exits before it imports Prefect.

Targets (on 2 cores), printed as a table (target, figures, met / NOT met); nothing is asserted:
  - the last night's audit costs <= 1.2x night 2's, in wall time and in fleet-state bytes written (the CPU
    seconds' ratio is printed beside the wall time's: on a shared machine it is the steadier figure);
  - an unchanged audit of the stored runs takes <= start-up + 5 s;
  - one post-job against the stored runs takes <= start-up + 2 s and stays under 300 MB peak RSS (the
    higher of the sampled tree sum and the exact largest process: sampling can miss a short peak);
  - P post-jobs started K at a time finish >= 1.6x sooner than the same P one after another (P other fresh
    job ids, same sizes).
Exit code 0 when every run completed and passed its checks (whatever the targets), 2 when a run failed a
check (the problems are printed; those figures are not valid). The machine is shared: figures are noisy.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO)]  # fleet_bench, kill_bench (and jobgen through them); in-tree stormwatch
import fleet_bench  # noqa: E402
import kill_bench  # noqa: E402

try:
    import psutil
except ImportError:  # peak RSS of the tree is then "-" (max proc MB still shows)
    psutil = None

STORAGES = ("local", "s3")
SCENARIOS = ("growth", "post-job", "unchanged")
BUCKET = fleet_bench.BUCKET
SIZE_FLAGS = ("nights", "runs_per_night", "stored", "post_jobs", "parallel")
DEFAULT_SIZES = {  # per storage: nights, runs per night, stored runs, post-jobs, post-jobs at a time
    "local": {"nights": 30, "runs_per_night": 1_000, "stored": 10_000, "post_jobs": 50, "parallel": 8},
    "s3": {"nights": 6, "runs_per_night": 200, "stored": 2_000, "post_jobs": 50, "parallel": 8},
}
SHORT_SIZES = {"nights": 4, "runs_per_night": 40, "stored": 200, "post_jobs": 6, "parallel": 3}
NORMAL_TEMPLATES, CRITICAL_TEMPLATES = 16, 4
CRITICAL_SHARE = 0.03
JOB_NAME_PATTERN = r"(.+)-n\d+"
FIRST_NIGHT = datetime(2026, 10, 1, 2, 0, tzinfo=UTC)
POST_JOB_AFTER = timedelta(hours=10)  # post-jobs run at this time after the stored runs' audit
STARTUP_REPEAT = 3
SAMPLE_S = 0.05
LEASE_KEY = ".locks/audit.json"  # under reports/ (tasks/storage/lease.py)
COMMITS_FOLDER = ".commits"  # under reports/ (tasks/commits.py)
COMMIT_METADATA_KEY = b"stormwatch.commit"
LEASE_POLL_S = 0.2
OK_CODES = (0, 3)  # clean, findings (docs/cli.md: 2 is a usage error)
MB = 1e6
TARGET_GROWTH = 1.2
TARGET_UNCHANGED_S = 5.0
TARGET_POST_JOB_S = 2.0
TARGET_POST_JOB_RSS = 300 * MB  # decimal MB, as every figure is printed
TARGET_SPEEDUP = 1.6
STARTUP_FLOW = '''\
from prefect import flow, task
from prefect.cache_policies import NO_CACHE


@task(cache_policy=NO_CACHE)
def step(name: str) -> str:
    return name


@flow(name="fleet-growth-bench-startup")
def startup() -> None:
    step.submit("diagnose").result()
    for name in ("commit", "update-fleet", "clear-commits"):
        step(name)
    step.submit("notify").result()


if __name__ == "__main__":
    startup()
'''

# Runs the measured command as its child and writes "<wall s> <exit code> <ru_maxrss kB> <CPU s>" to argv[1].
# A process's ru_maxrss starts at its parent's RSS at the fork (the high-water mark survives exec), so a process
# forked from this bench (~300 MB) would report at least that; forked from this ~10 MB wrapper, the command's
# figure is its own.
# The wrapper is a child subreaper: descendants orphaned by the command (a forkserver, its workers) are reaped
# here, so their peaks count in RUSAGE_CHILDREN too (the largest single process of the tree, not a sum).
WRAPPER = """\
import ctypes, os, resource, sys, time
try:
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
except Exception:
    pass
t0 = time.perf_counter()
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status = os.waitpid(pid, 0)
wall = time.perf_counter() - t0
rc = os.waitstatus_to_exitcode(status)
deadline = time.monotonic() + 5
while time.monotonic() < deadline:
    try:
        if os.waitpid(-1, os.WNOHANG)[0] == 0:
            time.sleep(0.05)
    except ChildProcessError:
        break
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    out.write(f"{wall!r} {rc} {usage.ru_maxrss} {usage.ru_utime + usage.ru_stime!r}")
sys.exit(rc if rc >= 0 else 128 - rc)
"""

# target labels, printed as they are (tests/test_fleet_growth_bench.py looks for each)
T_GROWTH_WALL = "growth: last night's wall time <= 1.2x night 2's"
T_GROWTH_BYTES = "growth: last night's fleet-state bytes written <= 1.2x night 2's"
T_UNCHANGED = "unchanged audit of the stored runs <= start-up + 5 s"
T_POST_JOB = "one post-job <= start-up + 2 s"
T_POST_JOB_RSS = "one post-job peak RSS < 300 MB"
T_SPEEDUP = "post-jobs K at a time >= 1.6x sooner than one after another"
TARGET_LABELS = (T_GROWTH_WALL, T_GROWTH_BYTES, T_UNCHANGED, T_POST_JOB, T_POST_JOB_RSS, T_SPEEDUP)


# --- measuring one subprocess ---------------------------------------------------------------------------------


@dataclass
class Measured:
    what: str
    wall_s: float
    rc: int
    tree_rss: int | None  # bytes: peak of the sampled sum over the tree; None when not sampled
    max_proc_rss: int  # bytes: the largest single process (the wrapper's RUSAGE_CHILDREN ru_maxrss)
    cpu_s: float | None  # user + system CPU seconds of the command and its reaped descendants
    stdout: str
    stderr: str
    log: Path
    timed_out: bool = False

    @property
    def headline(self) -> str:
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        return lines[0][:110] if lines else (self.stderr.strip().splitlines() or [""])[-1][:110]


def _tree_rss(wrapper: Any) -> int:
    """The RSS sum of the wrapper's descendants (not the wrapper's own ~10 MB)."""
    total = 0
    try:
        members = wrapper.children(recursive=True)
    except psutil.Error:
        return 0
    for member in members:
        with suppress(psutil.Error):
            total += member.memory_info().rss
    return total


def _session_alive(pgid: int, grace_s: float) -> bool:
    deadline = time.monotonic() + grace_s
    while True:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)


def _end_session(pgid: int) -> None:
    """What the measured process left running in its own session (processes this bench started): given 5 s
    to end on its own, then SIGKILL to that process group."""
    if _session_alive(pgid, 5.0):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        _session_alive(pgid, 5.0)


def measure(what: str, cmd: Sequence[str], env: dict[str, str], cwd: Path, log: Path, timeout: float, *,
            sample: bool = True) -> Measured:
    """Run ``cmd`` under :data:`WRAPPER` in a session of its own: the wrapper's wall time and largest process
    (RUSAGE_CHILDREN), the peak RSS sum of the wrapper's descendants (psutil, every 50 ms, when ``sample``);
    stdout and stderr into ``log`` (.out, .err); killed as a group past ``timeout``."""
    out_path, err_path, report = log.with_suffix(".out"), log.with_suffix(".err"), log.with_suffix(".rusage")
    wrapped = [sys.executable, "-I", "-S", "-c", WRAPPER, str(report), *cmd]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(wrapped, env=env, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        peak = [0]
        done = threading.Event()
        timed_out = [False]

        def sampler() -> None:
            watched = psutil.Process(proc.pid) if (sample and psutil is not None) else None
            while not done.is_set():
                if watched is not None:
                    peak[0] = max(peak[0], _tree_rss(watched))
                if time.perf_counter() - t0 > timeout and not timed_out[0]:
                    timed_out[0] = True
                    with suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                done.wait(SAMPLE_S)

        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        _, status, _usage = os.wait4(proc.pid, 0)  # (its ru_maxrss starts at this process's RSS: not used)
        wall = time.perf_counter() - t0
        done.set()
        thread.join()
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    _end_session(proc.pid)
    max_proc, cpu = 0, None
    with suppress(OSError, ValueError):
        inner_wall, inner_rc, maxrss_kb, cpu_s = report.read_text().split()
        wall, rc, max_proc, cpu = float(inner_wall), int(inner_rc), int(maxrss_kb) * 1024, float(cpu_s)
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    tree = peak[0] if (sample and psutil is not None) else None
    return Measured(what, wall, rc, tree, max_proc, cpu, stdout, stderr, log, timed_out[0])


# --- storage roots --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    name: str
    critical: bool
    files: tuple[tuple[str, Path], ...]  # (key relative to the job folder, path)
    blobs: dict[str, bytes] = field(default_factory=dict, compare=False, hash=False)


Snapshot = dict[str, tuple[Any, ...]]  # report key (relative to reports/) -> what identifies its version


@dataclass
class Written:
    fleet_bytes: int = 0
    fleet_files: int = 0
    job_bytes: int = 0
    job_files: int = 0
    deleted: int = 0
    fleet_by_file: dict[str, int] = field(default_factory=dict)  # fleet.json, history/**, ... -> bytes


def fleet_file_group(key: str) -> str:
    """``history/date=.../x.parquet`` -> ``history/**``; a file directly under reports/ is itself."""
    head, slash, _ = key.partition("/")
    return f"{head}/**" if slash else head


def written(before: Snapshot, after: Snapshot, sizes: dict[str, int], job_ids: set[str]) -> Written:
    out = Written()
    for key, ident in after.items():
        if before.get(key) == ident:
            continue
        if key.partition("/")[0] in job_ids and "/" in key:
            out.job_bytes += sizes[key]
            out.job_files += 1
        else:
            out.fleet_bytes += sizes[key]
            out.fleet_files += 1
            group = fleet_file_group(key)
            out.fleet_by_file[group] = out.fleet_by_file.get(group, 0) + sizes[key]
    out.deleted = sum(1 for key in before if key not in after)
    return out


class Root:
    """A storage root: where the runs are written, how the CLI names it, what reports/ holds."""

    kind = ""
    uri = ""
    flags: tuple[str, ...] = ()

    def add_runs(self, runs: Sequence[tuple[str, Template]]) -> None:
        raise NotImplementedError

    def snapshot(self) -> tuple[Snapshot, dict[str, int]]:
        raise NotImplementedError

    def fleet_json(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def lease(self) -> bytes | None:
        """reports/.locks/audit.json (the audit lease; a post-job never takes it), None when absent."""
        raise NotImplementedError

    def commit_objects(self) -> list[bytes]:
        """The bytes of every pending commit object (``reports/.commits/*.parquet``)."""
        raise NotImplementedError

    def committed_rows(self) -> dict[str, str]:
        """job id -> status of the fleet rows carried by the pending commits (tasks/commits.py: a history
        Parquet file whose footer key ``stormwatch.commit`` holds ``{"rows": [fleet row, ...], ...}``)."""
        found: dict[str, str] = {}
        for data in self.commit_objects():
            with suppress(Exception):  # a commit being cleared or damaged: not this bench's to judge
                meta = pq.read_schema(pa.BufferReader(data)).metadata or {}
                for row in orjson.loads(meta[COMMIT_METADATA_KEY]).get("rows", ()):
                    found[str(row.get("job_id"))] = str(row.get("status"))
        return found


class LocalRoot(Root):
    kind = "local"

    def __init__(self, path: Path) -> None:
        self.path = path
        (path / "jobs").mkdir(parents=True, exist_ok=True)
        self.uri = str(path)

    def add_runs(self, runs: Sequence[tuple[str, Template]]) -> None:
        for job_id, template in runs:
            folder = self.path / "jobs" / job_id
            for key, source in template.files:
                target = folder / key
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(source, target)
                except OSError:
                    shutil.copy2(source, target)

    def snapshot(self) -> tuple[Snapshot, dict[str, int]]:
        base = self.path / "reports"
        found: Snapshot = {}
        sizes: dict[str, int] = {}
        stack = [(base, "")]
        while stack:
            folder, prefix = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except FileNotFoundError:
                continue
            for entry in entries:
                key = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), key + "/"))
                    continue
                with suppress(FileNotFoundError):
                    info = entry.stat(follow_symlinks=False)
                    found[key] = (info.st_size, info.st_mtime_ns, info.st_ino)
                    sizes[key] = info.st_size
        return found, sizes

    def fleet_json(self) -> dict[str, Any] | None:
        path = self.path / "reports" / "fleet.json"
        return orjson.loads(path.read_bytes()) if path.exists() else None

    def lease(self) -> bytes | None:
        try:
            return (self.path / "reports" / LEASE_KEY).read_bytes()
        except OSError:
            return None

    def commit_objects(self) -> list[bytes]:
        found = []
        for path in sorted((self.path / "reports" / COMMITS_FOLDER).glob("*.parquet")):
            with suppress(OSError):
                found.append(path.read_bytes())
        return found


class MotoS3(fleet_bench.MotoS3):
    """fleet_bench's moto server (127.0.0.1, real HTTP, a client with 32 connections, the bucket made)."""

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        def put(item: tuple[str, bytes]) -> None:
            self.client.put_object(Bucket=BUCKET, Key=item[0], Body=item[1])

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, items))

    def listing(self, prefix: str) -> list[dict[str, Any]]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [item for page in pages for item in page.get("Contents", ())]

    def get(self, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None


class S3Root(Root):
    kind = "s3"

    def __init__(self, s3: MotoS3, prefix: str) -> None:
        self.s3, self.prefix = s3, prefix
        self.uri = f"s3://{BUCKET}/{prefix}"
        self.flags = ("--endpoint-url", s3.endpoint)
        s3.put_many([(f"{prefix}/jobs/", b"")])  # a folder marker: jobs/ exists before the first run

    def add_runs(self, runs: Sequence[tuple[str, Template]]) -> None:
        self.s3.put_many([(f"{self.prefix}/jobs/{job_id}/{key}", template.blobs[key])
                          for job_id, template in runs for key, _ in template.files])

    def snapshot(self) -> tuple[Snapshot, dict[str, int]]:
        base = f"{self.prefix}/reports/"
        found: Snapshot = {}
        sizes: dict[str, int] = {}
        for item in self.s3.listing(base):
            key = item["Key"][len(base):]
            found[key] = (item["ETag"], item["Size"], item["LastModified"])
            sizes[key] = int(item["Size"])
        return found, sizes

    def fleet_json(self) -> dict[str, Any] | None:
        body = self.s3.get(f"{self.prefix}/reports/fleet.json")
        return orjson.loads(body) if body else None

    def lease(self) -> bytes | None:
        return self.s3.get(f"{self.prefix}/reports/{LEASE_KEY}")

    def commit_objects(self) -> list[bytes]:
        keys = [item["Key"] for item in self.s3.listing(f"{self.prefix}/reports/{COMMITS_FOLDER}/")]
        return [data for data in map(self.s3.get, keys) if data is not None]


@dataclass
class LeaseUse:
    """How long the audit lease was seen held during a batch (polled every LEASE_POLL_S), by how many holders."""

    held_s: float = 0.0
    holders: int = 0


@contextmanager
def lease_watch(root: Root) -> Iterator[LeaseUse]:
    use = LeaseUse()
    stop = threading.Event()
    tokens: set[str] = set()

    def watch() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            data = root.lease()
            now = time.perf_counter()
            if data:
                use.held_s += now - last
                try:
                    tokens.add(str(orjson.loads(data).get("token")))
                except (orjson.JSONDecodeError, AttributeError):
                    tokens.add(repr(data[:64]))
            last = now
            stop.wait(LEASE_POLL_S)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield use
    finally:
        stop.set()
        thread.join()
        use.holders = len(tokens)


# --- the runs ---------------------------------------------------------------------------------------------------


def write_templates(folder: Path, seed: int) -> tuple[list[Template], list[Template]]:
    """fleet_bench's tiny fleet: NORMAL_TEMPLATES jobs without hidden memory, CRITICAL_TEMPLATES with (no bundle:
    bundles carry no device counters, so they are never critical)."""
    specs = fleet_bench.plan_fleet("tiny", 64, seed)
    normal = [replace(spec, hidden=False, job_id=f"normal-{i:02d}-{spec.shape}")
              for i, spec in enumerate(specs[:NORMAL_TEMPLATES])]
    hidden = [spec for spec in specs[NORMAL_TEMPLATES:] if spec.shape != "bundle"][:CRITICAL_TEMPLATES]
    critical = [replace(spec, hidden=True, job_id=f"critical-{i:02d}-{spec.shape}") for i, spec in enumerate(hidden)]
    logging.disable(logging.WARNING)  # stormlog's sink logs each rotation
    try:
        made = []
        for spec in normal + critical:
            fleet_bench.write_fleet_job(spec, folder)
            job = folder / spec.job_id
            files = tuple(sorted((p.relative_to(job).as_posix(), p) for p in job.rglob("*") if p.is_file()))
            made.append(Template(spec.job_id, spec.hidden, files, {key: path.read_bytes() for key, path in files}))
    finally:
        logging.disable(logging.NOTSET)
    return made[:len(normal)], made[len(normal):]


class RunPicker:
    """Which template each run copies: ~CRITICAL_SHARE critical, drawn per (stream, run) from the seed."""

    def __init__(self, normal: list[Template], critical: list[Template], seed: int) -> None:
        self.normal, self.critical, self.seed = normal, critical, seed

    def pick(self, job_ids: Sequence[str], stream: int) -> list[tuple[str, Template]]:
        rng = np.random.default_rng([self.seed, stream, 41])
        crit = rng.random(len(job_ids)) < CRITICAL_SHARE
        which = rng.integers(0, 1 << 30, len(job_ids))
        return [(job_id, self.critical[w % len(self.critical)] if c else self.normal[w % len(self.normal)])
                for job_id, c, w in zip(job_ids, crit.tolist(), which.tolist(), strict=True)]


def run_id(name: int, night: int) -> str:
    return f"train-{name:05d}-n{night:03d}"


def night_time(night: int) -> datetime:
    return FIRST_NIGHT + timedelta(days=night - 1)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the bench ----------------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One measured subprocess, with what it wrote and the fleet.json size after it."""

    run: Measured
    stored: int = 0
    diagnosed: int | None = None
    wrote: Written | None = None
    fleet_json_bytes: int | None = None


@dataclass
class Outcome:
    """One storage's figures."""

    kind: str
    sizes: dict[str, int]
    nights: list[Step] = field(default_factory=list)
    unchanged: Step | None = None
    unchanged_fleet: str = ""  # "growth" or "post-job": the stored runs it audited
    startups: list[Measured] = field(default_factory=list)
    empty_root: Measured | None = None
    setup: Step | None = None
    single: Step | None = None
    sequential: list[Measured] = field(default_factory=list)
    sequential_s: float | None = None
    parallel: list[Measured] = field(default_factory=list)
    parallel_s: float | None = None
    batch_written: dict[str, Written] = field(default_factory=dict)
    batch_lease: dict[str, LeaseUse] = field(default_factory=dict)
    #: single / sequential / parallel -> (rows in fleet.json, rows only in pending commits) after it
    rows_where: dict[str, tuple[int, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def startup_s(self) -> float | None:
        runs = [run.wall_s for run in self.startups if run.rc == 0]
        return min(runs) if runs else None


class Bench:
    def __init__(self, work: Path, env: dict[str, str], picker: RunPicker, s3: MotoS3 | None, args: argparse.Namespace,
                 ) -> None:
        self.work, self.env, self.picker, self.s3, self.args = work, env, picker, s3, args
        self.cwd = work / "cwd"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.startup_script = work / "startup_flow.py"
        self.startup_script.write_text(STARTUP_FLOW)
        self.serial = 0
        self.audit_extra = shlex.split(args.audit_args)
        self.post_job_extra = shlex.split(args.post_job_args)

    def root(self, kind: str, name: str) -> Root:
        if kind == "local":
            path = self.work / "roots" / name
            shutil.rmtree(path, ignore_errors=True)
            return LocalRoot(path)
        assert self.s3 is not None
        return S3Root(self.s3, f"{name}-{os.getpid()}")

    def _log(self, tag: str) -> Path:
        self.serial += 1
        return self.logs / f"{self.serial:04d}-{tag}"

    def audit(self, root: Root, as_of: datetime, tag: str) -> Measured:
        cmd = [*fleet_bench.cli_command(), "audit", "--storage", root.uri, *root.flags, "--as-of", iso(as_of),
               "--job-name-pattern", JOB_NAME_PATTERN, *self.audit_extra]
        return measure(tag, cmd, self.env, self.cwd, self._log(tag), self.args.timeout)

    def post_job(self, root: Root, job_id: str, as_of: datetime, tag: str, *, sample: bool = True) -> Measured:
        cmd = [*fleet_bench.cli_command(), "post-job", job_id, "--storage", root.uri, *root.flags, "--as-of",
               iso(as_of), "--job-name-pattern", JOB_NAME_PATTERN, "--lease-wait", str(self.args.lease_wait),
               *self.post_job_extra]
        return measure(tag, cmd, self.env, self.cwd, self._log(tag), self.args.timeout, sample=sample)

    def startup(self, tag: str) -> Measured:
        return measure(tag, [sys.executable, str(self.startup_script)], self.env, self.cwd, self._log(tag),
                       self.args.timeout)

    def startups(self, out: Outcome) -> None:
        """Prefect's start-up, best of STARTUP_REPEAT, once per storage (beside the first figure it is set against)."""
        if out.startups:
            return
        out.startups = [self.startup(f"{out.kind}-startup-{i}") for i in range(1, STARTUP_REPEAT + 1)]
        for run in out.startups:
            if run.rc != 0:
                problem(out, f"{out.kind} start-up flow: exit code {run.rc} (log {run.log})\n{run.stderr[-1500:]}")
        print(f"  [{out.kind}] start-up: " + ", ".join(f"{r.wall_s:.2f}" for r in out.startups)
              + f" s; best {fmt(out.startup_s, '.2f')} s", flush=True)

    # one measured audit: snapshots around it, fleet.json after, checks
    def measured_audit(self, out: Outcome, root: Root, as_of: datetime, tag: str, job_ids: set[str], *,
                       diagnosed: int, skipped: int | None = None) -> Step:
        before, _ = root.snapshot()
        run = self.audit(root, as_of, tag)
        after, sizes = root.snapshot()
        document = root.fleet_json()
        step = Step(run, stored=len(job_ids), wrote=written(before, after, sizes, job_ids),
                    fleet_json_bytes=sizes.get("fleet.json"))
        summary = (document or {}).get("summary", {})
        step.diagnosed = summary.get("diagnosed")
        check_run(out, run)
        if run.rc in OK_CODES:
            wanted = {"jobs": len(job_ids), "diagnosed": diagnosed, "failed": 0, "refused": 0}
            if skipped is not None:
                wanted["skipped"] = skipped
            wrong = {key: summary.get(key) for key, value in wanted.items() if summary.get(key) != value}
            if document is None or wrong:
                problem(out, f"{tag}: fleet.json summary {summary or '(no fleet.json)'}; expected {wanted} "
                             f"(log {run.log})")
        return step

    # --- scenarios

    def growth(self, out: Outcome) -> tuple[Root, set[str]]:
        nights, per_night = out.sizes["nights"], out.sizes["runs_per_night"]
        root = self.root(out.kind, "growth")
        job_ids: set[str] = set()
        print(f"\n[{out.kind}] growth: {nights} nights x {per_night:,} new runs at {root.uri}", flush=True)
        for night in range(1, nights + 1):
            t0 = time.perf_counter()
            runs = self.picker.pick([run_id(k, night) for k in range(per_night)], stream=night)
            root.add_runs(runs)
            job_ids.update(job_id for job_id, _ in runs)
            written_s = time.perf_counter() - t0
            step = self.measured_audit(out, root, night_time(night), f"{out.kind}-growth-n{night:03d}", job_ids,
                                       diagnosed=per_night)
            out.nights.append(step)
            crit = sum(template.critical for _, template in runs)
            print(f"  [{out.kind}] night {night:3d}: {len(job_ids):7,} stored, {step.run.wall_s:7.2f} s, rc "
                  f"{step.run.rc}, {mb(step.run.tree_rss)} MB, fleet-state {mb(step.wrote.fleet_bytes)} MB, "
                  f"job reports {mb(step.wrote.job_bytes)} MB ({crit} critical runs; written in {written_s:.1f} s)"
                  f"  {step.run.headline}", flush=True)
        return root, job_ids

    def unchanged(self, out: Outcome, root: Root, as_of: datetime, job_ids: set[str], fleet: str) -> None:
        step = self.measured_audit(out, root, as_of, f"{out.kind}-unchanged-{fleet}", job_ids, diagnosed=0,
                                   skipped=len(job_ids))
        out.unchanged, out.unchanged_fleet = step, fleet
        print(f"  [{out.kind}] unchanged rerun ({fleet}, {len(job_ids):,} stored): {step.run.wall_s:.2f} s, rc "
              f"{step.run.rc}, {mb(step.run.tree_rss)} MB, fleet-state {mb(step.wrote.fleet_bytes)} MB  "
              f"{step.run.headline}", flush=True)
        self.startups(out)

    def empty_root(self, out: Outcome) -> None:
        root = self.root(out.kind, "empty")
        run = self.audit(root, FIRST_NIGHT, f"{out.kind}-empty-root")
        out.empty_root = run
        check_run(out, run)
        print(f"  [{out.kind}] empty-root audit: {run.wall_s:.2f} s, rc {run.rc}  {run.headline}", flush=True)

    def stored_fleet(self, out: Outcome) -> tuple[Root, set[str], int, datetime]:
        stored, names = out.sizes["stored"], max(1, out.sizes["runs_per_night"])
        names = min(names, stored)
        root = self.root(out.kind, "post-job")
        job_ids = [run_id(k % names, k // names + 1) for k in range(stored)]
        t0 = time.perf_counter()
        root.add_runs(self.picker.pick(job_ids, stream=10_000))
        nights = -(-stored // names)
        print(f"\n[{out.kind}] post-job: {stored:,} stored runs ({names:,} job names x {nights} runs) written to "
              f"{root.uri} in {time.perf_counter() - t0:.1f} s; set-up audit (untimed) ...", flush=True)
        ids = set(job_ids)
        as_of = night_time(nights)
        step = self.measured_audit(out, root, as_of, f"{out.kind}-post-job-setup", ids, diagnosed=stored)
        out.setup = step
        print(f"  [{out.kind}] set-up audit: {step.run.wall_s:.1f} s, rc {step.run.rc}  {step.run.headline}",
              flush=True)
        return root, ids, names, as_of

    def post_jobs(self, out: Outcome, root: Root, job_ids: set[str], names: int, as_of: datetime) -> None:
        base_night = max(int(job_id.rsplit("-n", 1)[1]) for job_id in job_ids) + 1
        count, parallel = out.sizes["post_jobs"], out.sizes["parallel"]
        new = [run_id(j % names, base_night + j // names) for j in range(1 + 2 * count)]
        at = as_of + POST_JOB_AFTER
        self.startups(out)
        # (a) one post-job
        single = new[0]
        root.add_runs(self.picker.pick([single], stream=20_000))
        job_ids.add(single)
        before, _ = root.snapshot()
        run = self.post_job(root, single, at, f"{out.kind}-post-job-single")
        after, sizes = root.snapshot()
        out.single = Step(run, stored=len(job_ids), wrote=written(before, after, sizes, job_ids),
                          fleet_json_bytes=sizes.get("fleet.json"))
        check_run(out, run)
        out.rows_where["single"] = self.check_rows(out, root, [single], "single post-job")
        print(f"  [{out.kind}] one post-job ({len(job_ids):,} stored): {run.wall_s:.2f} s, rc {run.rc}, "
              f"{mb(run.tree_rss)} MB, fleet-state {mb(out.single.wrote.fleet_bytes)} MB  {run.headline}", flush=True)
        # (b) one after another, then K at a time (other fresh ids)
        for label, ids, workers in (("sequential", new[1:1 + count], 1), ("parallel", new[1 + count:], parallel)):
            root.add_runs(self.picker.pick(ids, stream=30_000 + workers))
            job_ids.update(ids)
            before, _ = root.snapshot()

            def one(job_id: str, label: str = label) -> Measured:
                return self.post_job(root, job_id, at, f"{out.kind}-post-job-{label}-{job_id}", sample=False)

            with lease_watch(root) as lease, ThreadPoolExecutor(workers) as pool:
                t0 = time.perf_counter()
                runs = list(pool.map(one, ids))
                total = time.perf_counter() - t0
            out.batch_lease[label] = lease
            after, sizes = root.snapshot()
            out.batch_written[label] = written(before, after, sizes, job_ids)
            if label == "sequential":
                out.sequential, out.sequential_s = runs, total
            else:
                out.parallel, out.parallel_s = runs, total
            for item in runs:
                check_run(out, item)
            out.rows_where[label] = self.check_rows(out, root, ids, f"{label} post-jobs")
            print(f"  [{out.kind}] {count} post-jobs {label} ({workers} at a time): {total:.1f} s in all; each "
                  f"{seconds(runs)}; the lease held {lease.held_s:.1f} s of it by {lease.holders} holders", flush=True)

    def check_rows(self, out: Outcome, root: Root, ids: Sequence[str], what: str) -> tuple[int, int]:
        """Each job's committed row says diagnosed: fleet.json's, or a pending commit's (a post-job may leave
        its row in ``reports/.commits/`` for the next audit to fold in); (in fleet.json, in commits only)."""
        document = root.fleet_json() or {}
        in_fleet = {row.get("job_id"): row.get("status") for row in document.get("jobs", ())}
        pending = root.committed_rows()
        statuses = {job_id: pending.get(job_id, in_fleet.get(job_id)) for job_id in ids}
        bad = [job_id for job_id, status in statuses.items() if status != "diagnosed"]
        if bad:
            problem(out, f"{out.kind} {what}: {len(bad)} of {len(ids)} jobs not diagnosed in fleet.json nor in a "
                         f"pending commit ({', '.join(bad[:5])}: {[statuses[b] for b in bad[:5]]})")
        folded = sum(1 for job_id in ids if in_fleet.get(job_id) == "diagnosed")
        return folded, len(ids) - folded - len(bad)


def check_run(out: Outcome, run: Measured) -> None:
    if run.timed_out:
        problem(out, f"{run.what}: killed after the {run.wall_s:.0f} s timeout (log {run.log})")
    elif run.rc not in OK_CODES:
        problem(out, f"{run.what}: exit code {run.rc} (log {run.log}); stderr tail:\n{run.stderr[-1500:]}")


def problem(out: Outcome, text: str) -> None:
    out.problems.append(text)
    fleet_bench._loud(text)


# --- printing -------------------------------------------------------------------------------------------------


def fmt(value: float | None, spec: str = ".1f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def mb(value: int | None) -> str:
    return "-" if value is None else f"{value / MB:.2f}"


def seconds(runs: Sequence[Measured]) -> str:
    walls = [run.wall_s for run in runs]
    if not walls:
        return "-"
    return f"median {statistics.median(walls):.2f} s, max {max(walls):.2f} s"


def by_file(wrote: Written | None, top: int = 6) -> str:
    groups = sorted((wrote or Written()).fleet_by_file.items(), key=lambda item: -item[1])
    return ", ".join(f"{group} {size / MB:.2f}" for group, size in groups[:top]) or "nothing"


def growth_table(out: Outcome) -> list[str]:
    lines = [f"== growth, {out.kind}: {out.sizes['nights']} nights x {out.sizes['runs_per_night']:,} new runs "
             "(peak RSS: sampled sum over the tree; max proc: its largest process; cpu s: user + system of the "
             "tree; written: reports/ files created or changed)",
             f"{'night':>5} {'stored':>8} {'diagnosed':>9} {'wall s':>8} {'cpu s':>7} {'peak RSS MB':>11} "
             f"{'max proc MB':>11} "
             f"{'fleet-state MB':>14} {'files':>6} {'job-report MB':>13} {'files':>7} {'fleet.json MB':>13}  rc"]
    for night, step in enumerate(out.nights, 1):
        wrote = step.wrote or Written()
        lines.append(f"{night:5d} {step.stored:8,} {fmt(step.diagnosed, ',d'):>9} {step.run.wall_s:8.2f} "
                     f"{fmt(step.run.cpu_s, '7.1f')} {mb(step.run.tree_rss):>11} {mb(step.run.max_proc_rss):>11} "
                     f"{mb(wrote.fleet_bytes):>14} "
                     f"{wrote.fleet_files:6,} {mb(wrote.job_bytes):>13} {wrote.job_files:7,} "
                     f"{mb(step.fleet_json_bytes):>13}  {step.run.rc}")
    picked = sorted({0, min(1, len(out.nights) - 1), len(out.nights) - 1})
    groups = sorted({group for i in picked for group in (out.nights[i].wrote or Written()).fleet_by_file},
                    key=lambda group: -max((out.nights[i].wrote or Written()).fleet_by_file.get(group, 0)
                                           for i in picked))
    lines.append("  fleet-state MB written, by file, on nights " + ", ".join(str(i + 1) for i in picked) + ":")
    for group in groups:
        lines.append(f"    {group:28s}" + "".join(
            f" {mb((out.nights[i].wrote or Written()).fleet_by_file.get(group, 0)):>9}" for i in picked))
    return lines


def others_table(out: Outcome) -> list[str]:
    lines = [f"== unchanged and start-up, {out.kind}",
             f"  {'run':58s} {'wall s':>8} {'cpu s':>7} {'peak RSS MB':>11} {'max proc MB':>11} {'fleet-state MB':>14} "
             f"{'job-report MB':>13}  rc"]

    def row(label: str, run: Measured | None, wrote: Written | None = None) -> None:
        if run is None:
            return
        lines.append(f"  {label:58s} {run.wall_s:8.2f} {fmt(run.cpu_s, '7.1f')} {mb(run.tree_rss):>11} "
                     f"{mb(run.max_proc_rss):>11} "
                     f"{mb(wrote.fleet_bytes) if wrote else '-':>14} {mb(wrote.job_bytes) if wrote else '-':>13}  "
                     f"{run.rc}")

    if out.unchanged is not None:
        row(f"unchanged rerun, {out.unchanged_fleet} fleet ({out.unchanged.stored:,} stored runs)", out.unchanged.run,
            out.unchanged.wrote)
        lines.append(f"    its fleet-state MB by file: {by_file(out.unchanged.wrote)}")
    best = min((r for r in out.startups if r.rc == 0), key=lambda r: r.wall_s, default=None)
    row(f"start-up: post-job-shaped empty flow, best of {len(out.startups)}", best)
    if out.setup is not None:
        row(f"post-job fleet's set-up audit ({out.setup.stored:,} runs, cold; untimed)", out.setup.run, out.setup.wrote)
    row("empty-root audit (exits before importing Prefect)", out.empty_root)
    return lines


def post_job_table(out: Outcome) -> list[str]:
    count, parallel = out.sizes["post_jobs"], out.sizes["parallel"]
    stored = out.setup.stored if out.setup else (out.single.stored - 1 if out.single else 0)  # or the growth fleet
    lines = [f"== post-job, {out.kind}: against {stored:,} stored runs, a Prefect API server running "
             "(batches: peak RSS not sampled; max proc: the largest of the batch; lease: seen held, polled)",
             f"  {'':40s} {'wall s':>8} {'cpu s':>7} {'per job':>29} {'peak RSS MB':>11} {'max proc MB':>11} "
             f"{'fleet-state MB':>14} {'job-report MB':>13}  {'lease held':>20}"]
    if out.single is not None:
        run, wrote = out.single.run, out.single.wrote or Written()
        lines.append(f"  {'one post-job':40s} {run.wall_s:8.2f} {fmt(run.cpu_s, '7.1f')} {'':>29} "
                     f"{mb(run.tree_rss):>11} {mb(run.max_proc_rss):>11} {mb(wrote.fleet_bytes):>14} "
                     f"{mb(wrote.job_bytes):>13}")
        lines.append(f"    its fleet-state MB by file: {by_file(wrote)}")
    for key, label, runs, total in (
            ("sequential", f"{count} one after another (total)", out.sequential, out.sequential_s),
            ("parallel", f"{count}, {parallel} at a time (total)", out.parallel, out.parallel_s)):
        if total is None:
            continue
        worst = max((run.max_proc_rss for run in runs), default=0)
        wrote = out.batch_written.get(key) or Written()
        lease = out.batch_lease.get(key) or LeaseUse()
        held = f"{lease.held_s:.1f} s, {lease.holders} holders"
        cpu = sum(run.cpu_s or 0.0 for run in runs)
        lines.append(f"  {label:40s} {total:8.2f} {cpu:7.1f} {seconds(runs):>29} {'-':>11} {mb(worst):>11} "
                     f"{mb(wrote.fleet_bytes):>14} {mb(wrote.job_bytes):>13}  {held:>20}")
    speedup = speedup_of(out)
    lines.append(f"  {'speed-up (one after another / at a time)':40s} {fmt(speedup, '8.2f', 'x')}")
    if out.rows_where:
        lines.append("  the post-jobs' rows afterwards, in fleet.json / only in pending commits (reports/.commits/): "
                     + ", ".join(f"{key} {a} / {b}" for key, (a, b) in out.rows_where.items()))
    return lines


def speedup_of(out: Outcome) -> float | None:
    if not out.sequential_s or not out.parallel_s:
        return None
    return out.sequential_s / out.parallel_s


@dataclass
class TargetRow:
    label: str
    storage: str
    figures: str
    met: bool | None  # None: not measured

    @property
    def verdict(self) -> str:
        return "-" if self.met is None else ("met" if self.met else "NOT met")


def target_rows(out: Outcome) -> list[TargetRow]:
    rows = []
    kind = out.kind
    if len(out.nights) >= 3:  # with two, the last night is night 2
        first, last = out.nights[1], out.nights[-1]
        n = len(out.nights)
        ratio = last.run.wall_s / first.run.wall_s
        cpu = (f"; cpu {last.run.cpu_s:.1f} / {first.run.cpu_s:.1f} s = {last.run.cpu_s / first.run.cpu_s:.2f}x"
               if last.run.cpu_s and first.run.cpu_s else "")
        rows.append(TargetRow(T_GROWTH_WALL, kind, f"night {n} {last.run.wall_s:.2f} s / night 2 "
                              f"{first.run.wall_s:.2f} s = {ratio:.2f}x{cpu}", ratio <= TARGET_GROWTH))
        a, b = (last.wrote or Written()).fleet_bytes, (first.wrote or Written()).fleet_bytes
        ratio_b = a / b if b else None
        rows.append(TargetRow(T_GROWTH_BYTES, kind, f"night {n} {a / MB:.2f} MB / night 2 {b / MB:.2f} MB = "
                              f"{fmt(ratio_b, '.2f', 'x')}", None if ratio_b is None else ratio_b <= TARGET_GROWTH))
    else:
        for label in (T_GROWTH_WALL, T_GROWTH_BYTES):
            rows.append(TargetRow(label, kind, "not measured (needs growth with 3 nights or more)", None))
    if out.unchanged is not None:
        step, startup = out.unchanged, out.startup_s
        over = None if startup is None else step.run.wall_s - startup
        rows.append(TargetRow(T_UNCHANGED, kind, f"{out.unchanged_fleet} fleet ({step.stored:,} runs): "
                              f"{step.run.wall_s:.2f} s - start-up {fmt(startup, '.2f')} s = {fmt(over, '+.2f')} s",
                              None if over is None else over <= TARGET_UNCHANGED_S))
    else:
        rows.append(TargetRow(T_UNCHANGED, kind, "not measured (scenario unchanged not run)", None))
    if out.single is not None:
        startup = out.startup_s
        over = None if startup is None else out.single.run.wall_s - startup
        rows.append(TargetRow(T_POST_JOB, kind, f"{out.single.run.wall_s:.2f} s - start-up {fmt(startup, '.2f')} s "
                              f"= {fmt(over, '+.2f')} s ({out.single.stored:,} stored)",
                              None if over is None else over <= TARGET_POST_JOB_S))
        run = out.single.run
        rss = max(run.tree_rss or 0, run.max_proc_rss) or None  # a sampled sum can miss the largest process's peak
        rows.append(TargetRow(T_POST_JOB_RSS, kind, f"{mb(rss)} MB (the higher of the sampled tree sum "
                              f"{mb(run.tree_rss)} MB and the largest process {mb(run.max_proc_rss)} MB)",
                              None if rss is None else rss < TARGET_POST_JOB_RSS))
    else:
        for label in (T_POST_JOB, T_POST_JOB_RSS):
            rows.append(TargetRow(label, kind, "not measured (scenario post-job not run)", None))
    speedup = speedup_of(out)
    if speedup is not None:
        rows.append(TargetRow(T_SPEEDUP, kind, f"{out.sizes['post_jobs']} jobs: {out.sequential_s:.1f} s one after "
                              f"another / {out.parallel_s:.1f} s {out.sizes['parallel']} at a time = {speedup:.2f}x",
                              speedup >= TARGET_SPEEDUP))
    else:
        rows.append(TargetRow(T_SPEEDUP, kind, "not measured (scenario post-job not run)", None))
    return rows


def targets_table(outcomes: Sequence[Outcome]) -> list[str]:
    rows = [row for out in outcomes for row in target_rows(out)]
    width = max(len(label) for label in TARGET_LABELS)
    fig = max([len(row.figures) for row in rows] + [7])
    lines = [f"targets ({os.cpu_count()} cores; the issue's are for 2):",
             f"  {'target':{width}s}  {'storage':7s}  {'figures':{fig}s}  verdict"]
    for label in TARGET_LABELS:
        for row in rows:
            if row.label == label:
                lines.append(f"  {row.label:{width}s}  {row.storage:7s}  {row.figures:{fig}s}  {row.verdict}")
    return lines


# --- set-up ---------------------------------------------------------------------------------------------------


Sizes = dict[str, dict[str, int]]  # storage -> size flag -> value


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str], list[str], Sizes]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="CI's form: local, 4 nights x 40, 200 stored, 6 post-jobs"
                        " 3 at a time (size flags still win)")
    parser.add_argument("--storage", default=None, help="local,s3 (default both; --short: local)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma list of {', '.join(SCENARIOS)}")
    parser.add_argument("--nights", type=int, help="growth: nights (local 30, s3 6)")
    parser.add_argument("--runs-per-night", type=int, help="growth: new runs a night; also the job names of the "
                        "post-job fleet (local 1,000, s3 200)")
    parser.add_argument("--stored", type=int, help="post-job: stored runs, audited once first (local 10,000, s3 2,000)")
    parser.add_argument("--post-jobs", type=int, help="post-job: jobs in each batch (50)")
    parser.add_argument("--parallel", type=int, help="post-job: jobs at a time in the parallel batch (8)")
    parser.add_argument("--post-jobs-on", choices=("stored", "growth"), default="stored",
                        help="post-job: against the --stored fleet audited once first (default), or against the "
                             "growth fleet after its last night (nights x runs-per-night stored runs, no set-up audit)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="work in DIR and keep it (roots/, logs/ of every run)")
    parser.add_argument("--timeout", type=float, default=3_600, help="seconds before a subprocess is killed (3,600)")
    parser.add_argument("--lease-wait", type=float, default=900, help="post-job's --lease-wait (900 s)")
    parser.add_argument("--audit-args", default="", help='passed to every audit, e.g. "--workers 2"')
    parser.add_argument("--post-job-args", default="", help='passed to every post-job, e.g. "--engine threads"')
    args = parser.parse_args(argv)
    wanted = args.storage or ("local" if args.short else ",".join(STORAGES))
    storages = fleet_bench.split_list(wanted, STORAGES, "storage", parser)
    scenarios = fleet_bench.split_list(args.scenarios, SCENARIOS, "scenarios", parser)
    sizes: Sizes = {}
    for kind in storages:
        chosen = dict(SHORT_SIZES if args.short else DEFAULT_SIZES[kind])
        for name in SIZE_FLAGS:
            if getattr(args, name) is not None:
                chosen[name] = getattr(args, name)
        if min(chosen.values()) < 1:
            parser.error("sizes must be >= 1")
        sizes[kind] = chosen
    return args, storages, scenarios, sizes


@contextmanager
def work_folder(keep: Path | None) -> Iterator[Path]:
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="stormwatch-growth-bench-") as tmp:
            yield Path(tmp)
        return
    keep = keep.resolve()
    for name in ("roots", "logs", "cwd", "templates"):
        shutil.rmtree(keep / name, ignore_errors=True)
    keep.mkdir(parents=True, exist_ok=True)
    yield keep


def run_storage(bench: Bench, kind: str, scenarios: Sequence[str], sizes: dict[str, int], *,
                on_growth: bool = False) -> Outcome:
    """The scenarios on one storage; ``on_growth``: the post-jobs run against the growth fleet."""
    out = Outcome(kind, sizes)
    t0 = time.perf_counter()
    if "growth" in scenarios:
        root, ids = bench.growth(out)
        if "unchanged" in scenarios:
            bench.unchanged(out, root, night_time(sizes["nights"]), ids, "growth")
        if on_growth and "post-job" in scenarios:
            print(f"\n[{kind}] post-job: against the growth fleet ({len(ids):,} stored runs)", flush=True)
            bench.post_jobs(out, root, ids, max(1, sizes["runs_per_night"]), night_time(sizes["nights"]))
    if (not on_growth and "post-job" in scenarios) or ("unchanged" in scenarios and "growth" not in scenarios):
        root, ids, names, as_of = bench.stored_fleet(out)
        if "unchanged" in scenarios and "growth" not in scenarios:
            bench.unchanged(out, root, as_of, ids, "post-job")
        if "post-job" in scenarios and not on_growth:
            bench.post_jobs(out, root, ids, names, as_of)
    bench.empty_root(out)
    print(f"  [{kind}] {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args, storages, scenarios, sizes = parse_args(argv)
    started = time.perf_counter()
    print(f"fleet growth bench: {os.cpu_count()} cores, python {sys.version.split()[0]}, storage {storages}, "
          f"scenarios {scenarios}, seed {args.seed}, psutil {'yes' if psutil else 'no (peak RSS: -)'}")
    for kind in storages:
        s = sizes[kind]
        print(f"  {kind}: {s['nights']} nights x {s['runs_per_night']:,} runs; {s['stored']:,} stored, "
              f"{s['post_jobs']} post-jobs, {s['parallel']} at a time")
    outcomes: list[Outcome] = []
    with work_folder(args.keep) as work:
        templates = work / "templates"
        normal, critical = write_templates(templates, args.seed)
        sizes_kb = [sum(p.stat().st_size for _, p in t.files) / 1e3 for t in normal + critical]
        print(f"templates: {len(normal)} + {len(critical)} critical (fleet_bench's tiny fleet), "
              f"{min(sizes_kb):.0f}-{max(sizes_kb):.0f} kB, shapes "
              + ", ".join(sorted({t.name.split('-', 2)[2] for t in normal + critical})))
        picker = RunPicker(normal, critical, args.seed)
        s3 = MotoS3() if "s3" in storages else None
        (work / "prefect").mkdir(parents=True, exist_ok=True)
        try:
            with kill_bench.prefect_server(work / "prefect") as api_url:
                env = fleet_bench.base_env(work / "prefect")
                env["PREFECT_API_URL"] = api_url
                bench = Bench(work, env, picker, s3, args)
                first = bench.startup("warm-up")  # the server's first flow run: untimed
                print(f"prefect: API {api_url}; first empty flow {first.wall_s:.1f} s (untimed), rc {first.rc}"
                      + (f"; s3: moto at {s3.endpoint}" if s3 else ""), flush=True)
                if first.rc != 0:
                    print(first.stderr[-3000:])
                    return 2
                for kind in storages:
                    outcomes.append(run_storage(bench, kind, scenarios, sizes[kind],
                                               on_growth=args.post_jobs_on == "growth" and "growth" in scenarios))
        finally:
            if s3 is not None:
                s3.stop()
        print()
        for out in outcomes:
            if out.nights:
                print("\n".join(growth_table(out)) + "\n")
            print("\n".join(others_table(out)) + "\n")
            if out.single is not None or out.sequential_s is not None:
                print("\n".join(post_job_table(out)) + "\n")
        print("\n".join(targets_table(outcomes)))
        problems = [text for out in outcomes for text in out.problems]
        if args.keep:
            print(f"\nlogs of every run: {work / 'logs'}")
        print(f"\n{time.perf_counter() - started:.0f} s in all")
        if problems:
            fleet_bench._loud(f"{len(problems)} problem(s): the figures of those runs are not valid")
            for text in problems:
                print(f"  - {text.splitlines()[0]}")
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
