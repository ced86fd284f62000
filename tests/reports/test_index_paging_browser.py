"""A fleet of thousands of jobs in headless Chromium: the server renders the first page (most severe
first), the script pages, sorts and filters every job from the JSON block, with the same rows and links."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from stormwatch.reports import render_index
from stormwatch.reports.fleetdata import script_href
from stormwatch.reports.fleetview import PAGE_SIZE, report_href
from tests.reports.builders import HOSTILE_JOB_IDS, make_large_fleet
from tests.reports.index_order import default_order
from tests.reports.pages import ELEMENTS_WITH_HANDLERS, open_page, write_page

JOBS = 2_500
PAGES = -(-JOBS // PAGE_SIZE)
ROWS = "#jobs-table tbody tr"
ROW_LINKS = """rows => rows.map(row => [row.querySelector('.job-id').textContent,
    row.querySelector('a.report-link') && row.querySelector('a.report-link').getAttribute('href')])"""


@pytest.fixture(scope="module")
def large_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    fleet = make_large_fleet(JOBS)
    return write_page(tmp_path_factory.mktemp("large") / "reports" / "index.html", render_index(fleet)), fleet


def _expected(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    return [[job["job_id"], report_href(job["report"])] for job in jobs]


def _rows(loaded: Any) -> list[list[Any]]:
    return loaded.page.eval_on_selector_all(ROWS, ROW_LINKS)


def _page_info(loaded: Any) -> str:
    return loaded.page.locator(".pager .page-info").first.inner_text()


def test_paging_reaches_every_job_with_its_link(browser: Any, large_site: tuple[Path, dict[str, Any]]) -> None:
    path, fleet = large_site
    jobs = default_order(fleet["jobs"])
    with open_page(browser, path) as loaded:
        page = loaded.page
        assert page.locator("body[data-ready]").count() == 1
        assert page.locator("#paging-note").is_hidden()
        assert _page_info(loaded) == f"page 1 of {PAGES} · jobs 1–{PAGE_SIZE} of {JOBS}"
        assert page.locator(".pager button[data-page='previous']").first.is_disabled()
        seen = _rows(loaded)
        for number in range(2, PAGES + 1):
            page.locator(".pager button[data-page='next']").first.click()
            assert _page_info(loaded).startswith(f"page {number} of {PAGES}")
            seen += _rows(loaded)
        assert seen == _expected(jobs)  # every job once, most severe first, with its link
        assert page.locator(".pager button[data-page='next']").last.is_disabled()
        page.locator(".pager button[data-page='first']").last.click()
        page.locator(".pager button[data-page='last']").first.click()
        assert _rows(loaded) == _expected(jobs[(PAGES - 1) * PAGE_SIZE:])
        assert page.locator(".job-id").all_text_contents()[-1] == jobs[-1]["job_id"]
        assert page.locator("img, iframe, object, embed").count() == 0
        assert page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        assert page.evaluate("document.scripts.length") == 2
        loaded.assert_quiet()


def test_the_script_rebuilds_the_server_rendered_rows_exactly(
    browser: Any, large_site: tuple[Path, dict[str, Any]]
) -> None:
    path, _ = large_site
    with open_page(browser, path) as loaded:
        page = loaded.page
        server = page.eval_on_selector_all(ROWS, "rows => rows.map(row => row.outerHTML)")
        assert any(HOSTILE_JOB_IDS[0] in text for text in page.locator(".job-id").all_text_contents())
        page.locator(".pager button[data-page='next']").first.click()
        page.locator(".pager button[data-page='first']").first.click()
        rebuilt = page.eval_on_selector_all(ROWS, "rows => rows.map(row => row.outerHTML)")
        assert len(server) == PAGE_SIZE
        assert [re.sub(r">\s+<", "><", row) for row in rebuilt] == [re.sub(r">\s+<", "><", row) for row in server]
        loaded.assert_quiet()


def test_filter_and_sort_find_jobs_on_the_last_page(browser: Any, large_site: tuple[Path, dict[str, Any]]) -> None:
    path, fleet = large_site
    jobs = default_order(fleet["jobs"])
    last = fleet["jobs"][-1]
    report = path.parent / last["job_id"] / "report.html"
    write_page(report, "<!doctype html><title>report</title><p id='job-id'>last job</p>")
    with open_page(browser, path) as loaded:
        page = loaded.page
        page.locator("#filter").fill(last["job_id"])
        assert _rows(loaded) == _expected([last])
        assert page.locator("#shown").inner_text() == f"1 of {JOBS} jobs"
        assert _page_info(loaded) == "page 1 of 1 · jobs 1–1 of 1"
        page.locator("#filter").fill("")
        page.locator("#show").select_option("failed")
        failed = [job for job in jobs if job["status"] == "failed"]
        assert page.locator("#shown").inner_text() == f"{len(failed)} of {JOBS} jobs"
        assert _rows(loaded) == _expected(failed)
        page.locator("#show").select_option("warning")
        page.locator("#filter").fill("PRETRAIN persistent_drift")
        drift = [job for job in jobs if job["verdict"] == "warning" and "pretrain" in job["job_id"]
                 and job["earliest"]["signal"] == "gap:persistent_drift"]
        assert len(drift) > PAGE_SIZE and page.locator("#shown").inner_text() == f"{len(drift)} of {JOBS} jobs"
        page.locator(".pager button[data-page='last']").first.click()
        assert _rows(loaded) == _expected(drift[(len(drift) - 1) // PAGE_SIZE * PAGE_SIZE:])
        page.locator("#filter").fill("")
        page.locator("#show").select_option("")
        page.locator("th[data-key='job'] button").click()
        page.locator("th[data-key='job'] button").click()  # descending: the last job first
        assert page.locator("th[data-key='job']").get_attribute("aria-sort") == "descending"
        ordered = sorted(jobs, key=lambda job: job["job_id"].casefold(), reverse=True)
        assert _rows(loaded) == _expected(ordered[:PAGE_SIZE])
        page.locator("th[data-key='diagnosed'] button").click()
        latest = max(job["diagnosed_at"] or "" for job in jobs)
        assert _rows(loaded)[0] == _expected([next(job for job in jobs if job["diagnosed_at"] == latest)])[0]
        loaded.assert_quiet()
        page.locator("#filter").fill(last["job_id"])
        page.locator("a.report-link").click()
        page.wait_for_load_state("load")
        assert page.url == report.resolve().as_uri() and page.locator("#job-id").inner_text() == "last job"


def test_without_javascript_the_first_page_is_readable(browser: Any, large_site: tuple[Path, dict[str, Any]]) -> None:
    path, fleet = large_site
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(path.resolve().as_uri(), wait_until="load")
        assert page.locator(ROWS).count() == PAGE_SIZE
        first = default_order(fleet["jobs"])[:PAGE_SIZE]
        assert page.locator(".job-id").all_text_contents() == [job["job_id"] for job in first]
        assert page.locator("#attention li.attention").count() == 10  # the list needs no script either
        assert page.locator("#jobs th[data-key='status']").count() == 1  # some jobs were not diagnosed
        note = page.locator("#paging-note")
        assert note.is_visible() and f"first {PAGE_SIZE} of {JOBS} jobs" in note.inner_text()
        assert page.locator("a[href='fleet.json']").count() == 1
        assert page.locator(".pager").first.is_hidden()
    finally:
        context.close()


def test_script_href_matches_the_browsers_encode_uri_component(browser: Any, tmp_path: Path) -> None:
    ids = ["job-1", *HOSTILE_JOB_IDS, "a/b?c#d%", "é\u2028 ~!*'()", "日本語"]
    with open_page(browser, write_page(tmp_path / "blank.html", "<!doctype html><title>x</title>")) as loaded:
        built = loaded.page.evaluate("ids => ids.map(id => encodeURIComponent(id) + '/report.html')", ids)
    assert built == [script_href(job_id) for job_id in ids]
