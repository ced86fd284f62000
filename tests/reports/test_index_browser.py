"""The fleet index in headless Chromium: every job listed (most severe first), sortable, filterable, links
that work; each cause in plain words with its code beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stormwatch.reports import render_index, render_job
from stormwatch.signals import describe
from tests.reports.builders import fleet_job_from_document, make_fleet, make_fleet_job, read
from tests.reports.index_order import LEVELS, default_order
from tests.reports.pages import open_page, write_page

DOCUMENT_FIXTURES = ("missing_ranks_doc", "collective_doc", "spike_doc", "drift_doc", "clean_doc", "empty_doc")


@pytest.fixture
def fleet_site(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """reports/ with a report per diagnosed job, an index, and failed/refused/skipped jobs."""
    reports = tmp_path / "reports"
    jobs = []
    for hour, fixture in enumerate(DOCUMENT_FIXTURES):
        document = request.getfixturevalue(fixture)
        write_page(reports / document["job_id"] / "report.html", render_job(read(document)))
        jobs.append(fleet_job_from_document(document, diagnosed_at=f"2026-11-30T0{hour}:00:00+00:00"))
    jobs += [
        make_fleet_job(job_id="broken-upload", status="failed", error="OSError: truncated segment-000003.jsonl"),
        make_fleet_job(job_id="bad..id", status="refused", error="job id contains '..'"),
        make_fleet_job(job_id="yesterday-run", status="skipped", verdict="warning", ranks_present=7,
                       missing_ranks=[3], diagnosed_at="2026-11-29T23:00:00+00:00", report=None),
    ]
    fleet = make_fleet(jobs=jobs)
    return write_page(reports / "index.html", render_index(fleet)), fleet


def _visible_job_ids(loaded: Any) -> list[str]:
    return [row.strip() for row in loaded.page.locator("#jobs-table tbody tr:not([hidden]) .job-id").all_inner_texts()]


def test_index_lists_every_job(browser: Any, fleet_site: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, fleet = fleet_site
    jobs = default_order(fleet["jobs"])
    with open_page(browser, path, screenshot=tmp_path / "index.png") as loaded:
        loaded.assert_quiet()
        assert _visible_job_ids(loaded) == [job["job_id"] for job in jobs]
        assert loaded.page.locator("#jobs th").all_inner_texts() == [
            "Job", "Status", "Verdict", "First cause", "Ranks", "Diagnosed", "Report"]
        rows = loaded.page.locator("#jobs-table tbody tr")
        for index, job in enumerate(jobs):
            row = rows.nth(index)
            text = " ".join(row.text_content().split())
            assert row.get_attribute("data-job-id") == job["job_id"]
            assert {"skipped": "unchanged"}.get(job["status"], job["status"]) in text
            if job["verdict"]:
                assert row.locator(f".badge.v-{job['verdict']}").count() == 1
            if job["error"]:
                assert row.locator(".error").inner_text() == job["error"]
            if job["earliest"]:
                # the cause that made the verdict: the earliest unless a more severe one came later
                earliest, worst = job["earliest"], job["most_severe"]
                cause = worst if LEVELS[worst["severity"]] > LEVELS[earliest["severity"]] else earliest
                title = describe(cause["signal"]).title
                assert " ".join(row.locator(".reason").inner_text().split()).startswith(
                    f"{title} {cause['signal']} on rank {cause['rank']}")
                assert row.locator(".reason .signal").get_attribute("title") == describe(cause["signal"]).meaning
            assert row.locator(".badge[class*='sev-']").count() == 0  # no "worst severity" repeating the verdict
            if job["ranks_present"] is not None:
                assert f"{job['ranks_present']}/{job['ranks_expected']}" in text
            if job["missing_ranks"]:
                assert row.locator(".missing-text").inner_text() == "missing " + ",".join(
                    str(rank) for rank in job["missing_ranks"])
            links = row.locator("a.report-link")
            assert links.count() == (1 if job["report"] else 0)
            if job["report"]:
                assert links.get_attribute("href") == job["report"]


def test_sorting_by_clicking_headers_reorders_rows(browser: Any, fleet_site: tuple[Path, dict[str, Any]]) -> None:
    path, fleet = fleet_site
    ids = [job["job_id"] for job in fleet["jobs"]]
    order = {"critical": 4, "warning": 3, "info": 2, "clean": 1, "empty": 0, None: -1}

    def verdict_ranks() -> list[int]:
        return [order[next(job["verdict"] for job in fleet["jobs"] if job["job_id"] == job_id)]
                for job_id in _visible_job_ids(loaded)]

    with open_page(browser, path) as loaded:
        assert loaded.page.locator("th[data-key='severity']").get_attribute("aria-sort") == "descending"
        assert verdict_ranks()[:4] == sorted(verdict_ranks(), reverse=True)[:4]  # most severe first, as served
        header = loaded.page.locator("#jobs-table th[data-key='job'] button")
        header.click()
        assert _visible_job_ids(loaded) == sorted(ids, key=str.casefold)
        assert loaded.page.locator("th[data-key='job']").get_attribute("aria-sort") == "ascending"
        header.click()
        assert _visible_job_ids(loaded) == sorted(ids, key=str.casefold, reverse=True)
        loaded.page.locator("th[data-key='severity'] button").click()
        assert loaded.page.locator("th[data-key='severity']").get_attribute("aria-sort") == "descending"
        diagnosed = [rank for rank in verdict_ranks() if rank >= 0]
        assert diagnosed == sorted(diagnosed, reverse=True)
        assert _visible_job_ids(loaded) == [job["job_id"] for job in default_order(fleet["jobs"])]
        loaded.page.locator("th[data-key='severity'] button").click()  # ascending: the least severe first
        assert _visible_job_ids(loaded)[0] == "empty-job"
        loaded.page.locator("th[data-key='diagnosed'] button").click()
        assert _visible_job_ids(loaded)[0] == "empty-job"  # the latest diagnosis first
        loaded.assert_quiet()


def test_filtering_by_typing_and_choosing_hides_rows(browser: Any, fleet_site: tuple[Path, dict[str, Any]]) -> None:
    path, fleet = fleet_site
    with open_page(browser, path) as loaded:
        page = loaded.page
        page.locator("#filter").fill("collective")
        assert _visible_job_ids(loaded) == ["collective-allreduce"]
        assert page.locator("#shown").inner_text() == f"1 of {len(fleet['jobs'])} jobs"
        page.locator("#filter").fill("")
        page.locator("#show").select_option("failed")
        assert _visible_job_ids(loaded) == ["broken-upload"]
        page.locator("#show").select_option("critical")
        assert set(_visible_job_ids(loaded)) == {job["job_id"] for job in fleet["jobs"] if job["verdict"] == "critical"}
        page.locator("#filter").fill("truncated segment")
        assert _visible_job_ids(loaded) == []
        page.locator("#show").select_option("")
        assert _visible_job_ids(loaded) == ["broken-upload"]
        loaded.assert_quiet()


def test_report_links_open_the_job_page_and_lead_back(browser: Any, fleet_site: tuple[Path, dict[str, Any]]) -> None:
    path, _ = fleet_site
    with open_page(browser, path) as loaded:
        page = loaded.page
        page.locator("tr:has-text('train-missing') a.report-link").click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/reports/train-missing/report.html")
        assert page.locator("#job-id").inner_text() == "train-missing"
        page.locator("a", has_text="fleet index").click()
        page.wait_for_load_state("load")
        assert page.url == loaded.url
        assert loaded.errors == [] and loaded.console == [] and loaded.dialogs == []
        assert all(url.startswith("file://") or url.startswith("data:") for url in loaded.requests)
