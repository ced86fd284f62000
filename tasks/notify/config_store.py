"""The alerting configuration in storage: routes (``reports/routes.toml`` or a local ``--routes`` file)
and silences (``reports/silences.json``), read for an audit and changed by ``stormwatch silence``.

Reading never raises for a bad file: :func:`load_alert_config` returns what could be used (no
routes: everything to the default receiver) and each file's error text, naming the file and line.
:func:`change_silences` rewrites silences.json whole with a conditional write (compare-and-replace
on the version read), retried when another writer got there first, so two ``silence add`` at once
both land.

Silences fail closed: every silences.json that reads is copied to ``reports/silences.last-good.json``
(at each ``stormwatch silence`` write, and by an audit that finds the copy missing or older), and an
audit that cannot read silences.json applies that copy instead, saying so on every audit until the
file is fixed. A silenced job is never paged because its file was damaged; only with no good copy
at all does an audit run without silences, and it says that too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from stormwatch.alerting.config_file import ConfigError
from stormwatch.alerting.routes import Receiver, RouteTable, parse_routes
from stormwatch.alerting.silences import SilenceBook, read_silences
from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.storage.protocol import ROUTES_KEY, SILENCES_BACKUP_KEY, SILENCES_KEY, Storage

log = logging.getLogger(__name__)
_ROUNDS = 5
T = TypeVar("T")


def report_name(storage: Storage, key: str) -> str:
    """How people know a report object: ``reports/routes.toml`` (the reports prefix and the key)."""
    return f"{storage.settings.reports_prefix}/{key}"


@dataclass(frozen=True)
class AlertConfig:
    """``routes``: None when there is no usable routes file; ``files``: each file read -> its error, or None."""

    routes: RouteTable | None = None
    silences: SilenceBook = SilenceBook()
    files: dict[str, str | None] = field(default_factory=dict)


def _routes_text(storage: Storage, routes_file: str | None) -> tuple[str, str | None]:
    """(name, text) of the routes file: the local ``routes_file`` when given, else the storage's
    (text None when absent). Raises ConfigError when it cannot be read."""
    if routes_file:
        try:
            return routes_file, Path(routes_file).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(routes_file, None, f"cannot be read ({exc.strerror or type(exc).__name__})") from None
        except UnicodeDecodeError:
            raise ConfigError(routes_file, None, "not UTF-8 text") from None
    name = report_name(storage, ROUTES_KEY)
    data = storage.read_report(ROUTES_KEY)
    if data is None:
        return name, None
    try:
        return name, data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(name, None, "not UTF-8 text") from None


def load_alert_config(storage: Storage, *, routes_file: str | None, default: Receiver) -> AlertConfig:
    """Routes and silences for an audit; a file that cannot be used is left out with its error."""
    files: dict[str, str | None] = {}
    routes = None
    try:
        name, text = _routes_text(storage, routes_file)
        if text is not None:
            routes = parse_routes(text, file=name, default=default)
            files[name] = None
    except ConfigError as exc:
        files[exc.file] = str(exc)
    silences = SilenceBook()
    found = _silences(storage)
    if found is not None:
        silences, files[report_name(storage, SILENCES_KEY)] = found
    return AlertConfig(routes, silences, files)


def _silences(storage: Storage) -> tuple[SilenceBook, str | None] | None:
    """The silences to apply and the file's problem (None: it read); None when there is no
    silences.json (deleting it ends every silence). A silences.json that reads is backed up when the copy differs;
    one that does not is replaced by the last good copy."""
    name = report_name(storage, SILENCES_KEY)
    data = storage.read_report(SILENCES_KEY)
    if data is None:
        return None
    if not data.strip():  # `silence` never writes an empty file: a write was cut short
        return _last_good(storage, problem=f"{name} is empty")
    try:
        book = read_silences(data, file=name)
    except ConfigError as exc:
        return _last_good(storage, problem=str(exc))
    if storage.read_report(SILENCES_BACKUP_KEY) != data:
        _back_up(storage, data)
    return book, None


def _last_good(storage: Storage, *, problem: str) -> tuple[SilenceBook, str]:
    backup = report_name(storage, SILENCES_BACKUP_KEY)
    try:
        data = storage.read_report(SILENCES_BACKUP_KEY)
        book = read_silences(data, file=backup) if data is not None else None
    except ConfigError as exc:
        return SilenceBook(), f"{problem}; its copy is unreadable too ({exc}): no silence applies until it is fixed"
    if book is None:
        return SilenceBook(), f"{problem}; no good copy was kept: no silence applies until it is fixed"
    count = len(book.silences)
    return book, (f"{problem}; applying the last good copy {backup} ({count} silence{'s' * (count != 1)}) "
                  "until it is fixed")


def _back_up(storage: Storage, data: bytes) -> None:
    """Write the last good copy; a failure is left for the next audit (the original still reads)."""
    try:
        storage.write_report(SILENCES_BACKUP_KEY, data, content_type=MediaType.JSON)
    except Exception as exc:  # the backup is a safety net, never a reason to stop alerting
        log.warning("%s not written: %s: %s", report_name(storage, SILENCES_BACKUP_KEY), type(exc).__name__, exc)


def read_silence_book(storage: Storage) -> SilenceBook:
    """The stored silences; raises ConfigError when silences.json cannot be read."""
    return read_silences(storage.read_report(SILENCES_KEY), file=report_name(storage, SILENCES_KEY))


class ConcurrentChangeError(RuntimeError):
    """silences.json kept changing under this writer."""


def change_silences(storage: Storage, change: Callable[[SilenceBook], tuple[SilenceBook, T]]) -> T:
    """Apply ``change`` to the stored silences and write the result whole, only over the version read
    (retried a few times against other writers). ``change`` returns the new book and a value handed
    back; it may raise to leave the file as it was. Raises ConfigError for an unreadable file."""
    name = report_name(storage, SILENCES_KEY)
    for _ in range(_ROUNDS):
        current = storage.read_report_versioned(SILENCES_KEY)
        book = read_silences(None if current is None else current[0], file=name)
        new_book, value = change(book)
        data = new_book.to_bytes()
        if current is not None and data == current[0]:
            return value
        if current is None:
            written = storage.create_report_exclusive(SILENCES_KEY, data, content_type=MediaType.JSON)
        else:
            written = storage.replace_report_if(SILENCES_KEY, data, version=current[1], content_type=MediaType.JSON)
        if written is not None:
            _back_up(storage, data)
            return value
    raise ConcurrentChangeError(f"{name} kept changing while being written; try again")
