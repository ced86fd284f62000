"""The ledger a notify step reads, night after night: the carried file against every line ever.

Each night brings a new run of each of ``--jobs`` job names (alerts_bench's real findings: every
tenth run clean, every tenth of another shape, so alerts resolve and fire again) and one audit's
notify step (``notify_step`` over a local storage root, a local webhook receiver and an SMTP server).
Printed per night as it runs: the ledger bytes the step read (``notifications.jsonl`` and the
nights' segments), the bytes of every line decided so far (what the step read when a fold kept
every line: the archives, plus an uncarried notifications.jsonl, plus the segments), and the
step's seconds, and the ledger bytes it wrote (the carried file and the night's archive).

    python bench/ledger_bench.py [--jobs 500] [--nights 60]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the in-tree packages, tests included
sys.path.insert(0, str(Path(__file__).resolve().parent))

from alerts_bench import DAY, NIGHT_1, fresh_storage, night, settings, shape_findings  # noqa: E402

from stormwatch.alerting.ledger_carry import carried_header  # noqa: E402
from stormwatch.tasks.notify.ledger_store import read_ledger_bytes  # noqa: E402
from stormwatch.tasks.notify.step import notify_step  # noqa: E402
from stormwatch.tasks.storage.local import LocalStorage  # noqa: E402
from stormwatch.tasks.storage.protocol import LEDGER_ARCHIVE_FOLDER, NOTIFICATIONS_KEY  # noqa: E402
from tests.tasks.notify.servers import smtp_server, webhook_server  # noqa: E402


def every_line_bytes(store: LocalStorage) -> int:
    """Bytes of every decision so far: the archives, an uncarried notifications.jsonl, the segments."""
    archived = sum(entry.size_bytes for entry in store.list_reports(LEDGER_ARCHIVE_FOLDER))
    read = read_ledger_bytes(store)
    base = store.read_report(NOTIFICATIONS_KEY) or b""
    segments = len(read.data or b"") - read.base_bytes
    return archived + (0 if carried_header(base) else len(base)) + segments


def ledger_files(store: LocalStorage) -> dict[Path, tuple[int, int, int]]:
    """The ledger's files (the file, segments, archives): inode, mtime and size of each."""
    paths = [store.reports_dir / NOTIFICATIONS_KEY, *store.reports_dir.glob(".ledger*/*.jsonl")]
    found = {}
    for path in paths:
        if path.is_file():
            info = path.stat()
            found[path] = (info.st_ino, info.st_mtime_ns, info.st_size)
    return found


def ledger_written(before: dict[Path, tuple[int, int, int]], after: dict[Path, tuple[int, int, int]]) -> int:
    """Bytes of the ledger files created or replaced between two :func:`ledger_files`."""
    return sum(item[2] for path, item in after.items() if before.get(path) != item)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500, help="job names (one new run of each a night)")
    parser.add_argument("--nights", type=int, default=60)
    args = parser.parse_args(argv)
    shapes = shape_findings()
    print(f"ledger bench: {args.jobs:,} job names, {args.nights} nights, one audit's notify step a night", flush=True)
    print(f"{'night':>5} {'read MB':>9} {'every line MB':>14} {'read/every':>11} {'written MB':>11} {'step s':>8} "
          f"{'sent':>6}", flush=True)
    with webhook_server() as hook, smtp_server() as smtp, tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        config = settings(hook.url, smtp.port)
        store = fresh_storage(Path(tmp) / "root")
        for number in range(1, args.nights + 1):
            findings = night(shapes, args.jobs, number)
            read_bytes = len(read_ledger_bytes(store).data or b"")
            before = ledger_files(store)
            start = time.perf_counter()
            summary = notify_step(store, findings, settings=config, now=NIGHT_1 + (number - 1) * DAY, overview=False)
            seconds = time.perf_counter() - start
            every = every_line_bytes(store)
            written = ledger_written(before, ledger_files(store))
            ratio = f"{read_bytes / every:.2f}" if every else "-"
            print(f"{number:>5} {read_bytes / 1e6:>9.2f} {every / 1e6:>14.2f} {ratio:>11} {written / 1e6:>11.2f} "
                  f"{seconds:>8.2f} {summary.get('sent', 0):>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
