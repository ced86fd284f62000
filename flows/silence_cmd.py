"""``stormwatch silence add|list|expire``: mute alerts for a while, kept in ``reports/silences.json``.

::

    stormwatch silence add --storage URI --match 'job=llama-*' --match kind=regression --until 2026-12-08 \\
        --reason "known leak, fix in 2.4"
    stormwatch silence list --storage URI [--all]
    stormwatch silence expire ID --storage URI

``add`` refuses (exit 2) a matcher it cannot parse and an ``--until`` that is not in the future
(a bare date means the end of that day, UTC); the same ``add`` twice gives the same silence. The
next audit records matching alerts as silenced and sends nothing for them; an expired silence is
ignored. No Prefect import: these commands only read and write storage.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import UTC, datetime
from pathlib import Path

from stormwatch.alerting.config_file import ConfigError
from stormwatch.alerting.silences import (
    MAX_REASON_CHARS,
    Silence,
    SilenceBook,
    SilenceMatcher,
    parse_until,
    silence_id,
)
from stormwatch.flows.storage_root import open_root, usage
from stormwatch.outputs.verdict import ExitCode
from stormwatch.tasks.notify.config_store import change_silences, read_silence_book, report_name
from stormwatch.tasks.storage.protocol import SILENCES_KEY, Storage, parse_storage_uri


def _storage_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", default=None, metavar="URI",
                        help="storage root: a folder or s3://bucket/prefix (default: $STORMWATCH_STORAGE)")
    parser.add_argument("--endpoint-url", default=None, metavar="URL", help="S3-compatible endpoint")


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    silence = commands.add_parser("silence", help="mute alerts until a date (add, list, expire)")
    actions = silence.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="silence the alerts all --match matchers select")
    _storage_flags(add)
    add.add_argument("--match", action="append", required=True, metavar="NAME=VALUE",
                     help="job=GLOB (job id), job_name=GLOB, signal=GLOB, host=GLOB, kind=KIND, severity=LEVEL; "
                          "!= negates; repeat to narrow")
    add.add_argument("--until", required=True, metavar="DATE",
                     help="2026-12-08 (through the end of that day, UTC) or an ISO 8601 time")
    add.add_argument("--reason", required=True, metavar="TEXT", help="why (shown on the index and by list)")
    add.add_argument("--by", default=None, metavar="NAME", help="who (default: the current user)")
    add.set_defaults(run=run_add)
    show = actions.add_parser("list", help="list silences (active ones unless --all)")
    _storage_flags(show)
    show.add_argument("--all", action="store_true", help="expired silences too")
    show.set_defaults(run=run_list)
    expire = actions.add_parser("expire", help="end a silence now")
    expire.add_argument("id", metavar="ID")
    _storage_flags(expire)
    expire.set_defaults(run=run_expire)


def _root(storage: Storage) -> str:
    """The storage root as the user should recognise it: an absolute folder, or the s3:// URI."""
    scheme, location, _ = parse_storage_uri(storage.settings.uri)
    return str(Path(location).expanduser().resolve()) if scheme == "file" else storage.settings.uri


def _where(storage: Storage) -> str:
    """``reports/silences.json under ROOT``: which file, under which root."""
    return f"{report_name(storage, SILENCES_KEY)} under {_root(storage)}"


def _now() -> datetime:
    return datetime.now(UTC)


def run_add(args: argparse.Namespace) -> int:
    try:
        matchers = tuple(sorted({SilenceMatcher.parse(text) for text in args.match}))
        until = parse_until(args.until)
    except ValueError as exc:
        return usage(str(exc))
    now = _now()
    if until <= now:
        return usage(f"--until {args.until} (silenced until {until.isoformat()}) is not in the future")
    reason = " ".join(args.reason.split())
    if not reason or len(reason) > MAX_REASON_CHARS:
        return usage(f"--reason must be 1 to {MAX_REASON_CHARS} characters")
    storage = open_root(args)
    if isinstance(storage, ExitCode):
        return storage
    silence = Silence(silence_id(matchers, until, reason), matchers, until, reason, now, args.by or _user())
    try:
        added = change_silences(storage, lambda book: book.add(silence))
    except ConfigError as exc:
        print(f"error: {exc} (fix or remove it first)", file=sys.stderr)
        return ExitCode.ERROR
    verb = "added" if added else "already there:"
    print(f"{verb} {silence.id} until {until.isoformat()}: {' '.join(m.text for m in matchers)} "
          f"(in {_where(storage)})")
    return ExitCode.CLEAN


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name in this environment
        return None


def _describe(item: Silence, now: datetime) -> str:
    state = "active" if item.active(now) else "expired"
    by = f" by {item.created_by}" if item.created_by else ""
    return (f"{item.id}  {state:7}  until {item.until.isoformat()}  {' '.join(m.text for m in item.matchers)}\n"
            f"          {item.reason} (added {item.created_at.isoformat()}{by})")


def run_list(args: argparse.Namespace) -> int:
    storage = open_root(args)
    if isinstance(storage, ExitCode):
        return storage
    try:
        book = read_silence_book(storage)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.ERROR
    now = _now()
    shown = [item for item in book.silences if args.all or item.active(now)]
    for item in shown:
        print(_describe(item, now))
    hidden = len(book.silences) - len(shown)
    print(f"{len(shown)} silence(s)" + (f"; {hidden} expired (--all shows them)" if hidden else "")
          + f" in {_where(storage)}")
    return ExitCode.CLEAN


def run_expire(args: argparse.Namespace) -> int:
    storage = open_root(args)
    if isinstance(storage, ExitCode):
        return storage
    now = _now()

    def expire(book: SilenceBook) -> tuple[SilenceBook, None]:
        return book.expire(args.id, now), None

    try:
        change_silences(storage, expire)
    except KeyError:
        return usage(f"no silence {args.id!r} in {_where(storage)} (stormwatch silence list --all shows them)")
    except ConfigError as exc:
        print(f"error: {exc} (fix or remove it first)", file=sys.stderr)
        return ExitCode.ERROR
    print(f"expired {args.id} (in {_where(storage)})")
    return ExitCode.CLEAN
