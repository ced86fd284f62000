"""Alertmanager's ``POST /api/v2/alerts`` body: a list of alerts with labels, annotations and times.

A nightly batch sender cannot re-post every few minutes as Prometheus does, so it sets ``endsAt``
itself: while an alert fires, the audit time plus ``ends_after_s`` (the next audit's time and a
margin), so the alert stays active until the next audit posts it again; when it resolves, its
resolution time (in the past), so Alertmanager resolves it at once. Alertmanager identifies an alert
by its labels, which carry the fingerprint's parts: the same alert from one audit to the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from stormwatch.alerting.notices import AlertNotice, NoticeState


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def alertmanager_alert(notice: AlertNotice, *, now: datetime, ends_after_s: float) -> dict[str, Any]:
    """One alert. ``now``: the audit time (aware); ``ends_after_s``: how long past ``now`` a firing alert stays
    active without another post, in seconds."""
    if notice.state is NoticeState.RESOLVED and notice.ends_at is not None:
        ends = datetime.fromisoformat(notice.ends_at)
    else:
        ends = now + timedelta(seconds=ends_after_s)
    annotations = {"summary": notice.summary, "description": notice.details, "job_id": notice.job_id}
    if notice.report_url:
        annotations["report_url"] = notice.report_url
    alert: dict[str, Any] = {
        "labels": dict(notice.labels),
        "annotations": {name: value for name, value in annotations.items() if value},
        "startsAt": _stamp(datetime.fromisoformat(notice.starts_at)),
        "endsAt": _stamp(ends),
    }
    if notice.http_report_url:
        alert["generatorURL"] = notice.http_report_url
    return alert


def alertmanager_payload(notices: Sequence[AlertNotice], *, now: datetime, ends_after_s: float) -> list[dict[str, Any]]:
    """The body of one ``POST /api/v2/alerts``: every notice of a message."""
    if not notices:
        raise ValueError("an Alertmanager post needs at least one alert")
    return [alertmanager_alert(notice, now=now, ends_after_s=ends_after_s) for notice in notices]
