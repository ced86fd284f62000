"""Reading the history for one job name, as a post-job does: footer format, name-first, fetch threads.

    python bench/history_read_bench.py [--nights 30] [--files-per-night 13] [--rows 140] [--repeat 5]

Writes a history of ``--nights`` partitions of ``--files-per-night`` files of ``--rows`` rows each
(one file per audit batch, as the nightly audit commits them), every file carrying a commit's rows
in its footer (a ~150 kB JSON blob, as ``tasks/commits.py`` writes), in two footer formats:
  arrow-schema   ``pq.write_table`` as before: the key-value metadata, and again inside ARROW:schema
  kv-only        ``tasks.history.parquet_bytes`` now: the key-value metadata only
Then ``read_history(names={one job name})`` on each, in a fresh subprocess per variant:
  name-first     the file's job_name column first, the rest only where the name matches (now)
  whole          every wanted column of every file, filtered afterwards
  threads        local files fetched 8 at a time on threads (as S3 objects are) instead of in the
                 parsing thread (now: local files are read one by one where they are parsed)
Prints per variant the best of ``--repeat`` reads (s) and the process's RSS growth over the reads
(MB, 10^6 bytes: current RSS after minus before, after a warm-up read of the last night), rows found
checked equal.
Figures in bench/README.md ("Reading the history").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

FIRST = datetime(2026, 10, 1, 2, tzinfo=UTC)
VARIANTS = ("name-first", "whole", "name-first+threads")
READ_NAME = "train-00012"


def write_history(root: Path, *, nights: int, files: int, rows: int, arrow_schema: bool) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from stormwatch.history.schema import HISTORY_SCHEMA, audit_id, file_metadata, history_key
    from stormwatch.tasks.history import parquet_bytes

    rng = np.random.default_rng(0)
    commit = json.dumps({"rows": [{"job_id": f"train-{k:05d}", "pad": "x" * 1000} for k in range(140)]}).encode()
    for night in range(nights):
        when = FIRST + timedelta(days=night)
        for batch in range(files):
            names = [f"train-{k:05d}" for k in rng.integers(100, 1000, rows // 2) for _ in range(2)]
            if batch == night % files:  # the job name read runs once a night, in one batch (2 ranks)
                names[:2] = [READ_NAME, READ_NAME]
            columns = {}
            for field in HISTORY_SCHEMA:
                if field.name == "audit_time":
                    columns[field.name] = pa.array([when] * len(names), field.type)
                elif field.name in ("job_name",):
                    columns[field.name] = pa.array(names, field.type)
                elif field.name in ("job_id", "audit_id"):
                    columns[field.name] = pa.array([f"{name}-n{night:03d}" for name in names], field.type)
                elif pa.types.is_string(field.type):
                    columns[field.name] = pa.array([f"v{i % 7}" for i in range(len(names))], field.type)
                elif pa.types.is_boolean(field.type):
                    columns[field.name] = pa.array([i % 2 == 0 for i in range(len(names))], field.type)
                else:
                    columns[field.name] = pa.array(rng.integers(0, 2**31, len(names)), field.type)
            table = pa.table(columns, schema=HISTORY_SCHEMA)
            extra = {b"stormwatch.commit": commit}
            if arrow_schema:
                sink = pa.BufferOutputStream()
                pq.write_table(table.replace_schema_metadata({**file_metadata(), **extra}), sink, compression="zstd")
                data = sink.getvalue().to_pybytes()
            else:
                data = parquet_bytes(table, extra_metadata=extra)
            name = f"{audit_id(when, [('night', str(night))])}-b{batch:08x}"  # one audit, one file a batch
            path = root / "reports" / history_key(when, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


CHILD = r"""
import json, sys, time, types
import psutil
from datetime import datetime, timedelta, UTC
from stormwatch.history.frame import ANALYTICS_COLUMNS
from stormwatch.tasks import history as H
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import StorageSettings
root, variant, until, repeat = sys.argv[1], sys.argv[2], datetime.fromisoformat(sys.argv[3]), int(sys.argv[4])
storage = storage_for(StorageSettings(uri=root))
if "whole" in variant:
    parse = H._parse
    H._parse = lambda key, data, columns, names=None: parse(key, data, columns, None)
if "threads" in variant:  # local files fetched on 8 threads, as S3 objects are
    real = storage
    storage = types.SimpleNamespace(settings=types.SimpleNamespace(scheme="s3", max_concurrency=8),
                                    list_reports=real.list_reports, read_report=real.read_report)
H.read_history(storage, since=until, until=until, columns=ANALYTICS_COLUMNS, names={sys.argv[5]})  # warm-up: one night
process = psutil.Process()
before = process.memory_info().rss
times = []
for _ in range(repeat):
    start = time.perf_counter()
    read = H.read_history(storage, since=until - timedelta(days=90), until=until, columns=ANALYTICS_COLUMNS,
                          names={sys.argv[5]})
    times.append(time.perf_counter() - start)
print(json.dumps({"best_s": min(times), "rss_mb": (process.memory_info().rss - before) / 1e6,
                  "rows": len(read.rows), "files": len(read.keys)}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--files-per-night", type=int, default=13)
    parser.add_argument("--rows", type=int, default=140)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    until = FIRST + timedelta(days=args.nights - 1)
    print(f"history read bench: {os.cpu_count()} cores, {args.nights} nights x {args.files_per_night} files x "
          f"{args.rows} rows, one job name read, best of {args.repeat}")
    print(f"  {'format':13s} {'variant':20s} {'MB on disk':>10s} {'best s':>8s} {'RSS +MB':>8s} {'rows':>5s}")
    with tempfile.TemporaryDirectory(prefix="history-read-bench-") as tmp:
        found: set[int] = set()
        for fmt, arrow_schema in (("arrow-schema", True), ("kv-only", False)):
            root = Path(tmp) / fmt
            write_history(root, nights=args.nights, files=args.files_per_night, rows=args.rows,
                          arrow_schema=arrow_schema)
            size = sum(path.stat().st_size for path in (root / "reports").rglob("*.parquet")) / 1e6
            for variant in VARIANTS:
                out = subprocess.run([sys.executable, "-c", CHILD, str(root), variant, until.isoformat(),
                                      str(args.repeat), READ_NAME], capture_output=True, text=True, check=True)
                figures = json.loads(out.stdout.strip().splitlines()[-1])
                found.add(figures["rows"])
                print(f"  {fmt:13s} {variant:20s} {size:10.1f} {figures['best_s']:8.3f} {figures['rss_mb']:8.1f} "
                      f"{figures['rows']:5d}", flush=True)
        if len(found) != 1:
            print(f"rows differ between variants: {sorted(found)}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
