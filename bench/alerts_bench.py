"""The alert state (``reports/alerts.json``) of a fleet of N jobs: its size, and what an audit does with it.

Findings are real: the notify tests' model.json documents (jobs written by stormlog's own writers,
diagnosed by the engine: an alerts job with an OOM, collective jobs with and without a missing rank,
hostile telemetry strings, a warning-only job, a job of missing ranks), read with
``JobFinding.from_document`` and cloned under ``--jobs`` job names (one run per name a night, 2-3
alerts a job). Night 1 is notified with a local webhook receiver and an SMTP server (aiosmtpd), so
the state holds what real targets leave (a Slack and an email target per alert). Night 2 brings the
next runs: every tenth job clean (its alerts resolve), every tenth from another shape (alerts
resolve and fire), the rest the same findings again.

Timed, best of ``--repeat``: ``read_book`` of night 1's alerts.json; ``observe`` + ``advance`` with
night 2's findings; ``to_bytes`` of the advanced state; their sum (``state_s``: ``read_book`` pauses
the garbage collector, whose deferred work then lands in ``advance``); and the notify step end to end
(``notify_step`` over a local storage root: ledger, alert state, routes, claims, sends, commit,
fleet.json and the index) for the first audit (no state) and the next one (night 2 over night 1's
state). fleet.json starts with no rows (the index renders only its alerts section).

``--save FILE`` keeps the figures (JSON); ``--before FILE`` prints them beside this run's, so a run
on the code before a change and one after show side by side. ``--profile`` prints where the next
audit's step spends its time (cProfile, by cumulative time) for the largest N.

    python bench/alerts_bench.py [--jobs 1000,5000] [--repeat 3] [--save F] [--before F] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the in-tree packages, tests included

from stormwatch.alerting.alert_file import read_book  # noqa: E402
from stormwatch.alerting.alert_state import advance  # noqa: E402
from stormwatch.alerting.findings import JobFinding  # noqa: E402
from stormwatch.alerting.observations import observe  # noqa: E402
from stormwatch.history.job_names import JobNamePattern  # noqa: E402
from stormwatch.tasks.notify.dispatch import notify_jobs  # noqa: E402
from stormwatch.tasks.notify.secrets import SecretRef  # noqa: E402
from stormwatch.tasks.notify.settings import NotifySettings  # noqa: E402
from stormwatch.tasks.notify.step import notify_step  # noqa: E402
from stormwatch.tasks.publish import publish_fleet  # noqa: E402
from stormwatch.tasks.storage.local import LocalStorage  # noqa: E402
from stormwatch.tasks.storage.protocol import ALERTS_KEY, StorageSettings  # noqa: E402
from tests.stormwatch.alerting.documents import documents  # noqa: E402
from tests.tasks.notify.servers import smtp_server, webhook_server  # noqa: E402

T = TypeVar("T")
NIGHT_1 = datetime(2026, 11, 1, 2, tzinfo=UTC)
DAY = timedelta(days=1)
DAY_NS = 86_400 * 10**9
#: Shapes cloned in turn (alerts-with-OOM and collective-with-missing-rank twice: three alerts each).
SHAPES = ("alerts", "collective", "collective_missing", "hostile", "alerts", "warning_only", "collective_missing",
          "missing")
NAMES = JobNamePattern()
FIGURES = ("alerts", "bytes", "bytes_per_alert", "read_s", "advance_s", "write_s", "state_s", "step_first_s",
           "step_next_s", "bytes_next")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def shape_findings() -> dict[str, JobFinding]:
    """The diagnosed documents' findings by shape name (``clean`` too)."""
    return {name: JobFinding.from_document(documents()[name], report_url=None) for name in {*SHAPES, "clean"}}


def night(shapes: dict[str, JobFinding], jobs: int, number: int) -> list[JobFinding]:
    """Night ``number``'s runs of ``jobs`` job names (after night 1: every tenth clean, every tenth another shape)."""
    out = []
    for index in range(jobs):
        name = shape = SHAPES[index % len(SHAPES)]
        if number > 1 and index % 10 == 0:
            shape = "clean"
        elif number > 1 and index % 10 == 1:
            shape = SHAPES[(index + 3) % len(SHAPES)]
        base = shapes[shape]
        job_id = f"{name}-j{index:05d}-{number:04d}"
        started = None if base.started_at_ns is None else base.started_at_ns + number * DAY_NS + index
        out.append(replace(base, job_id=job_id, started_at_ns=started,
                           report_url=f"https://fleet.example/reports/{job_id}/report.html"))
    return out


def settings(webhook_url: str, smtp_port: int) -> NotifySettings:
    return NotifySettings(slack_webhook=SecretRef.held(webhook_url, flag="--slack-webhook"),
                          smtp_url=SecretRef.held(f"smtp://127.0.0.1:{smtp_port}", flag="--smtp-url"),
                          email_to=("oncall@example.com",), email_from="stormwatch@example.com",
                          backoff_s=0.001, timeout_s=30.0)


def fresh_storage(folder: Path) -> LocalStorage:
    (folder / "jobs").mkdir(parents=True)
    store = LocalStorage(StorageSettings(uri=str(folder)))
    publish_fleet(store, [], generated_at=NIGHT_1, storage_uri=str(folder))
    return store


def step_seconds(tmp: Path, first: list[JobFinding], second: list[JobFinding], config: NotifySettings,
                 repeat: int, profile: bool) -> tuple[float, float, int]:
    """Best seconds of the first audit's and the next audit's notify step, and the next state's bytes."""
    firsts, nexts = [], []
    size = 0
    for attempt in range(repeat):
        store = fresh_storage(tmp / f"store-{attempt}")
        firsts.append(timed(lambda store=store: notify_step(store, first, settings=config, now=NIGHT_1))[0])
        if profile and attempt == repeat - 1:
            profiler = cProfile.Profile()
            profiler.enable()
        seconds, summary = timed(lambda store=store: notify_step(store, second, settings=config, now=NIGHT_1 + DAY))
        if profile and attempt == repeat - 1:
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
            print(out.getvalue())
        nexts.append(seconds)
        size = len(store.read_report(ALERTS_KEY) or b"")
        if summary.get("problems"):
            print(f"   problems: {summary['problems']}")
    return min(firsts), min(nexts), size


def measure(jobs: int, repeat: int, config: NotifySettings, shapes: dict[str, JobFinding], *, step: bool,
            profile: bool) -> dict[str, float]:
    first, second = night(shapes, jobs, 1), night(shapes, jobs, 2)
    state = notify_jobs(first, ledger=None, settings=config, now=NIGHT_1).alerts
    book = read_book(state)
    assert not book.problems, book.problems
    out: dict[str, float] = {"alerts": len(book.records), "bytes": len(state)}
    out["bytes_per_alert"] = out["bytes"] / max(1, out["alerts"])
    reads, advances, writes = [], [], []
    for _ in range(repeat):
        seconds, book = timed(lambda: read_book(state))
        reads.append(seconds)
        seconds, advanced = timed(lambda book=book: advance(book, observe(second, names=NAMES, known_runs=book.runs,
                                                                          fleet_evaluated=False), now=NIGHT_1 + DAY))
        advances.append(seconds)
        writes.append(timed(lambda advanced=advanced: advanced[0].to_bytes())[0])
    out.update(read_s=min(reads), advance_s=min(advances), write_s=min(writes))
    if step:
        with tempfile.TemporaryDirectory(prefix="alerts-bench-") as tmp:
            out["step_first_s"], out["step_next_s"], size = step_seconds(Path(tmp), first, second, config, repeat,
                                                                         profile)
            out["bytes_next"] = size
    return out


def cell(name: str, value: float | None) -> str:
    if value is None:
        return "-"
    if name.endswith("_s"):
        return f"{value * 1000:.0f} ms"
    if name.startswith("bytes") and value >= 10_000:
        return f"{value / 1e6:.2f} MB"
    return f"{value:,.0f}"


def with_sum(figures: dict[str, float]) -> dict[str, float]:
    """``state_s``: read + advance + write (a pause of the collector in one moves its work to the next)."""
    parts = ("read_s", "advance_s", "write_s")
    return {**figures, "state_s": sum(figures[name] for name in parts)} if all(n in figures for n in parts) else figures


def report(figures: dict[str, dict[str, float]], before: dict[str, dict[str, float]] | None) -> None:
    print(f"{'jobs':>6} {'figure':<16} {'before':>10} {'after':>10} {'after/before':>13}")
    for jobs, found in figures.items():
        now, old = with_sum(found), with_sum((before or {}).get(jobs, {}))
        for name in FIGURES:
            mine, theirs = now.get(name), old.get(name)
            ratio = f"{mine / theirs:.2f}x" if mine is not None and theirs else ""
            print(f"{jobs:>6} {name:<16} {cell(name, theirs):>10} {cell(name, mine):>10} {ratio:>13}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default="1000,5000", help="comma-separated fleet sizes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--save", type=Path, help="write this run's figures here (JSON)")
    parser.add_argument("--before", type=Path, help="figures saved by an earlier run, printed beside")
    parser.add_argument("--skip-step", action="store_true", help="no end-to-end notify step")
    parser.add_argument("--profile", action="store_true", help="profile the next audit's step (largest N)")
    args = parser.parse_args(argv)
    sizes = [int(item) for item in args.jobs.split(",") if item.strip()]
    shapes = shape_findings()
    figures: dict[str, dict[str, float]] = {}
    with ExitStack() as stack:
        hook = stack.enter_context(webhook_server())
        mail = stack.enter_context(smtp_server())
        config = settings(hook.url, mail.port)
        for jobs in sizes:
            figures[str(jobs)] = measure(jobs, args.repeat, config, shapes, step=not args.skip_step,
                                         profile=args.profile and jobs == max(sizes))
            print(f"{jobs} jobs: {orjson.dumps(figures[str(jobs)]).decode()}", flush=True)
    before = orjson.loads(args.before.read_bytes()) if args.before else None
    report(figures, before)
    if args.save:
        args.save.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2) + b"\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
