"""``stormwatch compact --storage URI``: fold the post-jobs' commits into fleet.json and the index now.

A post-job rewrites nothing fleet-wide (:mod:`stormwatch.tasks.compact`); the nightly audit folds
its commit in, and so does this command, for a fleet that wants post-job results on the index
sooner. It takes the storage's audit lease, waiting up to ``--lease-wait`` seconds (then exit 1,
nothing written), folds every pending commit, clears them and prints how many; a damaged commit
object is moved under ``reports/damaged/`` and named (its job is diagnosed again by the next
audit). A root that is not a storage root is a usage error (2). No Prefect flow runs: it only reads
and writes storage.
"""

from __future__ import annotations

import argparse
import sys

from stormwatch.flows.post_job_cmd import DEFAULT_LEASE_WAIT_S, lease_wait_s
from stormwatch.flows.preflight import PreflightError
from stormwatch.flows.storage_root import open_root, usage
from stormwatch.outputs.verdict import ExitCode
from stormwatch.tasks.storage.lease import AUDIT_LEASE, acquire_waiting, default_owner, holder


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser("compact", help="fold post-job results into fleet.json and the index now")
    parser.add_argument("--storage", default=None, metavar="URI",
                        help="storage root: a folder or s3://bucket/prefix (default: $STORMWATCH_STORAGE)")
    parser.add_argument("--endpoint-url", default=None, metavar="URL", help="S3-compatible endpoint")
    parser.add_argument("--lease-wait", type=float, default=DEFAULT_LEASE_WAIT_S, metavar="SECONDS",
                        help=f"wait up to SECONDS for an audit holding the lease (default {DEFAULT_LEASE_WAIT_S:g}); "
                             "then exit 1, nothing written")
    parser.set_defaults(run=run_compact)


def run_compact(args: argparse.Namespace) -> int:
    try:
        wait_s = lease_wait_s(args)
    except PreflightError as exc:
        return int(usage(str(exc)))
    storage = open_root(args)
    if isinstance(storage, ExitCode):
        return int(storage)
    lease = acquire_waiting(storage, name=AUDIT_LEASE, owner=default_owner("compact"), wait_s=wait_s)
    if lease is None:
        busy = holder(storage, name=AUDIT_LEASE)
        print(f"error: nothing folded after waiting {wait_s:g} s: another audit holds the lease "
              f"{busy.describe() if busy else '(released just now)'}", file=sys.stderr)
        return int(ExitCode.ERROR)
    from stormwatch.tasks.compact import compact  # pandas and the publishing code: only once the lease is ours

    try:
        with lease.kept_alive():
            done = compact(storage, storage_uri=storage.settings.uri)
    finally:
        lease.release()
    for line in done.repaired:
        print(f"repaired: {line}")
    for line in done.history:
        print(line)
    if not done.folded:
        print("nothing to fold: fleet.json holds every committed job")
    else:
        noun = "commit" if len(done.folded) == 1 else "commits"
        print(f"folded {len(done.folded)} {noun} ({done.jobs} jobs) into fleet.json, fleet.parquet and the index")
    return int(ExitCode.CLEAN)
