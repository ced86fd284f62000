"""Alerts through a real Alertmanager (Debian's ``prometheus-alertmanager``, started by the test).

Three audits of one job name, each a later run: the first posts the alert (labels, annotations,
generatorURL, endsAt a day ahead); a rerun within the refresh interval posts nothing (once only); the
next audit, whose run still shows the finding, posts it again with a later endsAt, so it stays active;
an Alertmanager silence then applies to it; the last audit, whose run is clean, resolves it
(``endsAt`` = the audit time), and ``?active=true`` no longer lists it. The audits' times are the
wall clock's recent past, because Alertmanager judges ``endsAt`` by its own clock.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.routes import RouteTable, parse_routes
from stormwatch.tasks.notify.dispatch import default_receiver
from stormwatch.tasks.notify.settings import NotifySettings
from tests.stormwatch.alerting.alert_builders import START_NS, make_finding
from tests.tasks.notify.integration_servers import Alertmanager, alertmanager
from tests.tasks.notify.test_notify import Notifier, lines

HOUR_NS = 3600 * 10**9


def run(number: int, *, clean: bool = False) -> JobFinding:
    """Run ``number`` of the job name ``llama-8r`` (rank 0 on node-3 device 0), later runs starting later."""
    finding = make_finding(f"llama-8r-{number:04d}", started_ns=START_NS + number * HOUR_NS, hosts=("node-3",))
    return replace(finding, indicators=(), verdict="clean") if clean else finding


def routes_to(am: Alertmanager, settings: NotifySettings) -> RouteTable:
    text = f"""
[receivers.platform]
alertmanager_url = "{am.url}"
alertmanager_ends_after = "26h"
alertmanager_refresh = "30m"

[[routes]]
receiver = "platform"
"""
    return parse_routes(text, file="routes.toml", default=default_receiver(settings))


def only(alerts: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(alerts) == 1, alerts
    return alerts[0]


def polled(am: Alertmanager, wanted: Any, **params: str) -> list[dict[str, Any]]:
    """The alerts once ``wanted(alerts)`` holds (Alertmanager applies a silence asynchronously), or the last seen."""
    deadline = time.monotonic() + 10
    alerts = am.alerts(**params)
    while not wanted(alerts) and time.monotonic() < deadline:
        time.sleep(0.1)
        alerts = am.alerts(**params)
    return alerts


def test_alert_is_posted_kept_active_silenced_and_resolved(tmp_path: Path) -> None:
    settings = NotifySettings(backoff_s=0.001, timeout_s=5.0)
    base = datetime.now(UTC).replace(microsecond=0)
    with alertmanager(tmp_path) as am:
        routes = routes_to(am, settings)
        notify = Notifier(settings)

        first = notify([run(1)], now=base - timedelta(hours=2), routes=routes)
        assert (first.sent, first.failed) == (1, 0)
        alert = only(am.alerts(active="true"))
        assert alert["labels"] == {"alertname": "StormwatchMostSevere", "job_name": "llama-8r", "kind": "most_severe",
                                   "signal": "alert:critical", "severity": "critical", "host": "node-3", "device": "0"}
        assert alert["annotations"]["summary"] == \
            "llama-8r: Most severe alert:critical on rank 0 (critical), job llama-8r-0001"
        assert alert["annotations"]["report_url"] == "https://r.example/llama-8r-0001/report.html"
        assert alert["generatorURL"] == "https://r.example/llama-8r-0001/report.html"
        assert alert["status"]["state"] == "active"
        first_ends = datetime.fromisoformat(alert["endsAt"])
        assert first_ends > base + timedelta(hours=20)  # active until the next night's audit, and a margin

        rerun = notify([run(1)], now=base - timedelta(hours=2) + timedelta(minutes=10), routes=routes)
        assert (rerun.sent, rerun.failed) == (0, 0)  # within the refresh interval: posted once only

        second = notify([run(2)], now=base - timedelta(hours=1), routes=routes)
        assert (second.sent, second.failed) == (1, 0)
        alert = only(am.alerts(active="true"))
        assert alert["annotations"]["summary"].endswith("job llama-8r-0002")
        assert datetime.fromisoformat(alert["endsAt"]) > first_ends  # refreshed: it stays active
        assert datetime.fromisoformat(alert["startsAt"]) == base - timedelta(hours=2)  # the same alert, firing since

        silence = am.silence({"job_name": "llama-8r", "kind": "most_severe"},
                             starts=base.isoformat(), ends=(base + timedelta(hours=1)).isoformat())
        silenced = only(polled(am, lambda found: found and found[0]["status"]["silencedBy"]))
        assert silenced["status"]["silencedBy"] == [silence]
        assert silenced["status"]["state"] == "suppressed"

        third = notify([run(3, clean=True)], now=base, routes=routes)
        assert (third.sent, third.failed) == (1, 0)
        assert am.alerts(active="true") == []
        ledger = [line for line in lines(notify.ledger or b"") if "platform/alertmanager" in line["channels"]]
        assert [(line["state"], line["channels"]["platform/alertmanager"]["status"]) for line in ledger] == [
            ("firing", "sent"), ("still_firing", "sent"), ("resolved", "sent")]
