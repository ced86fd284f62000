"""Fleet index at fleet scale: fleet.json and index.html sizes, render time, time to a usable page.

    python bench/index_bench.py [--jobs 1000,10000] [--repeat 3] [--seed 0] [--keep DIR]

For each fleet size, builds ``FleetRow``s like an audit's (about 80% diagnosed, 10%
skipped, 6% failed, 4% refused; verdicts from clean to critical and empty; indicators
with phase paths and confidences; missing ranks; errors up to a few hundred characters;
job ids of 40-110 characters, one in 50 carrying markup such as ``</script>``, ``<!--``
and ``"><img onerror>``), turns them into fleet.json with the real ``fleet_document``
adds issue 16's fleet members (:func:`with_fleet_intelligence`: trends, regressions, suspect
hosts, coverage, per-job coverage and outlier ranks) and prints, side by side:
  fleet.json   bytes of ``orjson.dumps(doc, option=OPT_INDENT_2)`` (as published)
  index.html   bytes of ``render_index(doc)`` as UTF-8
  render       ``render_index(doc)``, best of ``--repeat`` (seconds)
  ready        headless Chromium (Playwright, /usr/bin/chromium), a fresh context per round:
               ms from navigation start (``performance.now()``) until the table is usable:
               DOMContentLoaded (the inline script has run), the page's ``data-ready``
               marker when its script sets one, the first row laid out, then one frame
               painted. Best and worst of ``--repeat``.
  filter/sort  ms for one filter keystroke that finds the last job by its id, and for one
               header click sorting by job id, each until the next frame (best of the rounds).
Targets (issue 15) at 10,000 jobs: index.html <= 5 MB (MB = 10^6 bytes) and ready < 2 s in
every round (the worst); the script prints "met" / "NOT met". Figures only: nothing here is asserted.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]  # in-tree stormwatch when run from a checkout
from stormwatch.outputs.fleet import FleetRow, JobStatus, fleet_document  # noqa: E402
from stormwatch.outputs.verdict import VerdictStatus  # noqa: E402
from stormwatch.reports import render_index  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TARGET_JOBS = 10_000
TARGET_HTML_BYTES = 5 * 10**6
TARGET_READY_S = 2.0
START_NS = 1_764_460_800 * 10**9  # 2025-11-30 00:00 UTC
HOSTILE_IDS = ("</script><script>alert(1)</script>", "<!--", '"><img src=x onerror=alert(1)>',
               "\u2028&amp;\u2029", "</SCRIPT ", "${x}`'")
SIGNALS = ("gap:transient_spike", "gap:persistent_drift", "collective:collective_confident",
           "collective:collective_likely", "alert:oom", "alert:memory_pressure", "allocator:fragmentation")
TEAMS = ("nlp", "vision", "speech", "recsys", "rl", "infra-canary")
MODELS = ("llama-70b-pretrain", "vit-huge-finetune", "whisper-large-distill", "dlrm-v3-sweep", "ppo-atari-ablation")
ERRORS = (
    "OSError: truncated segment-{n:06d}.jsonl (read 1048576 of 4194304 bytes)",
    "LimitExceeded: rank_{r}/telemetry.jsonl is 12.4 GiB, above --max-artifact-bytes 8 GiB",
    "botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the GetObject operation "
    "(reached max retries: 4): Please reduce your request rate. s3://fleet-telemetry/jobs/{job}/rank_{r}/",
)
REFUSALS = ("job id contains '..'", "job id contains a control character", "job id contains '%2f'")


def _job_id(rng: random.Random, index: int) -> str:
    team, model = rng.choice(TEAMS), rng.choice(MODELS)
    job = f"{team}-{model}-2025-11-{1 + index % 30:02d}T{index % 24:02d}-run-{index:05d}-{rng.getrandbits(64):016x}"
    return f"{job}-{rng.choice(HOSTILE_IDS)}" if rng.random() < 0.02 else job


def _indicator(rng: random.Random, severity: str, ranks: int) -> dict[str, Any]:
    return {"rank": rng.randrange(ranks), "signal": rng.choice(SIGNALS), "severity": severity,
            "timestamp_ns": START_NS + rng.randrange(10**9, 86_400 * 10**9),
            "phase_path": f"train / epoch {rng.randrange(40)} / step {rng.randrange(100_000)}",
            "confidence": round(rng.random(), 3) if rng.random() < 0.6 else None}


def _options() -> dict[str, Any]:
    """A diagnosed row's recorded diagnose options, when this checkout's FleetRow carries them."""
    if "options" not in FleetRow.__dataclass_fields__:
        return {}
    return {"options": {"ranks": None, "session_id": None, "preset": "medium", "engine_version": "0.1.0"}}


def fleet_rows(count: int, *, seed: int = 0) -> list[FleetRow]:
    """``count`` rows as an audit of that many jobs would hand to ``fleet_document``."""
    rng = random.Random(seed)
    verdicts = [VerdictStatus.CLEAN] * 50 + [VerdictStatus.INFO] * 10 + [VerdictStatus.WARNING] * 20 + \
        [VerdictStatus.CRITICAL] * 15 + [VerdictStatus.EMPTY] * 5
    diagnosed_at = datetime(2025, 11, 30, 2, tzinfo=UTC)
    rows = []
    for index in range(count):
        job_id, draw = _job_id(rng, index), rng.random()
        if draw >= 0.90:
            refused = draw >= 0.96
            error = rng.choice(REFUSALS) if refused else rng.choice(ERRORS).format(
                n=rng.randrange(1000), r=rng.randrange(64), job=job_id)
            rows.append(FleetRow(job_id=job_id, status=JobStatus.REFUSED if refused else JobStatus.FAILED,
                                 error=error))
            continue
        verdict = rng.choice(verdicts)
        expected = rng.choice((1, 8, 8, 16, 64, 256, 1024))
        missing = tuple(sorted(rng.sample(range(expected), min(expected - 1, rng.randrange(1, 12))))) \
            if verdict in (VerdictStatus.WARNING, VerdictStatus.CRITICAL) and rng.random() < 0.3 else ()
        severity = verdict.severity
        earliest = _indicator(rng, severity.value, expected) if severity is not None else None
        worst = _indicator(rng, severity.value, expected) if earliest is not None and rng.random() < 0.5 else earliest
        present = 0 if verdict is VerdictStatus.EMPTY else expected - len(missing)
        rows.append(FleetRow(
            **_options(),
            job_id=job_id, status=JobStatus.SKIPPED if draw >= 0.80 else JobStatus.DIAGNOSED, verdict=verdict,
            exit_code=3 if verdict is VerdictStatus.CRITICAL else 5 if verdict is VerdictStatus.EMPTY else 0,
            summary=f"{verdict.value}: {present}/{expected} ranks present", earliest=earliest, most_severe=worst,
            ranks_present=present, ranks_expected=expected, missing_ranks=missing,
            diagnosed_at=(diagnosed_at - timedelta(seconds=rng.randrange(86_400 * 30))).isoformat(),
            input_fingerprint=f"sha256:{rng.getrandbits(256):064x}", report=f"{job_id}/report.html",
        ))
    return rows


def with_fleet_intelligence(document: dict[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """``document`` with issue 16's members as an audit with history writes them: 30 nights of trends,
    regressions (1 job in 100), suspect hosts, the fleet's coverage, and per diagnosed job its coverage
    and, for 1 job in 20, outlier ranks. Members already there are kept."""
    rng = random.Random(seed + 16)
    jobs = document["jobs"]
    diagnosed = [job for job in jobs if job.get("verdict") is not None]
    for job in diagnosed:
        expected, present = job.get("ranks_expected") or 0, job.get("ranks_present") or 0
        job.setdefault("coverage", {"expected_ranks": expected, "present_ranks": present,
                                    "percent": 100.0 * present / expected if expected else None,
                                    "sessions": present, "sessions_without_stop": 0, "schema_versions": {"3": present},
                                    "collectors": {"stormlog.cuda_tracker": present}, "load_warnings": 0})
        if rng.random() < 0.05 and expected > 1 and not job.get("outlier_ranks"):
            job["outlier_ranks"] = [{"rank": rng.randrange(expected), "metric": "peak_reserved_bytes",
                                     "value_bytes": 70 * 2**30, "median_bytes": 40 * 2**30, "robust_z": 7.5}]
    nights = [(datetime(2025, 11, 1, tzinfo=UTC) + timedelta(days=day)).date().isoformat() for day in range(30)]
    document.setdefault("trends", [{"night": night, "jobs": 330, "critical": 50, "warning": 66, "info": 33,
                                    "clean": 165, "empty": 16, "p95_peak_reserved_bytes": (60 + day) * 2**30}
                                   for day, night in enumerate(nights)])
    document.setdefault("regressions", [
        {"job_id": job["job_id"], "job_name": job["job_id"][:30], "metric": "peak_reserved_bytes",
         "value_bytes": 48 * 2**30, "baseline_bytes": 40 * 2**30, "change_pct": 20.0, "baseline_runs": 7}
        for job in diagnosed[:: 100]])
    document.setdefault("suspect_hosts", [
        {"host": f"gpu-node-{index:04d}", "device_id": index % 8, "jobs": 40, "anomalous_jobs": 20, "rate": 0.5,
         "fleet_rate": 0.15} for index in range(25)])
    document.setdefault("coverage", {"jobs": len(jobs), "expected_ranks": 10**6, "present_ranks": 990_000,
                                     "percent": 99.0, "sessions": 990_500, "sessions_without_stop": 120,
                                     "schema_versions": {"3": 900_000, "4": 90_000},
                                     "collectors": {"stormlog.cuda_tracker": 990_000}, "load_warnings": 42})
    return document


def _best(repeat: int, call: Any) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


_NEXT_FRAME = "() => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)))"
_READY = """() => {
  if (document.readyState === 'loading') { return false; }
  const marks = Array.from(document.querySelectorAll('script:not([type])'))
    .some(script => script.textContent.includes('dataset.ready'));
  if (marks && document.body.dataset.ready === undefined) { return false; }
  const row = document.querySelector('#jobs-table tbody tr:not([hidden])');
  return row !== null && row.getBoundingClientRect().height > 0;
}"""
_INTERACT = """async ([selector, value]) => {
  const control = document.querySelector(selector);
  const started = performance.now();
  if (control.tagName === 'BUTTON') { control.click(); } else {
    control.value = value; control.dispatchEvent(new Event('input', {bubbles: true}));
  }
  await new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)));
  return performance.now() - started;
}"""


def browser_times(browser: Any, path: Path, last_job: str, repeat: int) -> dict[str, list[float]]:
    """Per round (fresh context): ready ms since navigation start, then one filter and one sort, ms."""
    times: dict[str, list[float]] = {"ready": [], "filter": [], "sort": []}
    for _ in range(repeat):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error, errors=errors: errors.append(str(error)))
        page.goto(path.resolve().as_uri(), wait_until="commit")
        page.wait_for_function(_READY, polling="raf", timeout=120_000)
        page.evaluate(_NEXT_FRAME)
        times["ready"].append(page.evaluate("performance.now()"))
        times["filter"].append(page.evaluate(_INTERACT, ["#filter", last_job]))
        if page.locator("#jobs-table tbody tr:not([hidden])").first.inner_text().find(last_job[:40]) < 0:
            errors.append("filtering by the last job's id did not show it first")
        page.evaluate(_INTERACT, ["#filter", ""])
        times["sort"].append(page.evaluate(_INTERACT, ["th[data-key='job'] button", None]))
        context.close()
        if errors:
            raise RuntimeError(f"{path}: {errors}")
    return times


def _mb(size: int) -> str:
    return f"{size / 10**6:.2f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default="1000,10000", help="fleet sizes, comma separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="write the pages here (default: a temp dir, removed)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    sizes = [int(size) for size in args.jobs.split(",")]
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as playwright:
        out = args.keep or Path(scratch)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for size in sizes:
            rows = fleet_rows(size, seed=args.seed)
            document = with_fleet_intelligence(fleet_document(rows, generated_at=datetime(2025, 11, 30, 3, tzinfo=UTC),
                                                              storage="s3://fleet-telemetry/stormwatch"),
                                               seed=args.seed)
            published = orjson.dumps(document, option=orjson.OPT_INDENT_2)
            html = render_index(document)
            path = out / f"fleet-{size}" / "index.html"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(html, encoding="utf-8")
            (path.parent / "fleet.json").write_bytes(published)
            last_job = document["jobs"][-1]["job_id"]
            results[size] = {"json": len(published), "html": len(html.encode("utf-8")),
                             "render": _best(args.repeat, lambda document=document: render_index(document)),
                             **browser_times(browser, path, last_job, args.repeat)}
        browser.close()
    _report(results, args.repeat)


def _report(results: dict[int, dict[str, Any]], repeat: int) -> None:
    print(f"{'jobs':>7} {'fleet.json':>11} {'index.html':>11} {'render':>9} {'ready best':>11} {'ready worst':>12} "
          f"{'filter':>8} {'sort':>8}")
    for size, row in results.items():
        print(f"{size:>7,} {_mb(row['json']):>11} {_mb(row['html']):>11} {row['render']:>8.3f}s "
              f"{min(row['ready']):>9.0f}ms {max(row['ready']):>10.0f}ms {min(row['filter']):>6.0f}ms "
              f"{min(row['sort']):>6.0f}ms")
    print(f"(render: best of {repeat}; ready: ms since navigation start, {repeat} fresh contexts; "
          "filter/sort: one action until the next frame, best)")
    target = results.get(TARGET_JOBS)
    if target is None:
        print(f"targets apply at {TARGET_JOBS:,} jobs: not measured")
        return
    size_met, ready_met = target["html"] <= TARGET_HTML_BYTES, max(target["ready"]) / 1000 < TARGET_READY_S
    print(f"target at {TARGET_JOBS:,} jobs: index.html <= {_mb(TARGET_HTML_BYTES)}: {_mb(target['html'])} "
          f"{'met' if size_met else 'NOT met'}")
    print(f"target at {TARGET_JOBS:,} jobs: ready < {TARGET_READY_S:.0f} s: {min(target['ready']) / 1000:.2f} s best, "
          f"{max(target['ready']) / 1000:.2f} s worst: {'met' if ready_met else 'NOT met'} (judged on the worst)")


if __name__ == "__main__":
    main()
