"""The history store's two speed targets, measured side by side with them.

1. Updating history costs at most 5% of an audit: build one audit's rows from ``--jobs`` parsed
   model.json documents (diagnosed from stormlog-written jobs, then cloned under new job ids and
   fingerprints) and append them as one Parquet file to a local storage root; compared with
   ``--audit-seconds`` (default 13.3 s: fleet_bench's cold audit of 200 mixed jobs, README) or any
   audit time you measured. Shown with and without the documents' ``fleet`` member (without it,
   peaks come from scanning the per-rank timelines).
2. Reading a million history rows and building the analytics takes at most 2 s: ``--nights``
   audits of ``--jobs-per-night`` runs of ``--world-size`` ranks (30 × 520 × 64 = 998,400 rows)
   written as one file per night, then ``read_history`` (the analytics' columns) plus regressions,
   suspects and trends; the first run in the process (cold) and the best of ``--repeat``.

    python bench/history_bench.py [--jobs 200] [--audit-seconds 13.3] [--nights 30]
                                  [--jobs-per-night 520] [--world-size 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the in-tree packages, tests included

from stormwatch.diagnose import DiagnoseOptions, diagnose  # noqa: E402
from stormwatch.history import JobNamePattern, find_regressions, find_suspects, nightly_trends  # noqa: E402
from stormwatch.history.frame import ANALYTICS_COLUMNS  # noqa: E402
from stormwatch.history.rows import history_rows  # noqa: E402
from stormwatch.outputs.document import JobDocument  # noqa: E402
from stormwatch.tasks.history import append_history, read_history  # noqa: E402
from stormwatch.tasks.storage.open import open_storage  # noqa: E402
from stormwatch.tasks.storage.protocol import Storage, StorageSettings  # noqa: E402
from tests.builders import DEFAULT_ALERTS, write_multi_rank_job  # noqa: E402
from tests.stormwatch.history.synthetic import FIRST_NIGHT, synthetic_fleet  # noqa: E402

T = TypeVar("T")
SHAPES = 10  # distinct diagnosed jobs the audit's documents are cloned from


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def audit_documents(folder: Path, jobs: int, samples: int) -> list[JobDocument]:
    """``jobs`` model.json documents: SHAPES real diagnoses (8 ranks, alerts on half) cloned."""
    shapes = []
    for index in range(SHAPES):
        job_id = f"shape-{index}-0001"
        write_multi_rank_job(folder / job_id, job_id=job_id, world_size=8, samples=samples,
                             alerts=DEFAULT_ALERTS if index % 2 else ())
        result = diagnose([str(folder / job_id)], job_id=job_id, source_name=str(folder / job_id),
                          options=DiagnoseOptions(ranks="all"))
        shapes.append(JobDocument.from_json(result.model_json(), name=f"{job_id}/model.json"))
    return [dataclasses.replace(shapes[index % SHAPES], job_id=f"train-{index % 37:02d}-{index:04d}",
                                input_fingerprint=f"sha256:{index:064x}") for index in range(jobs)]


def append_seconds(storage: Storage, documents: list[JobDocument], repeat: int) -> tuple[float, float, int]:
    """Median seconds of (rows from documents, append) over ``repeat`` audits, and the rows per audit."""
    rows_s, append_s = [], []
    count = 0
    for attempt in range(repeat):
        when = FIRST_NIGHT + timedelta(minutes=attempt)
        seconds, table = timed(lambda when=when: history_rows(documents, job_names=JobNamePattern(), audit_time=when))
        rows_s.append(seconds)
        append_s.append(timed(lambda table=table, when=when: append_history(storage, table, audit_time=when))[0])
        count = table.num_rows
    return statistics.median(rows_s), statistics.median(append_s), count


def analytics_seconds(storage: Storage, as_of: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    out["read"], read = timed(lambda: read_history(storage, since=as_of - timedelta(days=30), until=as_of,
                                                   columns=ANALYTICS_COLUMNS))
    out["regressions"], _ = timed(lambda: find_regressions(read.rows))
    out["suspects"], _ = timed(lambda: find_suspects(read.rows, as_of=as_of))
    out["trends"], _ = timed(lambda: nightly_trends(read.rows))
    out["total"] = sum(out.values())
    out["rows"] = float(len(read.rows))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--samples", type=int, default=500, help="samples per rank of the diagnosed jobs")
    parser.add_argument("--audit-seconds", type=float, default=13.3)
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--jobs-per-night", type=int, default=520)
    parser.add_argument("--world-size", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="history-bench-") as tmp:
        root = Path(tmp)
        (root / "store").mkdir()
        storage = open_storage(StorageSettings(uri=str(root / "store")))
        (root / "store2").mkdir()
        storage2 = open_storage(StorageSettings(uri=str(root / "store2")))

        documents = audit_documents(root / "jobs", args.jobs, args.samples)
        bare = [dataclasses.replace(doc, fleet=None) for doc in documents]
        has_fleet = documents[0].fleet is not None
        print(f"1. history update of one {args.jobs}-job audit (8 ranks each, {args.samples} samples per rank), "
              f"local storage, median of {args.repeat}")
        budget = 0.05 * args.audit_seconds
        cases = [("documents as diagnosed" + ("" if has_fleet else " (no fleet member yet)"), documents),
                 ("without the fleet member", bare)]
        for label, docs in cases:
            rows_s, write_s, count = append_seconds(storage, docs, args.repeat)
            total = rows_s + write_s
            share = total / args.audit_seconds
            print(f"   {label:42s} rows {rows_s * 1000:7.1f} ms + append {write_s * 1000:6.1f} ms = "
                  f"{total * 1000:7.1f} ms ({count} rows) = {share:.2%} of a {args.audit_seconds:.1f} s audit  "
                  f"[target <= 5% = {budget * 1000:.0f} ms: {'ok' if share <= 0.05 else 'MISSED'}]")

        print(f"2. read + analytics: {args.nights} nights x {args.jobs_per_night} jobs x {args.world_size} ranks")
        seconds, fleet = timed(lambda: synthetic_fleet(nights=args.nights, jobs_per_night=args.jobs_per_night,
                                                       world_sizes=(args.world_size,), hosts=600, seed=1))
        write_s, _ = timed(lambda: [append_history(storage2, table, audit_time=when)
                                    for table, when in zip(fleet.nights, fleet.audit_times, strict=True)])
        rows = sum(table.num_rows for table in fleet.nights)
        print(f"   generated {rows:,} rows in {seconds:.2f} s; written as {args.nights} files in {write_s:.2f} s")
        runs = [analytics_seconds(storage2, fleet.as_of) for _ in range(max(1, args.repeat))]
        best = min(runs, key=lambda run: run["total"])
        for label, run in (("first run (cold)", runs[0]), (f"best of {len(runs)}", best)):
            print(f"   {label:18s} read {run['read']:.2f} s  regressions {run['regressions']:.2f} s  suspects "
                  f"{run['suspects']:.2f} s  trends {run['trends']:.2f} s  = {run['total']:.2f} s for "
                  f"{int(run['rows']):,} rows  [target <= 2 s: {'ok' if run['total'] <= 2 else 'MISSED'}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
