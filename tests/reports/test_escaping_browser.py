"""Hostile telemetry (job ids, hosts, contexts, metadata, phase names, errors) shows as text, never as markup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stormwatch.reports import render_index, render_job
from tests.reports.builders import (
    HOSTILE,
    IMG_PAYLOAD,
    SCRIPT_PAYLOAD,
    fleet_job_from_document,
    make_fleet,
    make_fleet_job,
    make_indicator,
    read,
)
from tests.reports.index_order import default_order
from tests.reports.pages import ELEMENTS_WITH_HANDLERS, open_page, write_page


def test_hostile_job_report_shows_payloads_as_text(browser: Any, hostile_doc: dict[str, Any], tmp_path: Path) -> None:
    html = render_job(read(hostile_doc))
    assert SCRIPT_PAYLOAD not in html and "<img" not in html
    path = write_page(tmp_path / "report.html", html)
    with open_page(browser, path, screenshot=tmp_path / "hostile.png") as loaded:
        page = loaded.page
        loaded.assert_quiet()  # no alert dialog, no request for "x"
        assert page.evaluate("document.scripts.length") == 0
        assert page.locator("img, iframe, object, embed").count() == 0
        assert page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        assert page.title().endswith(f"{HOSTILE} · stormwatch")
        assert page.locator("#job-id").text_content() == HOSTILE
        assert page.locator("#sources code").first.text_content() == HOSTILE
        hosts = page.locator("table.sessions td.host").all_text_contents()
        assert hosts and all(host == f"node-{IMG_PAYLOAD}" for host in hosts)
        sessions = page.locator("table.sessions td:first-child code.session-id")
        assert f"{HOSTILE}-rank0" in sessions.evaluate_all("codes => codes.map(code => code.title)")  # whole on hover
        assert f"{HOSTILE[:8]}…" in sessions.all_text_contents()  # shortened, still text
        labels = page.locator("table.events td.label").all_text_contents()
        assert f"ctx {SCRIPT_PAYLOAD}" in labels and f"ctx {IMG_PAYLOAD}" in labels
        metadata = " ".join(page.locator("table.events code.metadata").all_text_contents())
        assert IMG_PAYLOAD.replace('"', '\\"') in metadata and SCRIPT_PAYLOAD in metadata
        indicators = hostile_doc["model"]["indicators"]
        assert page.locator("article.indicator .phase-path").all_text_contents() == [
            item["phase_path"] for item in indicators]
        details = page.locator("article.indicator .details").all_text_contents()
        assert details == [item["details"] for item in indicators]
        svg_titles = " ".join(page.locator("svg title").all_text_contents())
        assert f"ctx {SCRIPT_PAYLOAD}" in svg_titles and f"step {SCRIPT_PAYLOAD}" in svg_titles


def test_hostile_fleet_index_shows_payloads_as_text(browser: Any, hostile_doc: dict[str, Any], tmp_path: Path) -> None:
    jobs = [
        fleet_job_from_document(hostile_doc, diagnosed_at="2026-11-30T01:00:00+00:00"),
        make_fleet_job(job_id=f"{IMG_PAYLOAD}</script>\u2028", status="failed", error=f"boom {HOSTILE}"),
        make_fleet_job(job_id="sneaky", verdict="critical", report="javascript:alert(1)",
                       earliest=make_indicator(signal=SCRIPT_PAYLOAD, phase_path=IMG_PAYLOAD),
                       most_severe=make_indicator(signal=IMG_PAYLOAD)),
    ]
    fleet = make_fleet(jobs=jobs, storage=f"s3://bucket/{SCRIPT_PAYLOAD}")
    html = render_index(fleet)
    assert SCRIPT_PAYLOAD not in html and "<img" not in html and "</script>\u2028" not in html
    path = write_page(tmp_path / "index.html", html)
    with open_page(browser, path, screenshot=tmp_path / "hostile-index.png") as loaded:
        page = loaded.page
        loaded.assert_quiet()
        assert page.evaluate("document.scripts.length") == 2  # the JSON data block and our own script
        assert page.locator("script[type='application/json']").count() == 1
        assert page.locator("img, iframe, object, embed").count() == 0
        assert page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        ordered = [job["job_id"] for job in default_order(jobs)]  # most severe first: sneaky, hostile, failed
        assert page.locator(".job-id").all_text_contents() == ordered
        assert page.locator(".error").all_text_contents() == [f"boom {HOSTILE}"]
        assert page.locator("tr:has-text('sneaky') a").count() == 0  # a javascript: link is dropped
        reason = page.locator("tr:has-text('sneaky') .reason")
        assert reason.locator(".signal code").text_content() == SCRIPT_PAYLOAD
        assert reason.text_content().endswith(f"{SCRIPT_PAYLOAD} on rank 0")
        data = json.loads(page.locator("#jobs-data").text_content())
        assert [row[data["columns"].index("job")] for row in data["rows"]] == ordered
        page.locator("#filter").fill("onerror=")
        visible = page.locator("#jobs-table tbody tr:not([hidden]) .job-id").all_text_contents()
        assert visible == ordered
        page.locator("th[data-key='job'] button").click()
        loaded.assert_quiet()
