"""The index's alert section: per receiver, statuses and counts, from fleet.json's ``alerts``; hostile strings
stay text in headless Chromium; an older fleet.json (no ``alerts``) shows no section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stormwatch.reports import render_index
from stormwatch.reports.alertview import alert_board
from tests.reports.builders import HOSTILE, IMG_PAYLOAD, SCRIPT_PAYLOAD, make_fleet, make_fleet_job
from tests.reports.pages import ELEMENTS_WITH_HANDLERS, open_page, write_page


def alert(status: str, *, job_name: str = "llama-8r", host: str | None = None, by: str | None = None,
          signal: str = "alert:critical") -> dict[str, Any]:
    return {"alert": f"{job_name}|most_severe|{signal}", "job_name": job_name, "job_id": f"{job_name}-0142",
            "kind": "suspect_host" if host else "most_severe", "signal": signal, "host": host,
            "device": 1 if host else None, "severity": "critical", "status": status,
            "since": "2026-11-28T02:00:00+00:00", "last_sent": "2026-11-28T02:00:00+00:00", "resolved_at": None,
            "by": by}


ALERTS = {
    "decided_at": "2026-11-30T02:00:00+00:00",
    "problems": [f"reports/routes.toml line 3: receiver {HOSTILE!r}: unknown key"],
    "receivers": [
        {"name": "default", "channels": ["slack", "email"], "counts": {"sent": 1, "silenced": 1, "inhibited": 1},
         "alerts": [alert("sent", job_name=HOSTILE, signal=SCRIPT_PAYLOAD),
                    alert("silenced", by="s-1a2b3c4d"),
                    alert("inhibited", job_name="resnet", by=f"|suspect_host|suspect_host|{IMG_PAYLOAD}#1")],
         "omitted": 0},
        {"name": "infra", "channels": ["email"], "counts": {"still_firing": 1},
         "alerts": [alert("still_firing", job_name="", host=IMG_PAYLOAD)], "omitted": 3},
        {"name": "quiet", "channels": [], "counts": {}, "alerts": [], "omitted": 0},
    ],
}


def test_the_board_reads_fleet_json_defensively() -> None:
    board = alert_board(ALERTS)
    assert board is not None and [receiver.name for receiver in board.receivers] == ["default", "infra", "quiet"]
    default = board.receivers[0]
    assert default.counts == (("sent", 1), ("silenced", 1), ("inhibited", 1))
    assert [row.status_label for row in default.rows] == ["sent"]  # silenced and inhibited are folded away
    assert [row.status_label for row in default.folded] == ["silenced", "inhibited"]
    assert default.folded_summary == "1 silenced, 1 inhibited"
    assert default.rows[0].signal_text.code == SCRIPT_PAYLOAD
    assert default.folded[0].signal_text.title == "Critical event"
    assert board.receivers[1].rows[0].subject == f"host {IMG_PAYLOAD} device 1" and board.receivers[1].omitted == 3
    assert board.receivers[2].channels == "no channel configured"
    assert alert_board(None) is None and alert_board({"receivers": "x"}) is None
    odd = alert_board({"receivers": [{"name": 3, "alerts": [{"status": "<b>"}, "x"], "counts": {"sent": "2"}}]})
    assert odd is not None and odd.receivers[0].rows[0].status == "other" and odd.receivers[0].counts == ()


def test_an_index_without_alerts_has_no_section() -> None:
    assert 'id="alerts"' not in render_index(make_fleet(jobs=[make_fleet_job()]))


def test_the_alert_section_shows_hostile_strings_as_text(browser: Any, tmp_path: Path) -> None:
    fleet = {**make_fleet(jobs=[make_fleet_job()]), "alerts": ALERTS}
    html = render_index(fleet)
    assert SCRIPT_PAYLOAD not in html and "<img" not in html
    path = write_page(tmp_path / "index.html", html)
    with open_page(browser, path, screenshot=tmp_path / "alerts.png") as loaded:
        page = loaded.page
        loaded.assert_quiet()
        assert page.locator("img, iframe, object, embed").count() == 0
        assert page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        assert page.locator("#alerts .receiver").count() == 3
        assert page.locator("#alerts .config-error").all_text_contents() == [ALERTS["problems"][0]]
        default = page.locator("#alerts .receiver[data-receiver='default']")
        assert default.locator(".alert-subject").all_text_contents() == [HOSTILE, "llama-8r", "resnet"]
        assert default.locator("td .signal code").first.text_content() == SCRIPT_PAYLOAD
        # silenced and inhibited alerts fold under a closed <details> that counts them
        folded = default.locator("details.alerts-folded")
        assert folded.count() == 1 and folded.get_attribute("open") is None
        assert folded.locator("summary").inner_text() == "1 silenced, 1 inhibited: not sent on purpose"
        assert [text for text in loaded.visible_texts("#alerts .receiver[data-receiver='default'] .alert-subject")] \
            == [HOSTILE]
        folded.locator("summary").click()
        assert loaded.visible_texts("#alerts .receiver[data-receiver='default'] .alert-subject") == [
            HOSTILE, "llama-8r", "resnet"]
        assert default.locator("td .signal").nth(1).get_attribute("title").startswith("The memory tracker recorded")
        assert default.locator(".by").all_text_contents() == ["", "s-1a2b3c4d",
                                                              f"|suspect_host|suspect_host|{IMG_PAYLOAD}#1"]
        assert default.locator(".alert-counts li").all_text_contents() == ["1 sent", "1 silenced", "1 inhibited"]
        infra = page.locator("#alerts .receiver[data-receiver='infra']")
        assert infra.locator(".alert-subject").text_content() == f"host {IMG_PAYLOAD} device 1"
        assert "3 more in fleet.json" in infra.text_content()
        assert "Nothing firing" in page.locator("#alerts .receiver[data-receiver='quiet']").text_content()
