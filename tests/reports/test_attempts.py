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
from stormwatch.reports.jobdetail import detail_document, detail_model_path
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
    return write_page(folder / "report.html", render_job(diagnosis.document, detail=detail_document(diagnosis)))


def test_the_attempts_timeline_lists_each_session_with_its_status_verdict_and_cause(restarted: JobDiagnosis) -> None:
    first, second = restarted.attempts
    detail = detail_document(restarted)
    assert detail is not None and detail.selected_session_id == first.session_id == restarted.document.worst_session
    html = render_job(restarted.document, detail=detail)
    rows = re.findall(r'<tr class="attempt[^"]*" data-attempt="(\d)" data-status="(\w+)" data-verdict="(\w+)">', html)
    assert rows == [("1", "interrupted", "critical"), ("2", "completed", "clean")]
    assert f'<a href="sessions/{first.session_id}/report.html">1 of 2</a>' in html
    assert '<tr class="attempt worst shown oom" data-attempt="1"' in html  # the verdict's attempt is detailed
    assert "This page details attempt 1 of 2, the attempt the verdict comes from." in html
    assert 'id="other-oom"' not in html  # its OOM is the page's own story now
    assert f'<a href="sessions/{second.session_id}/report.html">attempt 2 of 2</a> (completed, clean)' in html
    assert html.index('id="verdict"') < html.index('id="other-attempts"') < html.index('id="first-cause"') < html.index(
        'id="attempts"')  # the story first, the other attempts one click away from the banner
    # without the worst attempt's document the page details the default session and says where the verdict is from
    fallback = render_job(restarted.document)
    assert "This page details attempt 2 of 2; the verdict above comes from attempt 1 of 2." in fallback
    assert 'id="other-oom"' in fallback and "attempt 1 of 2, interrupted, OOM on rank 3" in fallback
    assert fallback.index('id="verdict"') < fallback.index('id="other-oom"') < fallback.index('id="first-cause"')
    assert render_job(restarted.document, detail=restarted.main.document) == fallback  # not the verdict's: ignored
    assert detail_model_path(restarted.document) == first.model
    one_session = render_job(restarted.main.document)
    assert 'id="attempts"' not in one_session and 'id="other-oom"' not in one_session


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
    first, second = restarted.attempts
    with open_page(browser, job_page, screenshot=tmp_path / "job.png") as loaded:
        loaded.assert_quiet()
        page = loaded.page
        # the banner and the first cause come from attempt 1 (the OOM), which the page details
        assert loaded.visible_texts("#verdict-cause")[0].startswith("Out of memory alert:error on rank 3")
        assert "(node-1, GPU 1), 3.0 s into attempt 1 of 2" in loaded.visible_texts("#verdict-cause")[0]
        assert loaded.texts("#detailed-attempt")[0].startswith("attempt 1 of 2 · interrupted")
        assert page.locator("article.indicator").evaluate_all("cards => cards.map(c => c.dataset.rank)") == ["3"]
        assert page.locator("#rank-3 g.marker.m-oom").count() == 1
        statuses = page.locator("table.attempts tbody tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
        assert statuses == ["interrupted", "completed"]
        assert page.locator("#verdict").bounding_box()["y"] < page.locator("#first-cause").bounding_box()["y"] < (
            page.locator("#attempts").bounding_box()["y"])
        widths = page.locator("table.attempts rect.bar").evaluate_all("bars => bars.map(b => b.getBBox().width)")
        assert len(widths) == 2 and all(width > 0 for width in widths)
        page.locator("#other-attempts a").click()  # attempt 2: one click away
        page.wait_for_load_state("load")
        assert page.url.endswith(f"/reports/train-7b/sessions/{second.session_id}/report.html")
        assert " ".join(page.locator("#session-of").inner_text().split()) == (
            f"Session {second.session_id[:15]}…: attempt 2 of 2, completed, no anomaly")  # legacy-<8 of the uuid>…
        assert page.locator("#session-of code").get_attribute("title") == second.session_id
        assert page.locator(".verdict-label").inner_text() == "CLEAN"
        page.locator("#job-link").click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/reports/train-7b/report.html")
        page.locator("table.attempts tbody tr").first.locator("a").click()
        page.wait_for_load_state("load")
        assert page.url.endswith(f"/reports/train-7b/sessions/{first.session_id}/report.html")
        assert page.locator(".verdict-label").inner_text() == "CRITICAL"


def test_hostile_session_ids_stay_text_in_the_browser(browser: Any, hostile: JobDiagnosis, tmp_path: Path) -> None:
    job_page = write_reports(hostile, tmp_path / "reports")
    with open_page(browser, job_page) as loaded:
        loaded.assert_quiet()
        page = loaded.page
        assert page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        ids = page.locator("table.attempts tbody tr td:last-child code.session-id")
        assert ids.evaluate_all("codes => codes.map(code => code.title)") == [QUOTED, HOSTILE]  # whole on hover
        assert ids.all_text_contents() == [QUOTED[:8] + "…", HOSTILE[:8] + "…"]  # shortened on the page
        page.locator("table.attempts tbody tr").first.locator("a").click()
        page.wait_for_load_state("load")
        assert page.locator("#session-of code").get_attribute("title") == QUOTED
        assert loaded.dialogs == [] and loaded.errors == []
