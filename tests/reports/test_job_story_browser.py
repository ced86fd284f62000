"""The job page tells the job's story (issue 28), in headless Chromium at 1440x900 and at a 390x844 phone:
every chart text inside its SVG and every marker inside its plot, a capacity line and headroom label on
every GPU chart, the heat strip's rule and a readable "missing" label, CPU ranks, one card for one
finding, load warnings on the first screen, the worst attempt detailed, what an OOM dump says, host names
that do not wrap. Pages are rendered from real diagnoses of jobs written by stormlog's writers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import JobDiagnosis, diagnose_job
from stormwatch.reports import render_job
from stormwatch.reports.jobdetail import detail_document
from tests import builders as b
from tests.reports import job_story_builders as jb
from tests.reports.builders import diagnosed, read
from tests.reports.fleet_builders import make_job_fleet
from tests.reports.pages import LoadedPage, write_page

VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}
LONG_HOST = "gpu-node-{rank}.a-very-long-rack-name.cluster.example.internal"

TEXTS_OUTSIDE_JS = """() => {
  const out = [];
  for (const svg of document.querySelectorAll('svg')) {
    const box = svg.getBoundingClientRect();
    for (const text of svg.querySelectorAll('text')) {
      const r = text.getBoundingClientRect();
      if (!text.textContent.trim() || r.width === 0) continue;
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
        out.push(`${svg.getAttribute('class')}: ${text.getAttribute('class')} '${text.textContent.trim()}'`);
    }
  }
  return out;
}"""

MARKS_OUTSIDE_PLOT_JS = """() => {
  const out = [];
  for (const svg of document.querySelectorAll('svg.chart')) {
    const plot = svg.querySelector('rect.plot').getBoundingClientRect();
    for (const mark of svg.querySelectorAll('.marker-tag, line.capacity, .capacity-label, circle.anomaly')) {
      const r = mark.getBoundingClientRect();
      const cx = (r.left + r.right) / 2;
      if (r.left < plot.left - 1 || r.right > plot.right + 1 || (mark.tagName !== 'circle' && r.top < plot.top - 1))
        out.push(`rank ${svg.dataset.rank}: ${mark.getAttribute('class')} '${mark.textContent.trim()}' ${cx}`);
    }
  }
  return out;
}"""

CONTRAST_JS = """([first, second]) => {
  const rgb = selector => getComputedStyle(document.querySelector(selector)).fill.match(/[\\d.]+/g).map(Number);
  const lum = c => { const v = c.map(x => x / 255).map(x => x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4);
                     return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  const [a, b] = [lum(rgb(first)), lum(rgb(second))];
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""


@contextmanager
def opened(browser: Any, path: Path, viewport: str, *, shot: Path | None = None,
           javascript: bool = True) -> Iterator[LoadedPage]:
    width, height = VIEWPORTS[viewport]
    context = browser.new_context(viewport={"width": width, "height": height}, java_script_enabled=javascript)
    page = context.new_page()
    loaded = LoadedPage(page, path.resolve().as_uri())
    page.on("console", lambda message: loaded.console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: loaded.errors.append(str(error)))
    page.on("request", lambda request: loaded.requests.append(request.url))
    try:
        page.goto(loaded.url, wait_until="load")
        if shot is not None:
            page.screenshot(path=str(shot), full_page=True)
        yield loaded
    finally:
        context.close()


def _in_first_screen(loaded: LoadedPage, selector: str, viewport: str) -> bool:
    box = loaded.page.locator(selector).first.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + min(box["height"], 40) <= VIEWPORTS[viewport][1]


def _job(tmp_path_factory: pytest.TempPathFactory, name: str, write: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp(name)
    write(root)
    return diagnosed(root, job_id=name)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, missing_ranks_doc: dict[str, Any]) -> dict[str, Path]:
    """Job pages on disk: near capacity (OOM at the right edge, a rank far below), CPU, a malformed line,
    one rank, missing ranks with long host names."""
    folder = tmp_path_factory.mktemp("pages")
    documents = {
        "near": _job(tmp_path_factory, "near-capacity", jb.write_near_capacity_job),
        "cpu": _job(tmp_path_factory, "cpu-job", jb.write_cpu_job),
        "bad-line": _job(tmp_path_factory, "bad-line", jb.write_job_with_bad_line),
        "one-rank": _job(tmp_path_factory, "one-rank", jb.write_single_rank_job),
        "missing": make_job_fleet(missing_ranks_doc, host=LONG_HOST, outliers=[]),
    }
    return {name: write_page(folder / name / "report.html", render_job(read(document)))
            for name, document in documents.items()}


@pytest.fixture(scope="module")
def restarted_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, JobDiagnosis]:
    root = tmp_path_factory.mktemp("restarted") / "train-7b"
    b.write_restarted_job(root)
    job = diagnose_job([root], job_id="train-7b", source_name=str(root), options=DiagnoseOptions(all_sessions=True))
    page = write_page(root.parent / "reports" / "report.html", render_job(job.document, detail=detail_document(job)))
    return page, job


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("name", ["near", "cpu", "missing", "one-rank"])
def test_chart_texts_stay_inside_their_svg_and_marks_inside_the_plot(
        browser: Any, pages: dict[str, Path], tmp_path: Path, name: str, viewport: str) -> None:
    with opened(browser, pages[name], viewport, shot=tmp_path / f"{name}-{viewport}.png") as loaded:
        loaded.assert_quiet()
        assert loaded.page.locator("svg.chart text").count() > 10
        assert loaded.page.evaluate(TEXTS_OUTSIDE_JS) == []
        assert loaded.page.evaluate(MARKS_OUTSIDE_PLOT_JS) == []
        if name == "near":  # the OOM at the last sample: its tag reads whole, left of its line
            tag = loaded.page.locator("#rank-0 text.marker-tag")
            assert tag.text_content() == "OOM" and "a-end" in (tag.get_attribute("class") or "")


def test_every_gpu_chart_draws_its_capacity_above_the_data(browser: Any, pages: dict[str, Path]) -> None:
    with opened(browser, pages["near"], "desktop") as loaded:
        page = loaded.page
        for rank, broken in (("0", False), ("1", True)):
            chart = page.locator(f"svg.chart[data-rank='{rank}']")
            assert chart.locator("line.capacity").count() == 1
            headroom = chart.locator("text.headroom").text_content() or ""
            assert re.fullmatch(r"peak \d+(\.\d)? of 80 GiB, \d+ % free", headroom), headroom
            line_y = chart.locator("line.capacity").bounding_box()["y"]
            data_top = min(box["y"] for box in (chart.locator(f"path[data-series='{name}']").bounding_box()
                                                for name in ("allocated", "reserved")))
            plot = chart.locator("rect.plot").first.bounding_box()
            assert plot["y"] <= line_y < data_top  # visible, above the data
            assert (chart.locator(".axis-break").count() == 1) is broken
            if not broken:  # near the limit the line sits at the top and the data still fills much of the panel
                data_bottom = plot["y"] + plot["height"]
                assert line_y - plot["y"] < 0.1 * plot["height"]
                assert data_bottom - data_top >= 0.4 * (data_bottom - line_y)


def test_cpu_ranks_show_cpu_and_no_allocator_or_gap_axes(browser: Any, pages: dict[str, Path]) -> None:
    with opened(browser, pages["cpu"], "desktop") as loaded:
        page = loaded.page
        assert loaded.texts("table.ranks td.device") == ["CPU", "CPU"]
        assert page.locator("figure.rank-chart.device-cpu").count() == 2
        assert page.locator("svg.chart .gap-panel, svg.chart line.capacity, svg.chart text.headroom").count() == 0
        notes = loaded.texts("svg.chart text.capacity-note")
        assert len(notes) == 2 and all(note.startswith("CPU: peak ") for note in notes)
        assert all("CPU" in caption for caption in loaded.texts("figure.rank-chart figcaption"))
        ticks = page.locator("#rank-0 text.ylabel").all_text_contents()
        assert len(set(ticks)) == len(ticks) > 1


def test_the_heat_strip_shows_only_when_ranks_differ_and_missing_reads_clearly(
        browser: Any, pages: dict[str, Path]) -> None:
    with opened(browser, pages["one-rank"], "desktop") as loaded:
        assert loaded.page.locator("svg.heat").count() == 0
        assert loaded.visible_texts("p.heatstrip-skipped")[0].startswith("Not shown: the job has one rank")
    with opened(browser, pages["missing"], "desktop") as loaded:
        assert loaded.page.locator("svg.heat").count() == 1 and loaded.page.locator("p.heatstrip-skipped").count() == 0
        assert loaded.texts("g.heat-row.r-missing text.missing-note") == ["rank 2 missing: no telemetry",
                                                                          "rank 6 missing: no telemetry"]
        label = "g.heat-row.r-missing text.missing-note"
        assert loaded.page.evaluate(CONTRAST_JS, [label, "pattern#hatch rect.hatch-bg"]) >= 4.5
        assert loaded.page.evaluate(CONTRAST_JS, [label, "pattern#hatch rect.hatch"]) >= 3.0


def test_one_card_when_the_earliest_and_most_severe_cause_are_one(browser: Any, pages: dict[str, Path]) -> None:
    with opened(browser, pages["near"], "desktop") as loaded:
        cards = loaded.page.locator("article.indicator")
        assert cards.count() == 1 and cards.get_attribute("data-kind") == "earliest most_severe"
        assert loaded.texts("article.indicator h3") == ["Earliest and most severe anomaly"]
        assert loaded.texts("article.indicator .headline")[0].startswith(
            "Out of memory alert:error on rank 0 (node-0, GPU 0)")
        assert loaded.texts("#outliers-not-checked")[0].startswith(
            "Peer outliers were not checked: outliers need 4 or more ranks")


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_load_warnings_are_on_the_first_screen_with_file_and_line(browser: Any, pages: dict[str, Path],
                                                                  viewport: str) -> None:
    with opened(browser, pages["bad-line"], viewport) as loaded:
        assert _in_first_screen(loaded, "section#load-warnings", viewport)
        (item,) = loaded.texts("section#load-warnings li")
        assert re.fullmatch(r".*/rank_1/events\.jsonl line \d+: malformed JSON .*\(line skipped\)", item), item
        loaded.page.goto(f"{loaded.url}#load-warnings")  # the index links here
        assert loaded.page.evaluate("location.hash") == "#load-warnings"
        assert _in_first_screen(loaded, "section#load-warnings h2", viewport)


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_the_restarted_job_page_details_its_worst_attempt(browser: Any, restarted_page: tuple[Path, JobDiagnosis],
                                                          tmp_path: Path, viewport: str) -> None:
    path, job = restarted_page
    first = job.attempts[0]
    with opened(browser, path, viewport, shot=tmp_path / f"restarted-{viewport}.png") as loaded:
        loaded.assert_quiet()
        assert _in_first_screen(loaded, "#verdict-cause", viewport)
        cause = loaded.texts("#verdict-cause")[0]
        assert cause.startswith("Out of memory alert:error on rank 3") and "into attempt 1 of 2" in cause
        banner = loaded.texts("#verdict")[0]
        assert first.session_id not in banner and f"{first.session_id[:15]}…" in banner
        assert first.session_id in loaded.page.locator("#verdict .session-id").evaluate_all(
            "ids => ids.map(id => id.title)")
        assert loaded.page.locator("table.attempts tr.shown").get_attribute("data-attempt") == "1"
        assert loaded.texts("#other-attempts")[0].startswith("Other attempts: attempt 2 of 2 (completed, clean)")
        assert "Exit code" not in banner


def test_an_oom_dump_is_said_in_plain_words(browser: Any, stormlog43: Path, tmp_path: Path) -> None:
    from tests.stormlog43_oom import RankSpec, write_oom_job

    root = write_oom_job(tmp_path / "job", [RankSpec(0, oom=True)])
    document = diagnosed(root, job_id="job-oom")
    assert document["oom_dumps"]
    path = write_page(tmp_path / "report.html", render_job(read(document)))
    with opened(browser, path, "desktop") as loaded:
        said = "Out of memory on rank 0: tried to allocate 2.0 GiB with 1.1 GiB free of 80 GiB"
        assert loaded.texts("#verdict-cause")[0].startswith("Out of memory alert:error on rank 0")
        assert loaded.texts("#verdict-oom-dump") == [said]
        assert loaded.texts("article.indicator .oom-dump") == [said]
        assert loaded.page.locator("svg.chart line.capacity").count() == 1


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_host_names_do_not_wrap(browser: Any, pages: dict[str, Path], viewport: str) -> None:
    with opened(browser, pages["missing"], viewport) as loaded:
        cells = loaded.page.locator("table.ranks td.host").evaluate_all("""cells => cells.map(cell => {
            const range = document.createRange();
            range.selectNodeContents(cell);
            const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
            return {text: cell.textContent, title: cell.title, lines: tops.size,
                    cut: cell.scrollWidth > cell.clientWidth};
        })""")
        long = [cell for cell in cells if cell["text"] != "—"]
        assert long and all(cell["lines"] <= 1 and cell["cut"] and cell["title"] == cell["text"] for cell in long)


def test_the_job_page_reads_without_javascript(browser: Any, restarted_page: tuple[Path, JobDiagnosis]) -> None:
    path, _ = restarted_page
    with opened(browser, path, "desktop", javascript=False) as loaded:
        assert loaded.texts("#verdict-cause")[0].startswith("Out of memory")
        assert loaded.page.locator("svg.chart line.capacity").count() == 4
