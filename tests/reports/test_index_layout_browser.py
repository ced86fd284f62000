"""The fleet index leads with attention (issue 28), in headless Chromium at a desktop and a phone size:
the most severe job's line is on the first screen and first in the table, every signal shows its title
beside its code, the rows the script builds are the server's (load warnings, sessions, second causes),
"N more need attention" filters the table, and hostile strings stay text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from stormwatch.reports import render_index
from tests.reports.attention_builders import job, placed
from tests.reports.builders import HOSTILE, IMG_PAYLOAD, SCRIPT_PAYLOAD, make_fleet, make_fleet_job
from tests.reports.fleet_builders import make_coverage, make_regression, make_suspect, make_trends, with_fleet_intel
from tests.reports.pages import ELEMENTS_WITH_HANDLERS, open_page, write_page

SIZES = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
SESSION = "legacy-10513d62-958b-5ca2-b529-fe56456eecfd"
CODES_WITHOUT_TITLES = """() => Array.from(document.querySelectorAll('#attention code, #jobs code')).filter(code => {
  const signal = code.closest('.signal');
  return !signal || !signal.getAttribute('title') || !signal.firstChild.textContent.trim();
}).length"""


def _fleet(count: int = 40) -> dict[str, Any]:
    """``count`` clean jobs, and among them an OOM (the newest critical), older critical jobs, warnings,
    a failed job, a restarted job, jobs with load warnings; a regression and a suspect device."""
    jobs = [{**make_fleet_job(job_id=f"clean-{index:03d}", diagnosed_at=f"2026-11-30T0{index % 10}:00:00+00:00"),
             "coverage": {"load_warnings": 1 if index == 7 else 0}} for index in range(count)]
    jobs += [
        job("oom", cause=placed(oom=True, oom_dump="out of memory on rank 3: tried to allocate 2.0 GiB"),
            diagnosed_at="2026-11-30T11:00:00+00:00"),
        job("drifting-rank", earliest=placed(rank=1, signal="gap_ratio_breach", severity="warning", since_s=6.0),
            most_severe=placed(rank=1, signal="gap:persistent_drift"), diagnosed_at="2026-11-30T10:00:00+00:00"),
        job("restarted", cause=placed(oom=True, phase_path=None), worst_session=SESSION,
            worst_attempt="attempt 1 of 2, interrupted, OOM on rank 3", diagnosed_at="2026-11-30T09:00:00+00:00",
            coverage={"load_warnings": 3}),
        job("missing-ranks", verdict="warning", ranks_present=3, ranks_expected=4, missing_ranks=[2]),
        make_fleet_job(job_id="broken-upload", status="failed", error="OSError: truncated segment-000003.jsonl"),
    ]
    fleet = with_fleet_intel(make_fleet(jobs=jobs), regressions=[make_regression(job_id="clean-003")],
                             suspects=[make_suspect()], trends=make_trends())
    fleet["coverage"] = make_coverage(jobs=len(jobs))
    return fleet


@pytest.mark.parametrize("size", SIZES)
def test_the_first_screen_says_which_jobs_need_attention_and_why(browser: Any, tmp_path: Path, size: str) -> None:
    path = write_page(tmp_path / "reports" / "index.html", render_index(_fleet()))
    context = browser.new_context(viewport=SIZES[size])
    try:
        page = context.new_page()
        page.goto(path.resolve().as_uri(), wait_until="load")
        page.screenshot(path=str(tmp_path / f"index-attention-{size}.png"))
        first = page.locator("#attention li.attention").first
        assert first.get_attribute("data-job-id") == "oom" and first.get_attribute("data-severity") == "critical"
        box = first.bounding_box()
        assert box is not None and box["y"] + box["height"] <= SIZES[size]["height"]
        assert "Out of memory alert:error on rank 3 (gpu-node-01, GPU 3), 20.0 s into the job" in " ".join(
            first.inner_text().split())
        assert page.locator("#jobs tbody tr").first.get_attribute("data-job-id") == "oom"
        assert page.evaluate(CODES_WITHOUT_TITLES) == 0
        severities = page.locator("#attention li.attention").evaluate_all("items => items.map(i => i.dataset.severity)")
        assert severities == sorted(severities)  # "critical" < "warning": critical first
        # the table scrolls sideways on a phone, the page does not
        assert page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]
    finally:
        context.close()


def test_script_rows_equal_the_servers(browser: Any, tmp_path: Path) -> None:
    path = write_page(tmp_path / "reports" / "index.html", render_index(_fleet()))
    with open_page(browser, path, screenshot=tmp_path / "index-attention-full.png") as loaded:
        page = loaded.page
        loaded.assert_quiet()
        server = page.eval_on_selector_all("#jobs tbody tr", "rows => rows.map(row => row.outerHTML)")
        page.locator("#filter").fill("no such job")
        page.locator("#filter").fill("")
        rebuilt = page.eval_on_selector_all("#jobs tbody tr", "rows => rows.map(row => row.outerHTML)")
        assert len(server) == 45 and any('class="session-id"' in row for row in server)
        assert any('class="detail also"' in row for row in server) and any("#load-warnings" in row for row in server)
        assert [re.sub(r">\s+<", "><", row) for row in rebuilt] == [re.sub(r">\s+<", "><", row) for row in server]
        restarted = page.locator("#jobs tr[data-job-id='restarted']")
        assert restarted.locator(".session-id").get_attribute("title") == SESSION
        assert restarted.locator(".session-id").inner_text() == "legacy-10513d62…"
        assert restarted.locator(".load-mark a").get_attribute("href") == "restarted/report.html#load-warnings"
        assert restarted.locator(".load-mark").inner_text() == "⚠ 3 load warnings"
        page.locator("#show").select_option("load")
        assert loaded.texts("#jobs tbody .job-id") == ["restarted", "clean-007"]
        loaded.assert_quiet()


def test_more_need_attention_filters_the_table(browser: Any, tmp_path: Path) -> None:
    jobs = [job(f"crit-{index:02d}", cause=placed(), diagnosed_at=f"2026-11-{index + 1:02d}T00:00:00+00:00")
            for index in range(14)]
    jobs += [make_fleet_job(job_id=f"clean-{index}") for index in range(5)]
    path = write_page(tmp_path / "reports" / "index.html", render_index(make_fleet(jobs=jobs)))
    with open_page(browser, path) as loaded:
        page = loaded.page
        assert page.locator("#attention li.attention").count() == 10
        more = page.locator("a.attention-more")
        assert more.inner_text() == "4 more need attention"
        more.click()
        assert page.evaluate("location.hash") == "#job-list"
        assert page.locator("#show").input_value() == "attention"
        assert loaded.texts("#shown") == ["14 of 19 jobs"]
        assert loaded.texts("#jobs tbody .job-id") == [f"crit-{index:02d}" for index in range(13, -1, -1)]
        loaded.assert_quiet()


def test_a_failed_jobs_line_finds_its_row(browser: Any, tmp_path: Path) -> None:
    path = write_page(tmp_path / "reports" / "index.html", render_index(_fleet()))
    with open_page(browser, path) as loaded:
        page = loaded.page
        page.locator("#attention li[data-job-id='broken-upload'] a").click()
        assert page.evaluate("location.hash") == "#job-list"
        assert page.locator("#filter").input_value() == "broken-upload"
        assert loaded.texts("#jobs tbody .job-id") == ["broken-upload"]
        assert loaded.texts("#jobs tbody .error") == ["OSError: truncated segment-000003.jsonl"]
        loaded.assert_quiet()


def test_without_javascript_the_attention_list_and_order_stand(browser: Any, tmp_path: Path) -> None:
    path = write_page(tmp_path / "index.html", render_index(_fleet()))
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(path.resolve().as_uri(), wait_until="load")
        assert page.locator("#attention li.attention").evaluate_all("items => items.map(i => i.dataset.jobId || '')") \
            == ["oom", "drifting-rank", "restarted", "clean-003", "missing-ranks", "broken-upload", ""]
        assert page.locator("#jobs tbody tr").first.get_attribute("data-job-id") == "oom"
        assert page.locator("details.alerts-folded[open]").count() == 0
    finally:
        context.close()


def test_hostile_strings_stay_text_in_the_attention_list(browser: Any, tmp_path: Path) -> None:
    hostile = placed(oom=True, host=HOSTILE, phase_path=SCRIPT_PAYLOAD, oom_dump=f"out of memory: {IMG_PAYLOAD}")
    jobs = [job(HOSTILE, cause=hostile, worst_session=SCRIPT_PAYLOAD, worst_attempt="attempt 1 of 2, interrupted, x"),
            make_fleet_job(job_id=f"{IMG_PAYLOAD}</script>\u2028", status="failed", error=HOSTILE),
            job("plain", verdict="warning", cause=placed(signal=SCRIPT_PAYLOAD, severity="warning"))]
    fleet = with_fleet_intel(make_fleet(jobs=jobs), trends=[], regressions=[],
                             suspects=[make_suspect(host=IMG_PAYLOAD, device_id=1)])
    html = render_index(fleet)
    assert SCRIPT_PAYLOAD not in html and "<img" not in html
    path = write_page(tmp_path / "index.html", html)
    with open_page(browser, path, screenshot=tmp_path / "index-attention-hostile.png") as loaded:
        page = loaded.page
        loaded.assert_quiet()
        assert page.locator("img, iframe, object, embed").count() == 0
        assert page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        items = page.locator("#attention li.attention")
        assert items.evaluate_all("items => items.map(i => i.dataset.jobId || i.dataset.host)") == [
            HOSTILE, "plain", f"{IMG_PAYLOAD}</script>\u2028", IMG_PAYLOAD]
        assert items.first.locator(".attention-link").inner_text() == HOSTILE
        assert items.first.locator(".session-id").get_attribute("title") == SCRIPT_PAYLOAD
        assert f"({HOSTILE}, GPU 3)" in items.first.inner_text() and f"in {SCRIPT_PAYLOAD}" in items.first.inner_text()
        assert items.nth(1).locator(".signal code").inner_text() == SCRIPT_PAYLOAD
        assert items.nth(2).inner_text().endswith(f"could not be diagnosed: {HOSTILE}")
        loaded.assert_quiet()
