"""The fleet index's view of alerting: per receiver, what was sent now, what is still firing, silenced,
inhibited, failed or resolved; fleet.json's ``alerts`` member.

::

    "alerts": {"decided_at": "...", "problems": ["reports/routes.toml line 4: ..."],
               "receivers": [{"name": "default", "channels": ["slack", "email"],
                              "counts": {"sent": 1, "still_firing": 2, ...},
                              "alerts": [{"alert": "...", "job_name": "...", "job_id": "...", "kind": "...",
                                          "signal": "...", "host": null, "severity": "critical",
                                          "status": "sent", "since": "...", "last_sent": "...", "by": null}]}]}

An alert's status for a receiver, first that applies: ``sent`` (one of its targets was told now),
``failed`` (a send to retry), ``silenced`` / ``inhibited`` (``by``: the silence id / the source
alert), ``resolved`` (this audit), ``still_firing`` (told before), ``not_sent`` (no usable channel, or
a send in flight). Alerts below the notification threshold and older resolutions are left out.
Strings are raw telemetry: the index escapes them. At most :data:`MAX_ALERTS` per receiver are listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from stormwatch.alerting.alert_file import AlertBook
from stormwatch.alerting.alert_records import AlertRecord, AlertStatus
from stormwatch.alerting.kinds import KIND_LABELS, AlertKind
from stormwatch.alerting.ledger import ChannelStatus
from stormwatch.alerting.observations import Fingerprint
from stormwatch.alerting.routes import Receiver, RouteTable

MAX_ALERTS = 200
STATUSES = ("sent", "failed", "silenced", "inhibited", "resolved", "still_firing", "not_sent")


def _status(record: AlertRecord, receiver: Receiver, stamp: str) -> str | None:
    states = [record.targets[target] for target, _ in receiver.targets if target in record.targets]
    if not states or all(item.status is ChannelStatus.SKIPPED_BELOW_THRESHOLD for item in states):
        return None
    if any(item.notified_at == stamp or item.resolved_at == stamp for item in states):
        return "sent"
    if any(item.status is ChannelStatus.FAILED for item in states):
        return "failed"
    if record.status is AlertStatus.RESOLVED:
        return "resolved" if record.resolved_at == stamp else None
    if record.silenced_by is not None:
        return "silenced"
    if record.inhibited_by is not None:
        return "inhibited"
    if any(item.notified_at for item in states):
        return "still_firing"
    return "not_sent"


def _item(record: AlertRecord, status: str, receiver: Receiver) -> dict[str, Any]:
    fingerprint = record.fingerprint
    told = [record.targets[target].notified_at for target, _ in receiver.targets if target in record.targets]
    return {"alert": fingerprint.text, "job_name": fingerprint.job_name, "job_id": record.key.job_id,
            "kind": fingerprint.kind.value, "signal": fingerprint.signal, "host": fingerprint.host,
            "device": fingerprint.device, "severity": record.severity.value, "status": status,
            "since": record.started_at, "last_sent": max((item for item in told if item), default=None),
            "resolved_at": record.resolved_at, "by": held_by(record.silenced_by, record.inhibited_by)}


def held_by(silenced_by: str | None, inhibited_by: str | None) -> str | None:
    """What holds an alert back, for people: ``silence s-1a2b3c4d``, ``OOM of llama-8r``,
    ``suspect device node-3 #1`` (the inhibiting alert's fingerprint text read back)."""
    if silenced_by is not None:
        return f"silence {silenced_by}"
    source = inhibited_by
    if source is None:
        return None
    parts = source.split("|")
    if len(parts) >= 4 and parts[-3] == AlertKind.SUSPECT_HOST.value:  # (empty job name), kind, signal, host#device
        host, _, device = parts[-1].rpartition("#")
        return f"suspect device {host} #{device}" if device else f"suspect host {host}"
    if len(parts) < 3:
        return source
    job_name, kind, _ = source.rsplit("|", 2)
    return f"{KIND_LABELS.get(kind, kind)} of {job_name}"


def alert_overview(book: AlertBook, routes: RouteTable, *, now: datetime, problems: Sequence[str] = ()
                   ) -> dict[str, Any]:
    """The ``alerts`` member after an audit decided at ``now`` (its records' times are ``now``'s ISO text)."""
    stamp = now.isoformat()
    receivers = []
    ordered = sorted(book.records.values(), key=lambda record: (record.status is AlertStatus.RESOLVED,
                                                                Fingerprint.sort_key(record.fingerprint)))
    listed: dict[str, list[dict[str, Any]]] = {name: [] for name in routes.receivers}
    for record in ordered:
        for receiver in routes.receivers_for(record.labels):
            status = _status(record, receiver, stamp)
            if status is not None:
                listed[receiver.name].append(_item(record, status, receiver))
    for name, receiver in routes.receivers.items():
        items = sorted(listed[name], key=lambda item: STATUSES.index(item["status"]))
        counts = {status: sum(1 for item in items if item["status"] == status) for status in STATUSES}
        receivers.append({"name": name, "channels": [channel.value for channel in receiver.channels],
                          "counts": counts, "alerts": items[:MAX_ALERTS], "omitted": max(len(items) - MAX_ALERTS, 0)})
    return {"decided_at": stamp, "problems": list(problems), "receivers": receivers}
