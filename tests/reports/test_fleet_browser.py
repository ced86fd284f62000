"""Fleet comparisons (issue 16) in headless Chromium: the index's trends, regressions, suspect hosts,
coverage and outlier marks (server-rendered and script-built rows alike), the job report's peer
outliers and earlier runs; hostile hosts and job ids stay text; the pages stay quiet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stormwatch.reports import render_index, render_job
from stormwatch.reports.fleetview import report_href
from tests.reports.builders import HOSTILE, IMG_PAYLOAD, make_large_fleet, read
from tests.reports.fleet_builders import (
    NIGHTS,
    make_job_fleet,
    make_outlier,
    make_regression,
    make_suspect,
    with_fleet_intel,
)
from tests.reports.index_order import default_order
from tests.reports.pages import ELEMENTS_WITH_HANDLERS, open_page, write_page

JOBS = 250


def _fleet() -> dict[str, Any]:
    fleet = make_large_fleet(JOBS)
    for index, job in enumerate(fleet["jobs"]):
        if index % 10 == 3:
            job["outlier_ranks"] = [make_outlier(rank=index % 8)]
    hostile_job = fleet["jobs"][0]["job_id"]  # "!-00000-</script>…": markup in the id
    return with_fleet_intel(fleet, regressions=[make_regression(job_id=hostile_job, job_name=IMG_PAYLOAD),
                                                make_regression(job_id="gone", metric="hidden_gap_peak_bytes")],
                            suspects=[make_suspect(host=HOSTILE, device_id=IMG_PAYLOAD), make_suspect()])


def test_index_shows_the_fleet_sections_and_outlier_marks(browser: Any, tmp_path: Path) -> None:
    fleet = _fleet()
    html = render_index(fleet)
    path = write_page(tmp_path / "reports" / "index.html", html)
    with open_page(browser, path, screenshot=tmp_path / "fleet-index.png") as loaded:
        page = loaded.page
        loaded.assert_quiet()
        assert page.locator("img, iframe, object, embed").count() == 0
        assert page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        assert page.locator("#trend-jobs g.bar").count() == len(NIGHTS)
        assert page.locator("#trend-verdicts g.bar").count() == len(NIGHTS)
        assert page.locator("#trend-p95 path.line").count() == 1
        assert page.locator("#trend-jobs svg").bounding_box()["height"] > 50  # type: ignore[index]
        assert loaded.texts("#trends-latest")[0].startswith(f"Latest night {NIGHTS[-1]}: 29 jobs")
        rows = page.locator("table.regressions tbody tr")
        assert rows.count() == 2
        assert loaded.texts("table.regressions .job-id") == [fleet["jobs"][0]["job_id"], "gone"]
        assert loaded.texts("table.regressions .job-name") == [IMG_PAYLOAD, "llama-pretrain"]
        assert rows.first.locator("a").get_attribute("href") == report_href(fleet["jobs"][0]["report"])
        assert rows.nth(1).locator("a").count() == 0  # no such job in the fleet: no link
        assert loaded.texts("table.suspects .host") == [HOSTILE, "node-17"]
        assert loaded.texts("table.suspects .device") == [IMG_PAYLOAD, "3"]
        assert "97.5 % (936 of 960)" in loaded.texts("#fleet-coverage")[0]
        # outlier marks: on the server-rendered first page, and on the rows the script builds
        ordered = default_order(fleet["jobs"])
        first_page = [job for job in ordered[:100] if job.get("outlier_ranks")]
        assert page.locator("#jobs-table .outlier-mark").count() == len(first_page)
        page.locator("#show").select_option("outliers")
        marked = [job for job in ordered if job.get("outlier_ranks")]
        assert loaded.texts("#shown") == [f"{len(marked)} of {JOBS} jobs"]
        visible = page.locator("#jobs-table tbody tr")
        assert visible.count() == len(marked)
        assert page.locator("#jobs-table tbody tr .outlier-mark").count() == len(marked)
        assert loaded.texts("#jobs-table tbody tr .job-id") == [job["job_id"] for job in marked]
        expected = [f"⚑ outliers {job['outlier_ranks'][0]['rank']}" for job in marked]
        assert loaded.texts("#jobs-table .outlier-mark") == expected
        loaded.assert_quiet()


def test_old_fleet_says_no_history_yet(browser: Any, tmp_path: Path) -> None:
    fleet = make_large_fleet(20)
    path = write_page(tmp_path / "index.html", render_index(fleet))
    with open_page(browser, path) as loaded:
        loaded.assert_quiet()
        for section in ("trends", "regressions", "suspects", "coverage"):
            assert loaded.visible_texts(f"#{section} .empty") == ["No history yet."]
        assert loaded.page.locator(".outlier-mark").count() == 0


def test_job_report_shows_peer_outliers_and_earlier_runs(browser: Any, missing_ranks_doc: dict[str, Any],
                                                         tmp_path: Path) -> None:
    document = make_job_fleet(missing_ranks_doc, host=HOSTILE + "-{rank}",
                              outliers=[make_outlier(rank=1), make_outlier(rank=4, metric="hidden_gap_peak_bytes")])
    path = write_page(tmp_path / "reports" / "job" / "report.html", render_job(read(document)))
    with open_page(browser, path, screenshot=tmp_path / "fleet-job.png") as loaded:
        page = loaded.page
        loaded.assert_quiet()
        assert page.evaluate("document.scripts.length") == 0
        assert page.locator("img, iframe, object, embed").count() == 0
        assert page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        assert loaded.texts("table.outliers tbody tr td:first-child") == ["1", "4"]
        assert page.locator("table.outliers .host").all_text_contents() == [f"{HOSTILE}-1", f"{HOSTILE}-4"]
        assert page.locator("table.ranks tr.outlier").evaluate_all("rows => rows.map(row => row.dataset.rank)") == [
            "1", "4"]
        present = missing_ranks_doc["model"]["present_ranks"]
        hosts = page.locator("table.ranks td.host").all_text_contents()
        assert hosts == [f"{HOSTILE}-{rank}" if rank in present else "—" for rank in range(8)]
        page.locator("table.outliers a").first.click()
        assert page.evaluate("location.hash") == "#rank-row-1"
        assert page.locator("#comparison svg.mini.spark").count() == 2
        assert page.locator("#comparison circle.dot.current").count() == 2
        assert loaded.texts("#comparison tbody tr .change") == ["+17.1 %", "+1.6 %"]
        assert loaded.texts("#comparison .badge") == ["regression", "regression", "within baseline"]
        assert "6 of 8" in loaded.texts("#job-coverage")[0]
        loaded.assert_quiet()


def test_job_report_without_history(browser: Any, clean_doc: dict[str, Any], tmp_path: Path) -> None:
    old = {key: value for key, value in clean_doc.items() if key != "fleet"}
    path = write_page(tmp_path / "old.html", render_job(read(old)))
    with open_page(browser, path) as loaded:
        loaded.assert_quiet()
        assert loaded.page.locator("#outliers").count() == 0
        assert loaded.texts("#comparison .empty") == ["No history yet."]
    path = write_page(tmp_path / "new.html", render_job(read(make_job_fleet(clean_doc, regression="no_baseline"))))
    with open_page(browser, path) as loaded:
        loaded.assert_quiet()
        assert loaded.texts("#comparison .note-text") == ["no baseline yet (2 earlier runs)"]
        assert loaded.page.locator("#comparison circle.dot").count() == 3
