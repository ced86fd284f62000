"""Issue 30's scenario as alerts: a regression a suspect device set is inhibited by the device's alert and
told inside its message, never to the job's team; one a healthy device set still reaches the team."""

from __future__ import annotations

from typing import Any

import pytest

from stormwatch.alerting.alert_records import Transition
from stormwatch.alerting.decisions import Action, Circumstances, plan_alert
from stormwatch.alerting.fleet_findings import fleet_findings
from stormwatch.alerting.grouping import entries_for
from stormwatch.alerting.inhibition import inhibit
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import ChannelStatus
from stormwatch.alerting.observations import Fingerprint
from stormwatch.alerting.policy import AlertPolicy
from stormwatch.alerting.routes import Receiver
from stormwatch.alerting.secret_names import SecretName
from stormwatch.history.regressions import RegressionThresholds
from stormwatch.history.sections import compare_fleet
from stormwatch.history.suspects import SuspectThresholds
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import T0, book_of
from tests.stormwatch.history.device_scenario import BAD_DEVICE, BAD_HOST, NIGHTS, night_time, scenario_history

HISTORY = scenario_history()
DEVICE = Fingerprint("", AlertKind.SUSPECT_HOST, "suspect_host", BAD_HOST, BAD_DEVICE)
TEAM = Receiver(name="team", slack_webhook=SecretName(env="TEAM_HOOK"))


def sections(night: int, *, healthy_spike: bool = False) -> dict[str, Any]:
    history = HISTORY
    if healthy_spike:  # train-a's rank 5 on node-3 regresses on the last night too
        history = HISTORY.copy()
        carrier = (history["job_id"].astype(object) == f"train-a-{NIGHTS - 1:04d}") & (history["rank"] == 5)
        history.loc[carrier, "hidden_gap_peak_bytes"] = history.loc[carrier, "hidden_gap_peak_bytes"] * 8
    return compare_fleet(history, as_of=night_time(night), trend_days=30, regression=RegressionThresholds(),
                         suspects=SuspectThresholds()).as_json()


@pytest.mark.parametrize("night", [NIGHTS - 2, NIGHTS - 1])  # the nights 11 and 12
def test_the_device_s_alert_inhibits_the_regressions_it_explains(night: int) -> None:
    found = fleet_findings(sections(night), index_url=None, report_url_of=lambda job_id: None)
    book = book_of(*found)
    regressions = [key for key in book.records if key.kind is AlertKind.REGRESSION]
    assert regressions and DEVICE in book.records
    inhibitions = inhibit(book.records)
    assert {key: inhibitions.by.get(key) for key in regressions} == dict.fromkeys(regressions, DEVICE)
    for key in regressions:  # not told to the job's team
        record = book.records[key]
        plans = plan_alert(record, (TEAM,), Circumstances(Transition.NEW, None, inhibitions.by[key]),
                           policy=AlertPolicy(), notify_on=Severity.WARNING, now=T0)
        assert [(plan.action, plan.status) for plan in plans] == [(Action.HOLD, ChannelStatus.INHIBITED)]
    (entry, carried) = entries_for({DEVICE: Action.SEND_NEW}, book.records, inhibitions)[0]
    assert carried == (DEVICE,)
    assert len(entry.inhibited) == len(regressions)
    assert all(f"explained by suspect device {BAD_HOST}/{BAD_DEVICE}" in line and "hidden gap peak bytes" in line
               for line in entry.inhibited)


def test_a_regression_a_healthy_device_set_still_reaches_the_team() -> None:
    found = fleet_findings(sections(NIGHTS - 1, healthy_spike=True), index_url=None, report_url_of=lambda _: None)
    book = book_of(*found)
    inhibitions = inhibit(book.records)
    mine = Fingerprint("train-a", AlertKind.REGRESSION, "regression:hidden_gap_peak_bytes")
    assert mine in book.records and mine not in inhibitions.by
    assert "set by rank 5 on node-3 GPU 5" in book.records[mine].fact.details
    assert book.records[mine].fact.where == "rank 5"
    others = [key for key in book.records if key.kind is AlertKind.REGRESSION and key != mine]
    assert others and all(inhibitions.by[key] == DEVICE for key in others)

