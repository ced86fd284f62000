"""What ``audit``, ``serve`` and ``post-job`` check before Prefect is imported or started, each
answer in one line (``error: …`` on stderr), within seconds, without a traceback unless ``--debug``.

Order: the flags (the flow parameters are built, :func:`parameters`), the storage URI's form,
the job id (post-job), then the storage itself (:func:`survey`, a bounded look:
:mod:`stormwatch.tasks.storage.probe`). Exit codes (:class:`~stormwatch.outputs.verdict.ExitCode`):

- **usage (2)**, fixed by changing the command line: a flag value the parameters refuse; no
  storage given; a malformed storage URI (a scheme other than a folder path, ``file://`` or
  ``s3://bucket[/prefix]``, ``s3://`` without a bucket, a user or password inside the URI); a
  local root that does not exist or is no folder; a root without ``jobs/`` (the line says what
  is there instead); an unsafe job id; no ``jobs/<job_id>/`` (the line names a few job ids that exist).
- **store error (1)**, fixed in the environment and possibly passing by itself (a launcher may
  retry on 1, never on 2): S3 without credentials, credentials refused, access denied, no such
  bucket, an endpoint unreachable or silent past the probe's deadline; a local root that cannot be
  read. A bucket that does not exist is the store's state (someone else may create it); a local
  folder that does not exist is the path typed on this machine.
- An empty ``jobs/`` is no error: nothing to audit yet (the command says so and exits 0).

Lines never hold a secret: a URI with a user or password is refused without being quoted, and
endpoints are shown without theirs (:func:`~stormwatch.tasks.storage.probe.without_userinfo`).
"""

from __future__ import annotations

import argparse
import enum
import sys
import traceback
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from stormwatch.flows.run_options import STORAGE_VARIABLE, audit_parameters, resolve_storage
from stormwatch.outputs.verdict import ExitCode
from stormwatch.tasks.storage.job_ids import InvalidJobIdError
from stormwatch.tasks.storage.probe import (
    RootMissingError,
    RootSurvey,
    StoreUnreachableError,
    shortened,
    survey_root,
    without_userinfo,
)
from stormwatch.tasks.storage.protocol import check_job_id, parse_storage_uri

if TYPE_CHECKING:
    from stormwatch.flows.parameters import AuditParameters

ACCEPTED_URIS = "a folder path, file:///absolute/path or s3://bucket[/prefix]"
API_TIMEOUT_S = 2.0  # connect and read, for the Prefect API's health answer


class Purpose(enum.Enum):
    """Which command checks: they differ on what a root without ``jobs/`` means."""

    AUDIT = "audit"
    SERVE = "serve"  # a root with nothing at all is a new fleet: served anyway, with a note
    POST_JOB = "post-job"


class PreflightError(Exception):
    """A command line that cannot run; ``exit_code`` says whose fault (see the module docstring)."""

    def __init__(self, message: str, *, exit_code: ExitCode) -> None:
        super().__init__(one_line(message))
        self.exit_code = exit_code


def one_line(text: str) -> str:
    """``text`` with control characters (newlines included) shown as escapes."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def refuse(error: PreflightError, args: argparse.Namespace) -> int:
    """Print the one line (and, with ``--debug``, the traceback of its cause); the exit code."""
    print(f"error: {error}", file=sys.stderr)
    if getattr(args, "debug", False):
        traceback.print_exception(error, file=sys.stderr)
    return int(error.exit_code)


def parameters(args: argparse.Namespace) -> AuditParameters:
    """The flow parameters from the flags, the storage URI's form checked; raises :class:`PreflightError`."""
    storage = resolve_storage(args)
    if not storage:
        raise PreflightError(f"no storage: pass --storage or set {STORAGE_VARIABLE}", exit_code=ExitCode.USAGE)
    try:
        params = audit_parameters(args, storage=storage)
    except ValueError as exc:
        raise PreflightError(str(exc), exit_code=ExitCode.USAGE) from exc
    check_uri(params.storage)
    try:
        params.storage_settings()
    except ValueError as exc:
        raise PreflightError(f"{exc}: use {ACCEPTED_URIS}", exit_code=ExitCode.USAGE) from exc
    return params


def check_uri(uri: str) -> None:
    """Refuse a storage URI that is not one of :data:`ACCEPTED_URIS`, naming its scheme or bucket."""
    if "://" not in uri:
        return
    try:
        parts = urlsplit(uri)
        has_userinfo = parts.username is not None or parts.password is not None
    except ValueError as exc:  # an unparsable address (a bad IPv6 literal, a bad port)
        raise PreflightError(f"malformed storage URI: use {ACCEPTED_URIS}", exit_code=ExitCode.USAGE) from exc
    if has_userinfo:  # never quoted: it may hold a key
        raise PreflightError(f"a storage URI must not hold a user or password ({parts.scheme}://…@…): credentials "
                             f"come from the AWS chain; use {ACCEPTED_URIS}", exit_code=ExitCode.USAGE)
    if parts.scheme not in ("file", "s3"):
        raise PreflightError(f"storage URI scheme {parts.scheme + '://'!r} is not supported: use {ACCEPTED_URIS}",
                             exit_code=ExitCode.USAGE)
    if parts.scheme == "s3" and not parts.netloc:
        raise PreflightError(f"storage URI {uri!r} names no bucket: use s3://bucket[/prefix]",
                             exit_code=ExitCode.USAGE)
    try:
        parse_storage_uri(uri)
    except ValueError as exc:
        raise PreflightError(f"{exc}: use {ACCEPTED_URIS}", exit_code=ExitCode.USAGE) from exc


def checked_job_id(raw: str) -> str:
    try:
        return check_job_id(raw)
    except InvalidJobIdError as exc:
        raise PreflightError(str(exc), exit_code=ExitCode.USAGE) from exc


def survey(params: AuditParameters, purpose: Purpose, *, job_id: str | None = None) -> RootSurvey:
    """The storage root looked at and its layout checked (``job_id``: already checked, must exist);
    raises :class:`PreflightError`."""
    try:
        found = survey_root(params.storage_settings(), job_id=job_id)
    except RootMissingError as exc:
        raise PreflightError(str(exc), exit_code=ExitCode.USAGE) from exc
    except StoreUnreachableError as exc:
        raise PreflightError(str(exc), exit_code=ExitCode.ERROR) from exc
    if not found.has_jobs_folder and not (purpose is Purpose.SERVE and found.is_empty):
        raise PreflightError(f"no {found.jobs_prefix}/ folder under {found.root} (expected {found.jobs}<job_id>/…): "
                             f"{found.found_instead()}", exit_code=ExitCode.USAGE)
    if job_id is not None and not found.job_found:
        raise PreflightError(f"no job folder {found.job_path(job_id)} ({jobs_there(found)})",
                             exit_code=ExitCode.USAGE)
    return found


def jobs_there(found: RootSurvey) -> str:
    """``jobs there: a, b, c, … (12)`` or ``no jobs yet under ROOT/jobs/``."""
    if not found.job_count:
        return f"no jobs yet under {found.jobs}"
    count = f"{found.job_count}{'+' if found.more_jobs else ''}"
    return f"jobs there: {shortened(found.job_ids)}" + (f" ({count} in all)" if found.job_count > len(found.job_ids)
                                                       else "")


def check_prefect_api(url: str | None, *, timeout_s: float = API_TIMEOUT_S) -> None:
    """A configured Prefect API answers at all (any HTTP status: Prefect Cloud wants a key first);
    raises :class:`PreflightError` (1: the server is down; 2: the setting is not a URL)."""
    if url is None:
        return
    import httpx  # only when a server is configured: slow to import (bench/README.md, cli_bench.py)

    shown = without_userinfo(url)
    try:
        httpx.get(f"{url.rstrip('/')}/health", timeout=timeout_s)
    except httpx.InvalidURL as exc:
        raise PreflightError(f"PREFECT_API_URL {shown!r} is not a URL", exit_code=ExitCode.USAGE) from exc
    except httpx.HTTPError as exc:
        raise PreflightError(f"no Prefect server answers at {shown} ({type(exc).__name__}): start it (prefect "
                             "server start) or point PREFECT_API_URL at a running one", exit_code=ExitCode.ERROR
                             ) from exc
