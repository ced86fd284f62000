"""The index's Alerts section says in words what holds an alert back."""

from __future__ import annotations

import pytest

from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.observations import Fingerprint
from stormwatch.alerting.overview import held_by


@pytest.mark.parametrize(("silenced_by", "inhibited_by", "expected"), [
    (None, None, None),
    ("s-1a2b3c4d", None, "silence s-1a2b3c4d"),
    ("s-1a2b3c4d", Fingerprint("vit", AlertKind.OOM, "oom").text, "silence s-1a2b3c4d"),
    (None, Fingerprint("restarted", AlertKind.OOM, "oom").text, "OOM of restarted"),
    (None, Fingerprint("t5", AlertKind.MISSING_RANKS, "missing_ranks").text, "Missing ranks of t5"),
    (None, Fingerprint("a|b", AlertKind.OOM, "oom").text, "OOM of a|b"),
    (None, Fingerprint("", AlertKind.SUSPECT_HOST, "suspect_host", "node-7", 1).text, "suspect device node-7 #1"),
    (None, "unreadable", "unreadable"),
])
def test_what_holds_an_alert_back(silenced_by: str | None, inhibited_by: str | None, expected: str | None) -> None:
    assert held_by(silenced_by, inhibited_by) == expected
