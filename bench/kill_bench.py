"""Crash safety: audits killed (SIGKILL to the process group) at random times and at every storage step,
each rerun at once, over 5-night runs on local storage and on S3 (moto), against an oracle run.

    python bench/kill_bench.py [--short] [--storage local,s3] [--scenarios NAME,...] [--seed 0] [--keep DIR]

    --short   CI's form (tests/test_kill_bench.py): one 5-night run with 5 kills, local storage only (2-3 min)
    default   everything below, local and S3 (about 40 minutes on 2 cores)

The fleet: 21 small jobs written with stormlog's writers (tests/builders.py): 10 critical (an OOM), 10
clean, one ``noisy-*`` critical job under a silence (``stormwatch silence add --match job=noisy-*``, made
before the first night). Before each later night one critical and one clean job are added, a critical
job is rewritten clean (a resolved message), a clean one critical (a new message) and a new ``noisy-*``
job appears (silenced: never paged). Nights are ``--as-of 2026-10-0N T02:00Z``. Receivers: a local
webhook server (``--slack-webhook``) and an aiosmtpd server (``--smtp-url``), recording every message;
``--group-above 1000`` keeps one message per alert, ``--notify-resolved`` sends resolutions,
``--job-name-pattern '(.+)'`` makes every job its own job name. Every audit is a subprocess of the real
CLI in its own session against one Prefect API server started here (or $PREFECT_API_URL's).

Scenarios (each a fresh storage root; the oracle is the same nights with nothing killed or damaged):
  random    20 audits killed after a random delay within that night's oracle run time (4 runs x 5 nights),
            each rerun at once (same --as-of)
  steps     a kill before and after each kind of write an audit makes, in order (per-job model.json and
            report.html, reports/.commits/*, reports/history/*, fleet.json, fleet.parquet, index.html, the
            claim and the settle of alerts.json (its writes 1 and 2), the ledger's archive and carried file, and
            the second fleet.json / index.html after notifying): 26 points, one per night over 6 runs (the last
            one short), each rerun at once
  concurrent  two plain audits started 0-100 ms apart every night: exactly one may work, the other exits 1
  lease     night 1: killed, its lease record then names another host: audits retried every second until
            one gets the lease (the 2-minute expiry); night 2: the same, then `audit --break-lease` (it
            watches the lease for 50 s); night 3: killed, `audit --break-lease` on this host (at once)
  damage-*  a file damaged between nights 2 and 3, then nights 3 and 4 audited: alerts.json truncated /
            zero bytes / deleted; notifications.jsonl with garbage lines / a torn last line; a zero-byte
            history file; a truncated <job>/model.json; a stale reports/.fleet.json.XXXX.tmp (local only:
            S3 writes leave no temporaries); a truncated silences.json (the silenced job must stay silent)

Kill points: this script runs the audit in its own child mode (``--child POINT -- audit ...``), which arms
tests/faults/killpoints.py's ``KillPoint`` on ``write_report`` *and* on the conditional writes
(``create_report_exclusive``, ``replace_report_if``; outermost call only): killpoints.py arms
``write_report`` alone, and alerts.json's claim and settle are conditional writes (on S3 neither would
ever be reached, locally only the replacements). Kill points on per-job files run with
``--engine threads --workers 1`` (process-engine workers write them in other processes).

Measured per scenario, summed over its runs:
  messages sent twice        a message (channel + its headline: Slack ``text``, email ``Subject``) received
                             on a night more often than the oracle received it that night; "inside the
                             window" when the extra copy is one a killed audit had delivered before its
                             ledger write (the killed audit's receivers got it, its ledger
                             bytes stayed unchanged), else "outside"
  messages never sent        oracle messages of a night that did not arrive that night
  messages the oracle never sent   e.g. a silenced job paged
  history rows lost / duplicated   the multiset of (job_id, session_id, rank, audit_time) rows in
                             reports/history/** against the oracle's (rows in a file this bench zeroed itself
                             are the damage's, named apart, not counted)
  files left damaged         after every night's last audit: any JSON / JSONL / Parquet / HTML under reports/
                             (reports/damaged/ and the people's files silences.json, routes.toml apart) that does
                             not read, any *.tmp, any reports/.commits/*, a lease left behind
  fleet rows unlike the oracle's   jobs whose final fleet.json verdict differs
  next audit had the lease   seconds from the kill to the acquired_at of the next audit's lease
Targets: every count 0 except inside the window, the next audit within 120 s of a kill (for the other-host
case, the lease's expiry is what is judged: its expires_at minus the kill; the retries' own cadence shows
beside it). Exit code 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

THIS_FILE = Path(__file__).resolve()
REPO = THIS_FILE.parents[1]

NIGHTS = 5
DAMAGE_NIGHTS = 4  # damaged between nights 2 and 3, then nights 3 and 4
DAMAGE_BEFORE = 3
LEASE_NIGHTS = 3
LETTERS = "abcdefghijklmnopqrst"
CRITICAL, CLEAN = "critical", "clean"
SILENCE_MATCH = "job=noisy-*"
LEASE_KEY = "reports/.locks/audit.json"
OTHER_HOST = "another-host.invalid"
TARGET_NEXT_RUN_S = 120.0
AUDIT_TIMEOUT_S = 600
POLL_S = 0.05
BUCKET = "kill-bench"
AUDIT_FLAGS = ("--group-above", "1000", "--notify-resolved", "--job-name-pattern", "(.+)")
PEOPLES_FILES = ("reports/silences.json", "reports/routes.toml")
QUIET_PREFECT = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}
STEP_POINTS = (
    "before:*/model.json:1", "after:*/model.json:1", "after:*/model.json:3",
    "before:*/report.html:1", "after:*/report.html:1",
    "before:.commits/*:1", "after:.commits/*:1", "before:history/*:1", "after:history/*:1",
    "before:fleet.json:1", "after:fleet.json:1", "before:fleet.parquet:1", "after:fleet.parquet:1",
    "before:index.html:1", "after:index.html:1",
    "before:alerts.json:1", "after:alerts.json:1",  # the claim (nights with sends)
    # the ledger fold: the night's archive, then notifications.jsonl carried (tasks/notify/ledger_store.py)
    "before:.ledger-archive/*:1", "after:.ledger-archive/*:1", "after:notifications.jsonl:1",
    "before:alerts.json:2", "after:alerts.json:2",  # the settle
    "before:fleet.json:2", "after:fleet.json:2", "before:index.html:2", "after:index.html:2",  # after notifying
)
PER_JOB_PATTERNS = ("*/model.json", "*/report.html")


# --- child mode: one audit with a kill point armed -------------------------------------------------------


def arm(text: str) -> None:
    """Die (SIGKILL to the process group) before or after the n-th write of a report key matching the
    point's glob: plain writes and conditional ones, counted once per outermost call."""
    from stormwatch.tasks.storage.local import LocalStorage
    from stormwatch.tasks.storage.s3 import S3Storage
    from tests.faults.killpoints import KillPoint, When, die

    point = KillPoint.parse(text)
    seen = [0]
    lock = threading.Lock()
    depth = threading.local()

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def write(self: Any, key: str, *args: Any, **kwargs: Any) -> Any:
            outer = getattr(depth, "level", 0) == 0
            hit = False
            if outer and fnmatch.fnmatchcase(key, point.pattern):
                with lock:
                    seen[0] += 1
                    hit = seen[0] == point.nth
            if hit and point.when is When.BEFORE:
                die()
            depth.level = getattr(depth, "level", 0) + 1
            try:
                result = original(self, key, *args, **kwargs)
            finally:
                depth.level -= 1
            if hit and point.when is When.AFTER:
                die()
            return result
        return write

    for storage in (LocalStorage, S3Storage):
        for name in ("write_report", "create_report_exclusive", "replace_report_if"):
            setattr(storage, name, wrap(getattr(storage, name)))


def child_main(argv: list[str]) -> int:
    point, rest = argv[0], argv[2:]  # POINT -- audit args
    arm(point)
    from stormwatch.flows.cli import main as cli

    return cli(rest)


# --- storage roots: a folder or an S3 prefix on the moto server -----------------------------------------


class Store:
    """A storage root seen directly (root-relative keys: ``jobs/...``, ``reports/...``), and how to name it."""

    uri: str
    flags: tuple[str, ...] = ()
    kind: str = ""

    def put(self, key: str, data: bytes) -> None:
        raise NotImplementedError

    def get(self, key: str) -> bytes | None:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def keys(self, prefix: str) -> list[str]:
        raise NotImplementedError

    def upload(self, folder: Path, under: str) -> None:
        for key in self.keys(under + "/"):
            self.delete(key)
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                self.put(f"{under}/{path.relative_to(folder).as_posix()}", path.read_bytes())


class LocalStore(Store):
    kind = "local"

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.uri = str(root)

    def put(self, key: str, data: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def get(self, key: str) -> bytes | None:
        path = self.root / key
        try:
            return path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def delete(self, key: str) -> None:
        (self.root / key).unlink(missing_ok=True)

    def keys(self, prefix: str) -> list[str]:
        base = self.root / prefix
        folder = base if prefix.endswith("/") else base.parent
        if not folder.is_dir():
            return []
        found = (path.relative_to(self.root).as_posix() for path in folder.rglob("*") if path.is_file())
        return sorted(key for key in found if key.startswith(prefix))


class S3Store(Store):
    kind = "s3"

    def __init__(self, client: Any, endpoint: str, prefix: str) -> None:
        self.client, self.prefix = client, prefix
        self.uri = f"s3://{BUCKET}/{prefix}"
        self.flags = ("--endpoint-url", endpoint)

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=BUCKET, Key=f"{self.prefix}/{key}", Body=data)

    def get(self, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=BUCKET, Key=f"{self.prefix}/{key}")["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=BUCKET, Key=f"{self.prefix}/{key}")

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{self.prefix}/{prefix}")
        return sorted(item["Key"][len(self.prefix) + 1:] for page in pages for item in page.get("Contents", ()))


class MotoS3:
    """A moto server on 127.0.0.1 in this process, a bucket, and a fresh prefix per storage root."""

    def __init__(self) -> None:
        import logging

        import boto3
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.client = boto3.session.Session().client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                                     aws_access_key_id="testing", aws_secret_access_key="testing")
        self.client.create_bucket(Bucket=BUCKET)

    def store(self, name: str) -> S3Store:
        return S3Store(self.client, self.endpoint, name)

    def stop(self) -> None:
        self.server.stop()


# --- the fleet and its nights -----------------------------------------------------------------------------


def night_time(night: int) -> str:
    return f"2026-10-{night:02d}T02:00:00Z"


def night_changes(night: int) -> dict[str, str]:
    """The jobs whose inputs appear or change before ``night``: job id -> critical or clean."""
    if night == 1:
        jobs = {f"job-{letter}": CRITICAL for letter in LETTERS[:10]}
        jobs |= {f"job-{letter}": CLEAN for letter in LETTERS[10:20]}
        return jobs | {"noisy-a": CRITICAL}
    return {f"new-n{night}-crit": CRITICAL, f"new-n{night}-clean": CLEAN, f"noisy-n{night}": CRITICAL,
            f"job-{LETTERS[night - 2]}": CLEAN, f"job-{LETTERS[10 + night - 2]}": CRITICAL}


def write_inputs(work: Path) -> Path:
    """Every night's new and changed job folders, written once: ``inputs/n<night>/<job id>/**``."""
    from tests import builders as b

    base = work / "inputs"
    for night in range(1, NIGHTS + 1):
        for job_id, kind in night_changes(night).items():
            folder = base / f"n{night}" / job_id
            start_ns = b.START_NS + night * 86_400 * 10**9  # a rewritten job's runs differ from night to night
            if kind == CRITICAL:
                b.write_multi_rank_job(folder, world_size=2, alerts=b.DEFAULT_ALERTS, job_id=job_id, start_ns=start_ns)
            else:
                b.write_multi_rank_job(folder, world_size=2, samples=12, job_id=job_id, start_ns=start_ns)
    return base


def apply_night(store: Store, inputs: Path, night: int) -> None:
    for job_id in night_changes(night):
        folder = inputs / f"n{night}" / job_id
        if isinstance(store, LocalStore):
            shutil.rmtree(store.root / "jobs" / job_id, ignore_errors=True)
            shutil.copytree(folder, store.root / "jobs" / job_id)
        else:
            store.upload(folder, f"jobs/{job_id}")


# --- receivers --------------------------------------------------------------------------------------------


Message = tuple[str, str]  # (channel, headline)


class Receivers:
    """The webhook and SMTP servers; a mark is how many messages each had received."""

    def __init__(self, hook: Any, smtp: Any) -> None:
        self.hook, self.smtp = hook, smtp

    def mark(self) -> tuple[int, int]:
        return len(self.hook.posts), len(self.smtp.messages)

    def since(self, mark: tuple[int, int]) -> list[Message]:
        posts = [("slack", str(post.get("text", ""))) for post in self.hook.posts[mark[0]:]]
        mails = [("email", str(item.message["Subject"])) for item in self.smtp.messages[mark[1]:]]
        return posts + mails

    def flags(self) -> tuple[str, ...]:
        return ("--slack-webhook", self.hook.url, "--smtp-url", f"smtp://127.0.0.1:{self.smtp.port}",
                "--email-to", "oncall@example.com", "--email-from", "stormwatch@example.com")


# --- scenarios and their results ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    """How a night's first audit dies: at a storage step (``point``) or after ``fraction`` of that night's
    oracle run time (random kills)."""

    point: str | None = None
    fraction: float | None = None

    @property
    def per_job(self) -> bool:
        return self.point is not None and any(pattern in self.point for pattern in PER_JOB_PATTERNS)


@dataclass(frozen=True)
class Damage:
    name: str
    apply: Callable[[Store], str]  # damages the store; returns what it did
    destroys_history: bool = False
    local_only: bool = False


@dataclass(frozen=True)
class Plan:
    """One storage root's nights: kills (night -> kill of its first audit), a damage before a night,
    concurrent starts, and the lease cases (night -> case) after the kill."""

    nights: int = NIGHTS
    kills: dict[int, Kill] = field(default_factory=dict)
    damage: Damage | None = None
    concurrent: bool = False
    lease: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    plans: tuple[Plan, ...] = ()
    random_kills: int = 0  # 5-night runs of random kills until this many have landed


@dataclass
class Oracle:
    messages: dict[int, Counter[Message]]
    rows: dict[int, Counter[tuple[Any, ...]]]  # night -> rows audited that night
    verdicts: dict[int, dict[str, str]]  # night -> fleet.json's verdicts after it
    alerts: dict[int, dict[str, str]]  # night -> alerts.json's alert statuses after it
    durations: dict[int, float]


LEASE_CASES = {
    "same": "same host, holder dead",
    "other-wait": "another host: waiting for expiry",
    "other-blocked": "another host: lease expiry - kill",
    "other-break": "another host: --break-lease",
    "same-break": "same host: --break-lease",
}


@dataclass
class Result:
    """One scenario on one storage, summed over its runs."""

    runs: int = 0
    kills: int = 0
    missed: int = 0  # random kills whose audit had finished first
    dup_inside: int = 0
    dup_outside: int = 0
    never_sent: int = 0
    late: int = 0
    unexpected: int = 0
    rows_lost: int = 0
    rows_dup: int = 0
    rows_destroyed: int = 0
    damaged: set[str] = field(default_factory=set)
    fleet_wrong: int = 0
    failed: int = 0  # job-nights fleet.json recorded as failed
    alerts_wrong: int = 0
    bad_exits: int = 0
    concurrent_bad: int = 0
    lease_s: dict[str, list[float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    applicable: bool = True

    def lease(self, case: str, seconds: float) -> None:
        self.lease_s.setdefault(case, []).append(seconds)


# --- running audits -------------------------------------------------------------------------------------


@dataclass
class Audit:
    """One audit subprocess and what it came to."""

    proc: subprocess.Popen[bytes]
    log: Path
    started: float
    killed_at: float | None = None
    rc: int | None = None

    def output(self, limit: int = 1500) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-limit:]


class LeaseWatch:
    """Polls the lease object from a thread until a lease other than ``old_token``'s appears: its acquired_at."""

    def __init__(self, store: Store, old_token: str | None) -> None:
        self.store, self.old_token = store, old_token
        self.acquired: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            record = read_lease(self.store)
            if record is not None and record.get("token") != self.old_token:
                self.acquired = datetime.fromisoformat(str(record["acquired_at"])).timestamp()
                return
            self._stop.wait(POLL_S)

    def stop(self) -> float | None:
        self._stop.set()
        self._thread.join()
        return self.acquired


def read_lease(store: Store) -> dict[str, Any] | None:
    import orjson

    data = store.get(LEASE_KEY)
    try:
        record = orjson.loads(data) if data else None
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def kill_group(pid: int) -> None:
    """SIGKILL to the process group of an audit this bench started (its own session: pgid == pid)."""
    with suppress(ProcessLookupError):  # ended meanwhile
        os.killpg(pid, signal.SIGKILL)


class Runner:
    """Starts audits of one storage root against the receivers, with this bench's environment."""

    def __init__(self, work: Path, env: dict[str, str], receivers: Receivers, store: Store, label: str) -> None:
        self.work, self.env, self.receivers, self.store = work, env, receivers, store
        self.logs = work / "logs" / label
        self.logs.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def args(self, night: int, *extra: str) -> list[str]:
        return ["audit", "--storage", self.store.uri, *self.store.flags, "--as-of", night_time(night),
                *self.receivers.flags(), *AUDIT_FLAGS, *extra]

    def start(self, night: int, *extra: str, point: str | None = None) -> Audit:
        self.count += 1
        log = self.logs / f"{self.count:03d}-n{night}{'-' + point.replace('/', '_') if point else ''}.log"
        args = self.args(night, *extra)
        command = ([sys.executable, str(THIS_FILE), "--child", point, "--", *args] if point
                   else [sys.executable, "-m", "stormwatch.flows.cli", *args])
        with log.open("wb") as out:
            proc = subprocess.Popen(command, cwd=self.work / "cwd", env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        return Audit(proc, log, time.time())

    def finish(self, audit: Audit, *, timeout: float = AUDIT_TIMEOUT_S) -> Audit:
        try:
            audit.rc = audit.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(audit.proc.pid)
            audit.rc = audit.proc.wait()
        if audit.rc != -signal.SIGKILL:
            audit.killed_at = None  # done before the signal came
        elif audit.killed_at is None:
            audit.killed_at = time.time()  # it killed itself at its kill point
        return audit

    def kill_after(self, audit: Audit, delay_s: float) -> Audit:
        deadline = audit.started + delay_s
        while time.time() < deadline and audit.proc.poll() is None:
            time.sleep(min(POLL_S, max(0.0, deadline - time.time())))
        if audit.proc.poll() is None:
            kill_group(audit.proc.pid)
            audit.killed_at = time.time()
        return self.finish(audit)

    def run(self, night: int, *extra: str) -> Audit:
        return self.finish(self.start(night, *extra))

    def silence(self) -> None:
        command = [sys.executable, "-m", "stormwatch.flows.cli", "silence", "add", "--storage", self.store.uri,
                   *self.store.flags, "--match", SILENCE_MATCH, "--until", "2027-06-30", "--reason",
                   "kill bench: noisy jobs", "--by", "kill-bench"]
        done = subprocess.run(command, cwd=self.work / "cwd", env=self.env, capture_output=True, text=True,
                              timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"silence add failed: {done.stdout}{done.stderr}")


# --- checks -------------------------------------------------------------------------------------------------


def unreadable(key: str, data: bytes) -> str | None:
    """Why a report object does not read (None when it does)."""
    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if key.endswith(".json"):
            orjson.loads(data)
        elif key.endswith(".jsonl"):
            for number, line in enumerate(data.split(b"\n"), 1):
                if line.strip():
                    try:
                        orjson.loads(line)
                    except orjson.JSONDecodeError:
                        return f"line {number} is not JSON"
            if data and not data.endswith(b"\n"):
                return "its last line is cut short"
        elif key.endswith(".parquet"):
            pq.read_table(pa.BufferReader(data))
        elif key.endswith(".html") and b"</html>" not in data[-4096:]:
            return "an HTML page cut short"
    except (orjson.JSONDecodeError, pa.ArrowException, OSError, ValueError) as error:
        return f"{type(error).__name__}: {str(error)[:80]}"
    return None


def damaged_files(store: Store) -> list[str]:
    """Files a finished audit should not have left: unreadable state, temporaries, commits, a lease."""
    found = []
    for key in store.keys("reports/"):
        name = key.rsplit("/", 1)[-1]
        if key.startswith("reports/damaged/") or key in PEOPLES_FILES:
            continue
        if name.endswith(".tmp"):
            found.append(f"{key}: a temporary file left")
        elif key.startswith("reports/.commits/"):
            found.append(f"{key}: a commit left")
        elif key.startswith("reports/.locks/"):
            found.append(f"{key}: a lease left after the audit ended")
        else:
            data = store.get(key)
            problem = None if data is None else unreadable(key, data)
            if problem:
                found.append(f"{key}: {problem}")
    return found


def history_rows(store: Store) -> tuple[Counter[tuple[Any, ...]], list[str]]:
    """The (job_id, session_id, rank, audit_time) rows of reports/history/**, and the files that do not read."""
    import pandas as pd

    rows: Counter[tuple[Any, ...]] = Counter()
    bad = []
    for key in store.keys("reports/history/"):
        if not key.endswith(".parquet"):
            continue
        try:
            frame = pd.read_parquet(io.BytesIO(store.get(key) or b""),
                                    columns=["job_id", "session_id", "rank", "audit_time"])
        except (OSError, ValueError) as error:
            bad.append(f"{key}: {type(error).__name__}")
            continue
        rows.update(zip(frame["job_id"].astype(str), frame["session_id"].astype(str), frame["rank"].astype(int),
                        frame["audit_time"].astype(str), strict=True))
    return rows, bad


def verdicts(store: Store) -> dict[str, str]:
    import orjson

    data = store.get("reports/fleet.json")
    try:
        document = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:
        return {}
    return {str(job["job_id"]): str(job.get("verdict")) for job in document.get("jobs", [])}


def failed_jobs(store: Store) -> dict[str, str]:
    """fleet.json's failed jobs and their errors."""
    import orjson

    data = store.get("reports/fleet.json")
    try:
        document = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:
        return {}
    return {str(job["job_id"]): str(job.get("error"))[:300] for job in document.get("jobs", [])
            if job.get("status") == "failed"}


def alert_states(store: Store) -> dict[str, str]:
    """alerts.json's alerts: fingerprint -> status (firing, resolved); empty when it does not read."""
    import orjson

    data = store.get("reports/alerts.json")
    try:
        document = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:
        return {}
    return {str(item.get("alert")): str(item.get("status")) for item in document.get("alerts", [])}


def night_of(row: tuple[Any, ...]) -> int:
    return int(str(row[3])[8:10])  # audit_time 2026-10-0N ...


def compare_messages(result: Result, got: dict[int, Counter[Message]], want: dict[int, Counter[Message]],
                     window: dict[int, Counter[Message]], nights: int) -> None:
    """Night by night against the oracle: copies beyond its count are sent twice (inside the window when a
    killed audit had delivered them unrecorded), a message missing one night and arriving on a later one
    is late, one never arriving is never sent, and one the oracle never sent is unexpected."""
    missing: dict[int, Counter[Message]] = {night: Counter() for night in range(1, nights + 1)}
    extra: dict[int, Counter[Message]] = {night: Counter() for night in range(1, nights + 1)}
    for night in range(1, nights + 1):
        for key in set(got[night]) | set(want[night]):
            over, short = got[night][key] - want[night][key], want[night][key] - got[night][key]
            if short > 0:
                missing[night][key] = short
            if over > 0 and want[night][key] == 0:
                extra[night][key] = over
            elif over > 0:
                inside = min(over, window[night][key])
                result.dup_inside += inside
                result.dup_outside += over - inside
                if over - inside:
                    result.problems.append(f"night {night}: {key[0]} '{key[1][:90]}' {got[night][key]}x "
                                           f"(oracle {want[night][key]}x), outside the window")
    for night in range(1, nights + 1):
        for key, count in missing[night].items():
            for later in range(night + 1, nights + 1):
                late = min(count, extra[later][key])
                if late:
                    result.late += late
                    extra[later][key] -= late
                    count -= late
                    result.problems.append(f"night {night}: {key[0]} '{key[1][:90]}' sent late, on night {later}")
            if count:
                result.never_sent += count
                result.problems.append(f"night {night}: {key[0]} '{key[1][:90]}' never sent")
    for night in range(1, nights + 1):
        for key, count in (+extra[night]).items():
            result.unexpected += count
            result.problems.append(f"night {night}: {count}x {key[0]} '{key[1][:90]}': the oracle never sent it")


def compare_rows(result: Result, got: Counter[tuple[Any, ...]], want: Counter[tuple[Any, ...]]) -> None:
    for key in set(got) | set(want):
        if got[key] < want[key]:
            result.rows_lost += want[key] - got[key]
            result.problems.append(f"history row lost: {key}")
        elif got[key] > want[key]:
            result.rows_dup += got[key] - want[key]
            result.problems.append(f"history row {got[key]}x (oracle {want[key]}x): {key}")


# --- damages ------------------------------------------------------------------------------------------------


def _truncate(key: str) -> Callable[[Store], str]:
    def damage(store: Store) -> str:
        data = store.get(key) or b""
        store.put(key, data[: len(data) // 2])
        return f"{key} cut to {len(data) // 2} of {len(data)} bytes"
    return damage


def _zero(key: str) -> Callable[[Store], str]:
    def damage(store: Store) -> str:
        store.put(key, b"")
        return f"{key} emptied"
    return damage


def _delete(key: str) -> Callable[[Store], str]:
    def damage(store: Store) -> str:
        store.delete(key)
        return f"{key} deleted"
    return damage


def _garbage_lines(store: Store) -> str:
    key = "reports/notifications.jsonl"
    lines = (store.get(key) or b"").splitlines(keepends=True)
    middle = len(lines) // 2
    garbage = [b"\x00\xff not json at all\n", b'{"key": "half a line\n', b"]]]\n"]
    store.put(key, b"".join(lines[:middle] + garbage + lines[middle:] + [b"garbage at the end\n"]))
    return f"{key}: 4 garbage lines among its {len(lines)}"


def _torn_last_line(store: Store) -> str:
    key = "reports/notifications.jsonl"
    data = store.get(key) or b""
    head, _, last = data.rstrip(b"\n").rpartition(b"\n")
    store.put(key, head + b"\n" + last[: len(last) // 2])
    return f"{key}: last line cut to {len(last) // 2} of {len(last)} bytes"


def _zero_history(store: Store) -> str:
    key = next(key for key in store.keys("reports/history/") if key.endswith(".parquet"))
    store.put(key, b"")
    return f"{key} emptied"


def _stale_temporary(store: Store) -> str:
    data = store.get("reports/fleet.json") or b""
    store.put("reports/.fleet.json.k1ll3d.tmp", data[: len(data) // 3])
    return "reports/.fleet.json.k1ll3d.tmp written (a third of fleet.json)"


DAMAGES = (
    Damage("alerts-truncated", _truncate("reports/alerts.json")),
    Damage("alerts-zero", _zero("reports/alerts.json")),
    Damage("alerts-deleted", _delete("reports/alerts.json")),
    Damage("ledger-garbage", _garbage_lines),
    Damage("ledger-torn", _torn_last_line),
    Damage("history-zero", _zero_history, destroys_history=True),
    Damage("model-truncated", _truncate("reports/job-j/model.json")),
    Damage("stale-tmp", _stale_temporary, local_only=True),  # S3 writes are whole PUTs: no temporaries
    Damage("silences-truncated", _truncate("reports/silences.json")),
)
DAMAGE_TITLES = {
    "alerts-truncated": "reports/alerts.json truncated", "alerts-zero": "reports/alerts.json zero bytes",
    "alerts-deleted": "reports/alerts.json deleted", "ledger-garbage": "notifications.jsonl: garbage lines",
    "ledger-torn": "notifications.jsonl: a torn last line", "history-zero": "a zero-byte history file",
    "model-truncated": "reports/job-j/model.json truncated", "stale-tmp": "a stale reports/.fleet.json.XXXX.tmp",
    "silences-truncated": "reports/silences.json truncated (noisy-* silenced)",
}


# --- one storage root's nights ------------------------------------------------------------------------------


class NightRun:
    """Runs a Plan on a fresh storage root and scores it against the oracle."""

    def __init__(self, bench: Bench, store: Store, label: str, plan: Plan, result: Result,
                 oracle: Oracle | None) -> None:
        self.bench, self.store, self.plan, self.result, self.oracle = bench, store, plan, result, oracle
        self.runner = Runner(bench.work, bench.env, bench.receivers, store, label)
        self.messages: dict[int, Counter[Message]] = {}
        self.window: dict[int, Counter[Message]] = {}
        self.durations: dict[int, float] = {}
        self.verdicts: dict[int, dict[str, str]] = {}
        self.alerts: dict[int, dict[str, str]] = {}
        self.destroyed: Counter[tuple[Any, ...]] = Counter()

    def go(self) -> None:
        self.runner.silence()
        for night in range(1, self.plan.nights + 1):
            apply_night(self.store, self.bench.inputs, night)
            if self.plan.damage is not None and night == DAMAGE_BEFORE:
                self.damage(self.plan.damage)
            mark = self.bench.receivers.mark()
            self.window[night] = Counter()
            started = time.perf_counter()
            self.night(night)
            self.durations[night] = time.perf_counter() - started
            time.sleep(0.2)  # a message accepted just before the audit ended is recorded
            self.messages[night] = Counter(self.bench.receivers.since(mark))
            self.check_files(night)
            self.verdicts[night] = verdicts(self.store)
            self.alerts[night] = alert_states(self.store)
            self.check_failures(night)
        if self.oracle is not None:
            self.score()

    def damage(self, damage: Damage) -> None:
        if damage.destroys_history:
            self.destroyed, _ = history_rows(self.store)
        done = damage.apply(self.store)
        if damage.destroys_history:
            now, _ = history_rows(self.store)
            self.destroyed -= now
            self.result.rows_destroyed += sum(self.destroyed.values())
        self.result.problems.append(f"note: damaged before night {DAMAGE_BEFORE}: {done}")

    def night(self, night: int) -> None:
        if self.plan.concurrent:
            self.concurrent(night)
            return
        kill = self.plan.kills.get(night)
        if kill is None:
            self.expect(self.runner.run(night), 0, night)
            return
        killed = self.killed(night, kill)
        self.recover(night, killed, self.plan.lease.get(night, "same"))

    def expect(self, audit: Audit, rc: int, night: int, what: str = "audit") -> None:
        self.result.runs += 1
        if audit.rc != rc:
            self.result.bad_exits += 1
            self.result.problems.append(f"night {night}: {what} exit {audit.rc} (expected {rc}): "
                                        f"{' | '.join(audit.output(600).splitlines()[-4:])}")

    def ledger(self) -> bytes:
        """notifications.jsonl, every ledger segment and every archive: changed by any ledger write."""
        keys = ["reports/notifications.jsonl", *sorted(self.store.keys("reports/.ledger/")),
                *sorted(self.store.keys("reports/.ledger-archive/"))]
        return b"".join(self.store.get(key) or b"" for key in keys)

    def killed(self, night: int, kill: Kill) -> Audit:
        """The night's first audit, killed; a kill that lands inside the window marks its messages."""
        ledger = self.ledger()
        mark = self.bench.receivers.mark()
        extra = ("--engine", "threads", "--workers", "1") if kill.per_job else ()
        audit = self.runner.start(night, *extra, point=kill.point)
        if kill.fraction is not None:
            typical = self.bench.typical(self.store.kind, night)
            audit = self.runner.kill_after(audit, kill.fraction * typical)
        else:
            audit = self.runner.finish(audit)
        self.result.runs += 1
        if audit.rc == -signal.SIGKILL:
            self.result.kills += 1
        elif kill.fraction is not None and audit.rc == 0:
            self.result.missed += 1
        else:
            self.result.bad_exits += 1
            self.result.problems.append(f"night {night}: kill {kill.point or 'random'} not reached, exit {audit.rc}")
        time.sleep(0.1)
        sent = self.bench.receivers.since(mark)
        if sent and self.ledger() == ledger:
            self.window[night].update(sent)  # delivered, then killed before the ledger recorded it
        return audit

    def recover(self, night: int, killed: Audit, case: str) -> None:
        """Rerun at once; time from the kill to the next lease taken, by lease case."""
        if killed.killed_at is None:
            self.expect(self.runner.run(night), 0, night, "rerun")
            return
        record = read_lease(self.store)
        if case.startswith("other"):
            record = self.move_lease(record, night)
        watch = LeaseWatch(self.store, None if record is None else str(record.get("token")))
        if case == "other-wait":
            self.retry_until_leased(night)
        else:
            extra = ("--break-lease",) if case.endswith("break") else ()
            self.expect(self.runner.run(night, *extra), 0, night, "rerun")
        acquired = watch.stop()
        if acquired is None:
            self.result.problems.append(f"night {night}: no audit took the lease after the kill")
            return
        self.result.lease(case, acquired - killed.killed_at)
        if case == "other-wait" and record is not None:
            expires = datetime.fromisoformat(str(record["expires_at"])).timestamp()
            self.result.lease("other-blocked", expires - killed.killed_at)

    def move_lease(self, record: dict[str, Any] | None, night: int) -> dict[str, Any] | None:
        """The dead audit's lease record, rewritten to name another host (as if that host had died)."""
        import orjson

        if record is None:
            self.result.problems.append(f"night {night}: no lease left by the killed audit to move")
            return None
        moved = {**record, "host": OTHER_HOST, "owner": f"nightly-audit on {OTHER_HOST} pid {record.get('pid')}"}
        self.store.put(LEASE_KEY, orjson.dumps(moved))
        return moved

    def retry_until_leased(self, night: int) -> None:
        deadline = time.time() + 4 * TARGET_NEXT_RUN_S
        while True:
            audit = self.runner.run(night)
            self.result.runs += 1
            if audit.rc == 0:
                return
            if audit.rc != 1 or "holds the lease" not in audit.output() or time.time() > deadline:
                self.result.bad_exits += 1
                self.result.problems.append(f"night {night}: retry exit {audit.rc}: {audit.output(300)}")
                return
            time.sleep(1.0)

    def concurrent(self, night: int) -> None:
        first = self.runner.start(night)
        time.sleep(self.bench.rng.uniform(0.0, 0.1))
        second = self.runner.start(night)
        codes = sorted(int(self.runner.finish(audit).rc or 0) for audit in (first, second))
        self.result.runs += 2
        loser = first if first.rc == 1 else second
        if codes != [0, 1] or "holds the lease" not in loser.output():
            self.result.concurrent_bad += 1
            self.result.problems.append(f"night {night}: concurrent exits {codes}: {loser.output(300)}")

    def check_failures(self, night: int) -> None:
        failed = failed_jobs(self.store)
        self.result.failed += len(failed)
        for job, error in sorted(failed.items())[:3]:
            self.result.problems.append(f"after night {night}: {job} recorded as failed: {error}")

    def check_files(self, night: int) -> None:
        for line in damaged_files(self.store):
            if line not in self.result.damaged:
                self.result.problems.append(f"after night {night}: {line}")
            self.result.damaged.add(line)

    def score(self) -> None:
        assert self.oracle is not None
        compare_messages(self.result, self.messages, self.oracle.messages, self.window, self.plan.nights)
        rows, _ = history_rows(self.store)
        want: Counter[tuple[Any, ...]] = Counter()
        for night in range(1, self.plan.nights + 1):
            want.update(self.oracle.rows[night])
        compare_rows(self.result, rows, want - self.destroyed)
        final = verdicts(self.store)
        expected = self.oracle.verdicts[self.plan.nights]
        wrong = sorted(job for job in set(final) | set(expected) if final.get(job) != expected.get(job))
        self.result.fleet_wrong += len(wrong)
        if wrong:
            self.result.problems.append(f"fleet.json verdicts unlike the oracle's: {wrong[:8]}")
        states, want_states = self.alerts[self.plan.nights], self.oracle.alerts[self.plan.nights]
        unlike = sorted(key for key in set(states) | set(want_states) if states.get(key) != want_states.get(key))
        self.result.alerts_wrong += len(unlike)
        for key in unlike[:6]:
            self.result.problems.append(f"alerts.json after night {self.plan.nights}: {key} is "
                                        f"{states.get(key, 'absent')} (oracle: {want_states.get(key, 'absent')})")
        if len(unlike) > 6:
            self.result.problems.append(f"alerts.json: ... {len(unlike) - 6} more alerts unlike the oracle's")


# --- the bench ----------------------------------------------------------------------------------------------


class Bench:
    """The work folder, the Prefect server's environment, the receivers, the oracles."""

    def __init__(self, work: Path, env: dict[str, str], receivers: Receivers, inputs: Path, seed: int,
                 s3: MotoS3 | None) -> None:
        self.work, self.env, self.receivers, self.inputs, self.s3 = work, env, receivers, inputs, s3
        self.rng = random.Random(seed)
        self.oracles: dict[str, Oracle] = {}
        self.roots = 0

    def store(self, kind: str, name: str) -> Store:
        self.roots += 1
        label = f"{self.roots:03d}-{name}"
        if kind == "local":
            return LocalStore(self.work / "roots" / label)
        assert self.s3 is not None
        return self.s3.store(label)

    def plans(self, scenario: Scenario, result: Result) -> Iterator[Plan]:
        """The scenario's plans; for random kills, 5-night runs until that many kills have landed (a kill
        lands unless its audit was done first), at most twice the runs it should take."""
        yield from scenario.plans
        runs = 0
        while result.kills < scenario.random_kills and runs < 2 * scenario.random_kills // NIGHTS:
            runs += 1
            nights = range(1, min(NIGHTS, scenario.random_kills - result.kills) + 1)
            yield Plan(kills={night: Kill(fraction=self.rng.uniform(0.05, 0.95)) for night in nights})

    def typical(self, kind: str, night: int) -> float:
        return self.oracles[kind].durations[night]

    def oracle(self, kind: str) -> Oracle:
        store = self.store(kind, "oracle")
        result = Result()
        run = NightRun(self, store, f"{kind}-oracle", Plan(), result, None)
        run.go()
        if result.bad_exits or result.damaged:
            raise RuntimeError(f"the oracle run failed on {kind}: {result.problems}")
        rows, _ = history_rows(store)
        by_night: dict[int, Counter[tuple[Any, ...]]] = {night: Counter() for night in range(1, NIGHTS + 1)}
        for row, count in rows.items():
            by_night[night_of(row)][row] += count
        oracle = Oracle(messages=run.messages, rows=by_night, verdicts=run.verdicts, alerts=run.alerts,
                        durations=run.durations)
        self.oracles[kind] = oracle
        sent = sum(sum(counter.values()) for counter in run.messages.values())
        print(f"oracle {kind}: {sent} messages, {sum(rows.values())} history rows, nights "
              + ", ".join(f"{run.durations[night]:.1f}" for night in range(1, NIGHTS + 1)) + " s", flush=True)
        return oracle

    def scenario(self, scenario: Scenario, kind: str) -> Result:
        result = Result()
        if kind != "local" and any(plan.damage is not None and plan.damage.local_only for plan in scenario.plans):
            result.applicable = False
            result.problems.append("n/a: S3 writes are whole PUTs, they leave no temporary files")
            return result
        for number, plan in enumerate(self.plans(scenario, result), 1):
            store = self.store(kind, f"{scenario.name}-{number}")
            NightRun(self, store, f"{kind}-{scenario.name}-{number}", plan, result, self.oracles[kind]).go()
        return result


# --- the scenarios --------------------------------------------------------------------------------------------


def step_plans(points: Sequence[str]) -> tuple[Plan, ...]:
    plans = []
    for start in range(0, len(points), NIGHTS):
        chunk = points[start:start + NIGHTS]
        plans.append(Plan(kills={night: Kill(point=point) for night, point in enumerate(chunk, 1)}))
    return tuple(plans)


def scenarios(short: bool, rng: random.Random) -> list[Scenario]:
    if short:
        kills = {1: Kill(fraction=rng.uniform(0.2, 0.7)), 2: Kill(point="after:.commits/*:1"),
                 3: Kill(point="after:alerts.json:1"), 4: Kill(point="before:.ledger-archive/*:1"),
                 5: Kill(point="after:.ledger-archive/*:1")}
        return [Scenario("short", "5 kills over 5 nights: a random time, after the commit, after the claim, "
                         "before and after the ledger write", (Plan(kills=kills),))]
    found = [
        Scenario("random", "20 audits killed at random times (5-night runs until 20 kills landed), each rerun "
                 "at once", random_kills=20),
        Scenario("steps", f"a kill before and after each storage step ({len(STEP_POINTS)} points, one a night), "
                 "each rerun at once", step_plans(STEP_POINTS)),
        Scenario("concurrent", "two audits started 0-100 ms apart, every night", (Plan(concurrent=True),)),
        Scenario("lease", "killed; lease moved to another host (wait; --break-lease); same host --break-lease",
                 (Plan(nights=LEASE_NIGHTS, kills={night: Kill(point="after:fleet.json:1") for night in (1, 2, 3)},
                       lease={1: "other-wait", 2: "other-break", 3: "same-break"}),)),
    ]
    for damage in DAMAGES:
        found.append(Scenario(f"damage-{damage.name}", f"{DAMAGE_TITLES[damage.name]}, before night {DAMAGE_BEFORE}",
                              (Plan(nights=DAMAGE_NIGHTS, damage=damage),)))
    return found


# --- the report -----------------------------------------------------------------------------------------------


def _seconds(values: Sequence[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{max(values):.1f} max, {statistics.median(values):.1f} med"


ROWS: tuple[tuple[str, Callable[[Result], object]], ...] = (
    ("audits run", lambda r: r.runs),
    ("kills that landed", lambda r: r.kills),
    ("random kills that missed (audit done first)", lambda r: r.missed),
    ("messages sent twice, inside the window", lambda r: r.dup_inside),
    ("messages sent twice, outside the window", lambda r: r.dup_outside),
    ("messages sent late (on a later night)", lambda r: r.late),
    ("messages never sent", lambda r: r.never_sent),
    ("messages the oracle never sent", lambda r: r.unexpected),
    ("history rows lost", lambda r: r.rows_lost),
    ("history rows duplicated (or on another night)", lambda r: r.rows_dup),
    ("files left damaged", lambda r: len(r.damaged)),
    ("job-nights recorded as failed", lambda r: r.failed),
    ("fleet.json verdicts unlike the oracle's", lambda r: r.fleet_wrong),
    ("alerts.json alerts unlike the oracle's", lambda r: r.alerts_wrong),
    ("unexpected exit codes", lambda r: r.bad_exits),
)


def table(scenario: Scenario, results: dict[str, Result], kinds: Sequence[str]) -> list[str]:
    width = 60
    lines = [f"== {scenario.name}: {scenario.title}", " " * width + "".join(f"{kind:>20}" for kind in kinds)]

    def row(label: str, cell: Callable[[Result], object]) -> None:
        cells = [("n/a" if not results[kind].applicable else str(cell(results[kind]))) for kind in kinds]
        lines.append(f"  {label:<{width - 2}}" + "".join(f"{value:>20}" for value in cells))

    for label, cell in ROWS:
        row(label, cell)
    if any(plan.concurrent for plan in scenario.plans) or any(r.concurrent_bad for r in results.values()):
        row("nights not audited by exactly one of two", lambda r: r.concurrent_bad)
    if any(result.rows_destroyed for result in results.values()):
        row("history rows destroyed by the damage itself", lambda r: r.rows_destroyed)
    for case, label in LEASE_CASES.items():
        if any(case in result.lease_s for result in results.values()):
            row(f"next audit had the lease, s: {label}" if case != "other-blocked" else f"  {label}, s",
                lambda r, case=case: _seconds(r.lease_s.get(case, [])))
    for kind in kinds:
        for problem in results[kind].problems[:12]:
            lines.append(f"    {kind}: {problem}")
        if len(results[kind].problems) > 12:
            lines.append(f"    {kind}: ... {len(results[kind].problems) - 12} more")
    return lines


@dataclass(frozen=True)
class Target:
    text: str
    failing: Callable[[Result], bool]


TARGETS = (
    Target("messages sent twice outside the window: 0", lambda r: r.dup_outside > 0),
    Target("messages sent late: 0", lambda r: r.late > 0),
    Target("messages never sent: 0", lambda r: r.never_sent > 0),
    Target("messages the oracle never sent (a silenced job paged, say): 0", lambda r: r.unexpected > 0),
    Target("history rows lost: 0", lambda r: r.rows_lost > 0),
    Target("history rows duplicated: 0", lambda r: r.rows_dup > 0),
    Target("files left damaged: 0", lambda r: bool(r.damaged)),
    Target("job-nights recorded as failed: 0", lambda r: r.failed > 0),
    Target("fleet.json verdicts unlike the oracle's: 0", lambda r: r.fleet_wrong > 0),
    Target("alerts.json alerts unlike the oracle's (firing / resolved / absent): 0", lambda r: r.alerts_wrong > 0),
    Target("concurrent starts: exactly one audit works", lambda r: r.concurrent_bad > 0),
    Target("exit codes as expected (and every kill point reached)", lambda r: r.bad_exits > 0),
    Target(f"next audit within {TARGET_NEXT_RUN_S:.0f} s of a kill",
           lambda r: any(value > TARGET_NEXT_RUN_S for case, values in r.lease_s.items()
                         if case != "other-wait" for value in values)),
)


def verdict_lines(all_results: dict[str, dict[str, Result]]) -> tuple[list[str], bool]:
    lines = ["targets (every scenario, every storage):"]
    ok = True
    for target in TARGETS:
        failing = [f"{name}/{kind}" for name, results in all_results.items() for kind, result in results.items()
                   if result.applicable and target.failing(result)]
        ok = ok and not failing
        lines.append(f"  {target.text}: " + ("met" if not failing else f"NOT met ({', '.join(failing[:6])})"))
    return lines, ok


# --- set-up ---------------------------------------------------------------------------------------------------


def child_env(home: Path, api_url: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("PREFECT_", "AWS_", "STORMWATCH_"))}
    env.update(QUIET_PREFECT)
    env.update({"PREFECT_HOME": str(home), "PREFECT_API_URL": api_url,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(home / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"), "AWS_EC2_METADATA_DISABLED": "true"})
    return env


@contextmanager
def prefect_server(home: Path) -> Iterator[str]:
    """$PREFECT_API_URL when set, else a Prefect API server started here for the whole bench."""
    existing = os.environ.get("PREFECT_API_URL")
    if existing:
        yield existing
        return
    for name in [name for name in os.environ if name.startswith("PREFECT_")]:
        del os.environ[name]
    os.environ.update({**QUIET_PREFECT, "PREFECT_HOME": str(home)})
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    server.start(timeout=180)
    try:
        yield server.api_url
    finally:
        server.stop()


@contextmanager
def receivers() -> Iterator[Receivers]:
    import logging

    from tests.tasks.notify.servers import smtp_server, webhook_server

    logging.getLogger("mail.log").setLevel(logging.CRITICAL)  # a killed audit drops its SMTP session
    with webhook_server() as hook, smtp_server() as smtp:
        yield Receivers(hook, smtp)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="CI's form: 5 kills, local storage only")
    parser.add_argument("--storage", default=None, help="local,s3 (default both; --short: local)")
    parser.add_argument("--scenarios", default=None,
                        help="only these scenarios (comma-separated names or globs: damage-*)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="work in DIR and keep it (logs/, roots/)")
    return parser.parse_args(argv)


def run_scenarios(bench: Bench, chosen: Sequence[Scenario], kinds: Sequence[str],
                  work: Path) -> dict[str, dict[str, Result]]:
    """Each scenario on every storage, its table printed as soon as it is done (and its results saved
    as JSON under ``work/results/``)."""
    import orjson

    results: dict[str, dict[str, Result]] = {}
    (work / "results").mkdir(exist_ok=True)
    for item in chosen:
        results[item.name] = {}
        for kind in kinds:
            t0 = time.perf_counter()
            results[item.name][kind] = bench.scenario(item, kind)
            print(f"  {kind} {item.name}: {time.perf_counter() - t0:.0f} s", flush=True)
        print("\n" + "\n".join(table(item, results[item.name], kinds)) + "\n", flush=True)
        saved = {kind: {**asdict(result), "damaged": sorted(result.damaged)}
                 for kind, result in results[item.name].items()}
        (work / "results" / f"{item.name}.json").write_bytes(orjson.dumps(saved, option=orjson.OPT_INDENT_2))
    return results


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # tests.builders, tests.faults, in-tree stormwatch
    kinds = (args.storage or ("local" if args.short else "local,s3")).split(",")
    work = args.keep or Path(tempfile.mkdtemp(prefix="kill-bench-"))
    (work / "cwd").mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    patterns = (args.scenarios or "*").split(",")
    chosen = [item for item in scenarios(args.short, rng)
              if any(fnmatch.fnmatchcase(item.name, pattern) for pattern in patterns)]
    started = time.perf_counter()
    inputs = write_inputs(work)
    s3 = MotoS3() if "s3" in kinds else None
    try:
        with prefect_server(work / "prefect") as api_url, receivers() as rx:
            print(f"kill bench: {', '.join(kinds)}; Prefect API {api_url}; work {work}", flush=True)
            bench = Bench(work, child_env(work / "prefect", api_url), rx, inputs, args.seed, s3)
            for kind in kinds:
                bench.oracle(kind)
            results = run_scenarios(bench, chosen, kinds, work)
    finally:
        if s3 is not None:
            s3.stop()
    lines, ok = verdict_lines(results)
    print("\n".join(lines))
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        sys.exit(child_main(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
