"""The job page's Attempts timeline and a session's own page: rendered from real diagnoses of jobs
written by stormlog's writers, then checked as HTML and in headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import JobDiagnosis, diagnose_job
from stormwatch.reports import render_job
from stormwatch.reports.jobattempts import PageNav
from tests import builders as b
from tests.reports.builders import HOSTILE, read
from tests.reports.pages import ELEMENTS_WITH_HANDLERS, open_page, write_page

QUOTED = 'run "1" <b onmouseover=alert(1)>&amp;'  # no '/': its page is written, under an encoded folder
MINUTE_NS = 60 * 10**9


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> JobDiagnosis:
    root = tmp_path_factory.mktemp("restarted") / "train-7b"
    b.write_restarted_job(root)
    return diagnose_job([root], job_id="train-7b", source_name=str(root), options=DiagnoseOptions(all_sessions=True))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> JobDiagnosis:
    """An OOM in a first session whose id carries markup, then a clean completed one whose id is
    markup holding '/': stormlog's default, its outputs refused a folder."""
    root = tmp_path_factory.mktemp("hostile") / "hostile-job"
    b.write_jsonl(root / "one" / "events.jsonl", b.timeline_records(
        samples=8, session_id=QUOTED, alerts=(b.oom_alert(2.0),), lifecycle=False))
    b.write_jsonl(root / "two" / "events.jsonl", b.timeline_records(
        samples=8, session_id=HOSTILE, start_ns=b.START_NS + MINUTE_NS))
    return diagnose_job([root], job_id="hostile-job", source_name=str(root), options=DiagnoseOptions(all_sessions=True))


def write_reports(diagnosis: JobDiagnosis, reports: Path) -> Path:
    """The job's page and each session's, laid out as the pipeline writes them; the job page's path."""
    folder = reports / diagnosis.job_id
    labels = {attempt.session_id: attempt.describe() for attempt in diagnosis.attempts}
    for result in diagnosis.sessions:
        if result.written and result.diagnosis is not None and result.folder is not None:
            nav = PageNav.for_session(depth=2, attempt=labels[result.session_id])
            write_page(folder.joinpath(*result.folder.split("/")) / "report.html",
                       render_job(result.diagnosis.document, nav=nav))
    return write_page(folder / "report.html", render_job(diagnosis.document))


def test_the_attempts_timeline_lists_each_session_with_its_status_verdict_and_cause(restarted: JobDiagnosis) -> None:
    html = render_job(restarted.document)
    first, second = restarted.attempts
    rows = re.findall(r'<tr class="attempt[^"]*" data-attempt="(\d)" data-status="(\w+)" data-verdict="(\w+)">', html)
    assert rows == [("1", "interrupted", "critical"), ("2", "completed", "clean")]
    assert f'<a href="sessions/{first.session_id}/report.html">1 of 2</a>' in html
    assert 'id="earlier-oom"' in html and "attempt 1 of 2, interrupted, OOM on rank 3" in html
    assert html.index('id="verdict"') < html.index('id="earlier-oom"') < html.index('id="attempts"') < html.index(
        'id="first-cause"')  # near the top, before the default session's details
    assert "the verdict above comes from attempt 1 of 2" in html and "This page details attempt 2 of 2" in html
    one_session = render_job(restarted.main.document)
    assert 'id="attempts"' not in one_session and 'id="earlier-oom"' not in one_session


def test_session_ids_are_escaped_and_only_our_own_links_are_followed(hostile: JobDiagnosis) -> None:
    html = render_job(hostile.document)
    assert "<b onmouseover" not in html and "<script>alert" not in html and "<img src=x" not in html
    assert "run &#34;1&#34; &lt;b onmouseover=alert(1)&gt;&amp;amp;" in html
    quoted = next(attempt for attempt in hostile.attempts if attempt.session_id == QUOTED)
    assert quoted.report == ("sessions/run%2520%25221%2522%2520%253Cb%2520onmouseover%253Dalert%25281%2529%253E"
                             "%2526amp%253B/report.html")
    assert f'href="{quoted.report}"' in html
    refused = next(attempt for attempt in hostile.attempts if attempt.session_id == HOSTILE)
    assert refused.report is None and refused.error is not None and "cannot name a report folder" in refused.error
    forged = orjson.loads(hostile.document.to_json())
    forged["attempts"][0]["report"] = "javascript:alert(1)"
    forged["attempts"][1]["report"] = "../../../etc/report.html"
    assert "javascript:" not in render_job(read(forged)) and "etc/report.html" not in render_job(read(forged))


def test_the_job_page_and_a_session_page_link_to_each_other_in_the_browser(
        browser: Any, restarted: JobDiagnosis, tmp_path: Path) -> None:
    job_page = write_reports(restarted, tmp_path / "reports")
    first = restarted.attempts[0]
    with open_page(browser, job_page, screenshot=tmp_path / "job.png") as loaded:
        loaded.assert_quiet()
        page = loaded.page
        assert loaded.visible_texts("#earlier-oom p") == [
            f"OOM in an earlier attempt: attempt 1 of 2, interrupted, OOM on rank 3 (session {first.session_id})"]
        statuses = page.locator("table.attempts tbody tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
        assert statuses == ["interrupted", "completed"]
        assert page.locator("#attempts").bounding_box()["y"] < page.locator("#first-cause").bounding_box()["y"]
        widths = page.locator("table.attempts rect.bar").evaluate_all("bars => bars.map(b => b.getBBox().width)")
        assert len(widths) == 2 and all(width > 0 for width in widths)
        page.locator("#earlier-oom a").click()
        page.wait_for_load_state("load")
        assert page.url.endswith(f"/reports/train-7b/sessions/{first.session_id}/report.html")
        assert " ".join(page.locator("#session-of").inner_text().split()) == (
            f"Session {first.session_id}: attempt 1 of 2, interrupted, OOM on rank 3")
        assert page.locator(".verdict-label").inner_text() == "CRITICAL"
        page.locator("#job-link").click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/reports/train-7b/report.html")


def test_hostile_session_ids_stay_text_in_the_browser(browser: Any, hostile: JobDiagnosis, tmp_path: Path) -> None:
    job_page = write_reports(hostile, tmp_path / "reports")
    with open_page(browser, job_page) as loaded:
        loaded.assert_quiet()
        page = loaded.page
        assert page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        shown = page.locator("table.attempts tbody tr td:last-child code").all_text_contents()
        assert shown == [QUOTED, HOSTILE]
        page.locator("table.attempts tbody tr").first.locator("a").click()
        page.wait_for_load_state("load")
        assert " ".join(page.locator("#session-of code").inner_text().split()) == " ".join(QUOTED.split())
        assert loaded.dialogs == [] and loaded.errors == []
