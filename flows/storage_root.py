"""The storage root a storage-only command acts on (``silence``, ``compact``), checked first.

Commands that only read and write storage run no Prefect flow, so they check the root themselves:
a malformed URI, a missing folder or a root that is no storage root is a usage error (2), a store
that cannot be reached is 1; either is one line on stderr, and nothing is written.
"""

from __future__ import annotations

import argparse
import sys

from stormwatch.flows.run_options import resolve_storage
from stormwatch.outputs.verdict import ExitCode
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.probe import StoreUnreachableError, survey_root
from stormwatch.tasks.storage.protocol import Storage, StorageError, StorageSettings


def usage(message: str) -> ExitCode:
    """``error: message`` on stderr; the usage exit code."""
    print(f"error: {message}", file=sys.stderr)
    return ExitCode.USAGE


def open_root(args: argparse.Namespace) -> Storage | ExitCode:
    """The storage of ``--storage`` (or ``$STORMWATCH_STORAGE``) and ``--endpoint-url``, or the exit
    code after one line saying why not. An empty root is a new fleet, accepted."""
    uri = resolve_storage(args)
    if not uri:
        return usage("no storage: pass --storage or set STORMWATCH_STORAGE")
    try:
        settings = StorageSettings(uri=uri, endpoint_url=args.endpoint_url)
        found = survey_root(settings)
    except StoreUnreachableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.ERROR
    except (ValueError, StorageError) as exc:
        return usage(str(exc))
    if not (found.has_jobs_folder or found.has_reports_folder or found.is_empty):  # a wrong root: write nothing
        return usage(f"{found.root} is not a storage root: it has no {found.jobs_prefix}/ or "
                     f"{settings.reports_prefix}/ (expected {found.jobs}<job_id>/…); {found.found_instead()}")
    return storage_for(settings)
