"""The fleet index's data block: every job of the fleet, compact, for ``index.js`` to page,
sort and filter (embedded as ``<script type="application/json">``, never as JS source).

Layout (one JSON object; ``render.script_json`` escapes ``<``, ``>``, ``&``, U+2028/9 in it):

``columns``
    names of the row fields, in row order: :data:`COLUMNS`.
``rows``
    one array per job, in the table's default order (most severe first: the order of the
    server-rendered first page). ``status`` / ``verdict`` are indices into ``statuses`` /
    ``verdicts`` (names that are also CSS classes; ``status_labels`` says what each status is
    called on the page). ``sig`` is an index into ``signals`` (``[title, code, meaning]``; -1: no
    cause), the signal of the cause that made the verdict; ``also`` is null or ``[label, signal
    index, text]``, the other first cause. A text field holds its string, or an int: an index into
    ``strings``, for text shared by several jobs (summaries, places, details, errors). ``href`` is
    null (no report link), ``""`` for the usual link, which the script builds as
    ``encodeURIComponent(job) + "/report.html"`` (only when that gives exactly
    :func:`~stormwatch.reports.fleetview.report_href`'s link), or the link itself. ``outliers``
    is the job's peer outlier ranks (``"3,5"``), ``""`` for none (3 bytes a job); ``cut`` its
    files that end mid-record (:attr:`~stormwatch.reports.fleetview.FleetRow.cut_short`), ``""``
    for none; ``session`` the full id of the session its cause comes from (``""``: one session);
    ``loadw`` its load warnings (0: none).
``order``
    per sort key (:data:`~stormwatch.reports.fleetview.SORT_KEYS`), each row's dense rank
    (equal keys share a rank; 0 sorts first ascending), so the script sorts every job with
    Python's ordering of the keys without shipping them. The rows are already in descending
    ``default_sort`` order.
``attention``
    the rows (indices) of the jobs needing attention: the "needs attention" filter.
``status_column``
    whether the table shows a Status column (some job was not diagnosed).
``page_size``
    rows per page.

A job therefore costs its id, the text unique to it (its first cause's detail, its
diagnosis time) and a few small ints: about 250 bytes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from stormwatch.reports.fleetview import (
    DEFAULT_SORT,
    PAGE_SIZE,
    SORT_KEYS,
    STATUS_LABELS,
    STATUSES,
    VERDICT_ORDER,
    FleetRow,
    status_column,
)
from stormwatch.signals import SignalText

COLUMNS = ("job", "status", "verdict", "summary", "sig", "where", "detail", "also", "session", "ranks", "missing",
           "diagnosed", "error", "href", "outliers", "cut", "loadw")
VOCABULARIES = {
    "statuses": (*STATUSES, "none", "other"),
    "verdicts": ("none", *VERDICT_ORDER, "other"),
}
_SHARED = ("summary", "where", "detail", "ranks", "missing", "diagnosed", "error", "outliers")
_MIN_SHARED_CHARS = 4  # shorter text is no longer than its index
_URI_COMPONENT_SAFE = "-_.!~*'()"  # what encodeURIComponent leaves as is, besides letters and digits
REPORT_FILE = "report.html"


def script_href(job_id: str) -> str | None:
    """The link ``index.js`` builds for ``job_id``: ``encodeURIComponent(job_id) + "/report.html"``;
    None where the script could not (a lone surrogate, which encodeURIComponent refuses)."""
    try:
        return f"{quote(job_id, safe=_URI_COMPONENT_SAFE)}/{REPORT_FILE}"
    except UnicodeEncodeError:
        return None


def _href(row: FleetRow) -> str | None:
    if row.report_href is None:
        return None
    return "" if row.report_href == script_href(row.job_id) else row.report_href


def dense_ranks(keys: Sequence[Any]) -> list[int]:
    """Each key's rank among the distinct keys, ascending from 0 (equal keys, equal ranks)."""
    rank = {key: position for position, key in enumerate(sorted(set(keys)))}
    return [rank[key] for key in keys]


class _Signals:
    """The ``signals`` vocabulary, filled as rows use it."""

    def __init__(self) -> None:
        self.items: list[list[str]] = []
        self._index: dict[tuple[str, str, str], int] = {}

    def index(self, signal: SignalText | None) -> int:
        if signal is None:
            return -1
        key = (signal.title, signal.code, signal.meaning)
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(list(key))
        return self._index[key]


def _fields(row: FleetRow, signals: _Signals) -> dict[str, Any]:
    return {
        "job": row.job_id,
        "status": VOCABULARIES["statuses"].index(row.status),
        "verdict": VOCABULARIES["verdicts"].index(row.verdict),
        "summary": row.summary,
        "sig": signals.index(row.signal),
        "where": row.cause_where,
        "detail": row.cause_detail,
        "also": None if row.also is None else [row.also[0], signals.index(row.also[1]), row.also[2]],
        "session": row.session,
        "ranks": row.ranks,
        "missing": row.missing,
        "diagnosed": row.diagnosed_at,
        "error": row.error,
        "href": _href(row),
        "outliers": row.outliers,
        "cut": row.cut_short,
        "loadw": row.load_warnings,
    }


def fleet_data(rows: Sequence[FleetRow]) -> dict[str, Any]:
    """The data block of ``rows`` (see the module docstring for its layout)."""
    signals = _Signals()
    fields = [_fields(row, signals) for row in rows]
    uses = Counter(item[name] for item in fields for name in _SHARED)
    shared = [text for text, count in uses.items() if count > 1 and len(text) >= _MIN_SHARED_CHARS]
    index = {text: position for position, text in enumerate(shared)}
    for item in fields:
        for name in _SHARED:
            item[name] = index.get(item[name], item[name])
    return {
        "columns": list(COLUMNS),
        **{name: list(values) for name, values in VOCABULARIES.items()},
        "status_labels": [STATUS_LABELS.get(status, status) for status in VOCABULARIES["statuses"]],
        "signals": signals.items,
        "strings": shared,
        "rows": [[item[name] for name in COLUMNS] for item in fields],
        "order": {name: dense_ranks([row.sort_keys[position] for row in rows])
                  for position, name in enumerate(SORT_KEYS)},
        "default_sort": DEFAULT_SORT,
        "attention": [position for position, row in enumerate(rows) if row.needs_attention],
        "status_column": status_column(rows),
        "page_size": PAGE_SIZE,
    }
