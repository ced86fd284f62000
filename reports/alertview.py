"""Alerting on the fleet index: per receiver, what the last audit sent and what is still firing,
silenced, inhibited, failed or resolved, from fleet.json's optional ``alerts`` member (written by
the notify step, :mod:`stormwatch.alerting.overview`).

Alerts that are silenced or inhibited (on purpose not sent) are kept apart (``folded``): the page
folds them under a closed ``<details>``, with their count in its summary. Each signal is shown by
its title, its code beside it (:mod:`stormwatch.signals`).

Absent or malformed: no section (an older fleet.json, or notifications never ran). Every string
(job ids, names, signals, hosts, silence ids, configuration errors) is plain text here and
escaped by the template; unknown statuses read as ``other`` (they become CSS classes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.reports.fields import as_int, as_list, as_mapping
from stormwatch.reports.formatting import NOT_AVAILABLE, format_iso
from stormwatch.signals import SignalText, describe

STATUS_LABELS = {"sent": "sent", "failed": "failed (retried next audit)", "silenced": "silenced",
                 "inhibited": "inhibited", "resolved": "resolved", "still_firing": "still firing",
                 "not_sent": "not sent (no channel)"}
#: Statuses of alerts not sent on purpose: folded away on the page.
FOLDED_STATUSES = ("silenced", "inhibited")
KIND_LABELS = {"earliest": "earliest", "most_severe": "most severe", "oom": "OOM", "missing_ranks": "missing ranks",
               "regression": "regression", "suspect_host": "suspect device"}


@dataclass(frozen=True)
class AlertRow:
    status: str  # a STATUS_LABELS key or "other"
    status_label: str
    subject: str  # the job name, or "host h device d"
    job_id: str
    kind: str
    signal: str
    signal_text: SignalText  # the signal's title and meaning
    severity: str
    since: str
    last_sent: str
    by: str  # the silence id or the inhibiting alert, "" for none


@dataclass(frozen=True)
class ReceiverView:
    name: str
    channels: str
    counts: tuple[tuple[str, int], ...]  # (status label, count), non-zero only
    rows: tuple[AlertRow, ...]  # every alert but the folded ones
    omitted: int
    folded: tuple[AlertRow, ...] = ()  # silenced and inhibited alerts

    @property
    def folded_summary(self) -> str:
        """``4 inhibited, 1 silenced``: the folded alerts counted by status."""
        counts = [(label, sum(row.status == status for row in self.folded))
                  for status, label in ((status, STATUS_LABELS[status]) for status in FOLDED_STATUSES)]
        return ", ".join(f"{count} {label}" for label, count in counts if count)


@dataclass(frozen=True)
class AlertBoard:
    decided_at: str
    problems: tuple[str, ...]
    receivers: tuple[ReceiverView, ...]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _row(item: Mapping[str, Any]) -> AlertRow:
    status = item.get("status")
    status = status if isinstance(status, str) and status in STATUS_LABELS else "other"
    host = item.get("host")
    subject = (f"host {_text(host)} device {_text(item.get('device'))}" if host is not None
               else _text(item.get("job_name")) or NOT_AVAILABLE)
    kind = _text(item.get("kind"))
    signal = _text(item.get("signal"))
    return AlertRow(
        status=status, status_label=STATUS_LABELS.get(status, _text(item.get("status"))),
        subject=subject, job_id=_text(item.get("job_id")), kind=KIND_LABELS.get(kind, kind),
        signal=signal, signal_text=describe(signal or "unknown"),
        severity=_text(item.get("severity")),
        since=format_iso(item.get("since") if isinstance(item.get("since"), str) else None),
        last_sent=format_iso(item.get("last_sent") if isinstance(item.get("last_sent"), str) else None),
        by=_text(item.get("by")),
    )


def _receiver(item: Mapping[str, Any]) -> ReceiverView:
    counts = as_mapping(item.get("counts"))
    shown = tuple((STATUS_LABELS[key], count) for key in STATUS_LABELS
                  if (count := as_int(counts.get(key))) is not None and count > 0)
    channels = ", ".join(_text(channel) for channel in as_list(item.get("channels"))) or "no channel configured"
    rows = [_row(row) for row in as_list(item.get("alerts")) if isinstance(row, Mapping)]
    return ReceiverView(
        name=_text(item.get("name")) or NOT_AVAILABLE, channels=channels, counts=shown,
        rows=tuple(row for row in rows if row.status not in FOLDED_STATUSES),
        omitted=max(as_int(item.get("omitted")) or 0, 0),
        folded=tuple(row for row in rows if row.status in FOLDED_STATUSES),
    )


def alert_board(value: Any) -> AlertBoard | None:
    """The index's alerting section from fleet.json's ``alerts`` member; None when absent."""
    if not isinstance(value, Mapping) or not isinstance(value.get("receivers"), list | tuple):
        return None
    decided = value.get("decided_at")
    return AlertBoard(
        decided_at=format_iso(decided if isinstance(decided, str) else None),
        problems=tuple(_text(problem) for problem in as_list(value.get("problems"))),
        receivers=tuple(_receiver(item) for item in as_list(value.get("receivers")) if isinstance(item, Mapping)),
    )
