"""Issue 28, deliverable 4: the index leads with attention and the pages read right, in a real Chromium.

Two fleets: the demo's (``stormwatch demo``: stormlog-shaped jobs audited by the real Prefect flow) and
one of 200 jobs built as ``bench/index_bench.py`` builds its fleets, with the demo's real rows and job
pages among them (:mod:`tests.reports.fleet200`). Every page is checked at 1440x900 and at a 390x844
phone; the index's first screen also without JavaScript. The most severe job is computed from
fleet.json here, independently of the pages.

Screenshots go to ``$STORMWATCH_SCREENSHOTS`` (default /tmp/stormwatch-screenshots), as
``<fleet>/<viewport>/<page>.png`` (the full page), ``<page>-first-screen.png`` (the viewport before
scrolling; ``-no-js``: the index without JavaScript), listed in ``SCREENSHOTS.txt`` there at the end of
the session.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.reports import attention_pages as ap
from tests.reports import fleet200 as f2
from tests.reports.attention_pages import DESKTOP, PHONE, VIEWPORTS, Viewport, open_at

SCREENSHOTS_DEFAULT = Path("/tmp/stormwatch-screenshots")
FLEETS = ("demo", "fleet200")
#: Pages checked everywhere: each fleet's index, each demo job's page, and the restarted job's attempt pages.
PAGES = (*(("index", fleet) for fleet in FLEETS), *(("job", job) for job in f2.DEMO_JOBS), ("attempts", "restarted"))
JOB_PAGES = tuple(page for page in PAGES if page[0] != "index")


def _page_id(page: tuple[str, str]) -> str:
    return f"{page[0]}:{page[1]}"


def _viewport_id(viewport: Viewport) -> str:
    return viewport.name


@pytest.fixture(scope="session")
def screenshots() -> Iterator[list[Path]]:
    """Paths of the screenshots taken; listed in SCREENSHOTS.txt under their folder at the end."""
    taken: list[Path] = []
    yield taken
    root = _screenshot_root()
    root.mkdir(parents=True, exist_ok=True)
    (root / "SCREENSHOTS.txt").write_text("".join(f"{path}\n" for path in sorted(set(taken))), encoding="utf-8")
    print(f"\n{len(set(taken))} screenshots under {root} (listed in {root / 'SCREENSHOTS.txt'})")


def _screenshot_root() -> Path:
    return Path(os.environ.get("STORMWATCH_SCREENSHOTS") or SCREENSHOTS_DEFAULT)


def _shot(taken: list[Path], fleet: str, viewport: Viewport, name: str) -> Path:
    path = _screenshot_root() / fleet / viewport.name / f"{name}.png"
    taken.append(path)
    return path


@pytest.fixture(scope="module")
def demo_reports(prefect_api: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return f2.run_demo(tmp_path_factory.mktemp("attention-demo") / "demo", prefect_api=prefect_api)


@pytest.fixture(scope="module")
def indexes(demo_reports: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fleet's index.html (fleet.json beside it)."""
    return {"demo": demo_reports / "index.html",
            "fleet200": f2.build_fleet200(demo_reports, tmp_path_factory.mktemp("attention-fleet200"))}


def _fleet(indexes: dict[str, Path], fleet: str) -> dict[str, Any]:
    return f2.read_fleet(indexes[fleet].parent)


def _pages(demo_reports: Path, indexes: dict[str, Path], page: tuple[str, str]) -> list[tuple[str, Path]]:
    """(screenshot name, path) of the page(s) a PAGES entry stands for."""
    kind, name = page
    if kind == "index":
        return [("index", indexes[name])]
    if kind == "job":
        return [(name, demo_reports / name / "report.html")]
    attempts = sorted((demo_reports / name / "sessions").glob("*/report.html"))
    assert len(attempts) >= 2, f"{name} has {len(attempts)} attempt pages"
    return [(f"{name}-attempt-{path.parent.name}", path) for path in attempts]


def _fleet_of(page: tuple[str, str]) -> str:
    return page[1] if page[0] == "index" else "demo"


Facts = list[tuple[str, ap.PageFacts]]  # (screenshot name, facts) per page
Inspect = Callable[..., Facts]


@pytest.fixture(scope="module")
def inspected(browser: Any, demo_reports: Path, indexes: dict[str, Path], screenshots: list[Path]) -> Inspect:
    """``inspected(page, viewport, javascript=True)``: (name, facts) of each of the page's pages, each loaded
    once for the module (with its screenshots) however many tests read it."""
    cache: dict[tuple[tuple[str, str], Viewport, bool], Facts] = {}

    def inspect(page: tuple[str, str], viewport: Viewport, *, javascript: bool = True) -> Facts:
        key = (page, viewport, javascript)
        if key not in cache:
            fleet, suffix = _fleet_of(page), "" if javascript else "-no-js"
            cache[key] = [(name, ap.inspect_page(
                browser, path, viewport, index=page[0] == "index", javascript=javascript,
                screenshot=_shot(screenshots, fleet, viewport, name) if javascript else None,
                first_screen=_shot(screenshots, fleet, viewport, f"{name}-first-screen{suffix}")))
                for name, path in _pages(demo_reports, indexes, page)]
        return cache[key]

    return inspect


def _index(inspected: Inspect, fleet: str, viewport: Viewport, *, javascript: bool = True) -> ap.PageFacts:
    return inspected(("index", fleet), viewport, javascript=javascript)[0][1]


# --- the index's first screen --------------------------------------------------------------------------


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
@pytest.mark.parametrize("fleet", FLEETS)
def test_the_most_severe_jobs_line_is_on_the_first_screen(
    inspected: Inspect, indexes: dict[str, Path], fleet: str, viewport: Viewport, javascript: bool,
) -> None:
    worst = f2.most_severe(_fleet(indexes, fleet))
    found = _index(inspected, fleet, viewport, javascript=javascript).attention
    assert found is not None and found["section"], f"{fleet} index at {viewport.name}: no section#attention"
    lines = [line for line in found["lines"] if line["jobId"] == worst["job_id"]]
    assert lines, (f"{fleet} index at {viewport.name}: no li.attention for the most severe job "
                   f"{worst['job_id']!r} ({worst['verdict']}, {worst['diagnosed_at']}); lines for "
                   f"{[line['jobId'] for line in found['lines'][:5]]}")
    line = lines[0]
    assert line["severity"] == worst["verdict"], line
    assert ap.box_in_first_screen(line["box"], viewport), (
        f"{fleet} index at {viewport.name}: the most severe job's line {line['text'][:120]!r} is at "
        f"{line['box']}, outside the first screen ({viewport.width}x{viewport.height})")


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
@pytest.mark.parametrize("fleet", FLEETS)
def test_the_job_table_starts_with_the_most_severe_job(
    inspected: Inspect, indexes: dict[str, Path], fleet: str, viewport: Viewport, javascript: bool,
) -> None:
    worst = f2.most_severe(_fleet(indexes, fleet))
    row = _index(inspected, fleet, viewport, javascript=javascript).first_row
    assert row is not None, f"{fleet} index at {viewport.name}: no table#jobs"
    assert row["jobId"] == worst["job_id"], (
        f"{fleet} index at {viewport.name}: table#jobs' first row is {row['jobId']!r} ({row['text']!r}), "
        f"not the most severe job {worst['job_id']!r} ({worst['verdict']}, {worst['diagnosed_at']})")


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
@pytest.mark.parametrize("fleet", FLEETS)
def test_attention_lines_show_no_code_without_its_title(
    inspected: Inspect, indexes: dict[str, Path], fleet: str, viewport: Viewport,
) -> None:
    job_ids = {job["job_id"] for job in _fleet(indexes, fleet)["jobs"]}
    found = _index(inspected, fleet, viewport).attention
    assert found is not None and found["lines"], f"{fleet} index at {viewport.name}: no li.attention"
    assert any(line["signals"] for line in found["lines"]), "no attention line names a signal (span.signal)"
    assert ap.signal_problems(found, job_ids=job_ids) == []


@pytest.mark.parametrize("fleet", FLEETS)
def test_attention_lists_critical_first_newest_first_with_links(
    inspected: Inspect, indexes: dict[str, Path], fleet: str,
) -> None:
    document = _fleet(indexes, fleet)
    verdicts = {job["job_id"]: job.get("verdict") for job in document["jobs"]}
    found = _index(inspected, fleet, DESKTOP).attention
    assert found is not None
    lines = found["lines"]
    assert lines and found["none"] == []
    severities = [line["severity"] for line in lines]
    assert set(severities) <= set(f2.ATTENTION_VERDICTS), severities
    assert severities == sorted(severities, key=f2.ATTENTION_VERDICTS.index), "critical lines before warning lines"
    assert [line for line in lines if not line["hrefs"]] == [], "every line links to its job's report"
    shown: list[str] = []  # each job's line for its verdict, in page order
    for line in lines:
        if line["severity"] == verdicts.get(line["jobId"]) and line["jobId"] not in shown:
            shown.append(line["jobId"])
    order = f2.severity_order(document["jobs"])
    assert shown == order[:len(shown)], "verdict lines: critical before warning, newest first, then by job id"
    if len({line["jobId"] for line in lines}) < f2.needing_attention(document):
        assert found["moreIsLast"], f"a capped list ({len(lines)} lines) ends with one a.attention-more"
    if fleet == "demo":  # its reports are all there: the links lead to them
        base = indexes[fleet].parent
        assert [href for line in lines for href in line["hrefs"]
                if not (base / href.split("#")[0]).is_file()] == []


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
def test_an_index_with_nothing_to_attend_says_so_in_one_line(
    browser: Any, demo_reports: Path, tmp_path: Path, screenshots: list[Path], viewport: Viewport,
) -> None:
    index = f2.build_calm_fleet(demo_reports, tmp_path)
    facts = ap.inspect_page(browser, index, viewport, index=True,
                            first_screen=_shot(screenshots, "calm", viewport, "index-first-screen"))
    found = facts.attention
    assert found is not None and found["section"] and found["lines"] == [], found
    assert len(found["none"]) == 1, found["none"]
    assert ap.box_in_first_screen(found["none"][0]["box"], viewport), found["none"]


# --- every page ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_pages_load_quietly_without_network(inspected: Inspect, page: tuple[str, str], viewport: Viewport) -> None:
    for name, facts in inspected(page, viewport):
        assert facts.foreign_requests == [], f"{name} at {viewport.name} made requests"
        assert (facts.console, facts.errors, facts.dialogs) == ([], [], []), f"{name} at {viewport.name}"


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_no_chart_text_is_clipped(inspected: Inspect, page: tuple[str, str], viewport: Viewport) -> None:
    problems: list[str] = []
    for name, facts in inspected(page, viewport):
        assert page[0] == "index" or facts.measured_texts > 0, f"{name}: no SVG text measured"
        problems += [f"{name} at {viewport.name}: {line}" for line in facts.clipped]
    assert problems == []


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_axe_finds_no_serious_or_critical_violation(
    inspected: Inspect, page: tuple[str, str], viewport: Viewport,
) -> None:
    problems = [f"{name} at {viewport.name}: {line}" for name, facts in inspected(page, viewport) for line in facts.axe]
    assert problems == []


# --- job pages -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", JOB_PAGES, ids=_page_id)
def test_rank_charts_draw_capacity_and_label_headroom(inspected: Inspect, page: tuple[str, str]) -> None:
    problems: list[str] = []
    for name, facts in inspected(page, DESKTOP):
        assert facts.charts > 0, f"{name}: no svg.chart"
        problems += [f"{name}: {line}" for line in facts.headroom]
    assert problems == []


@pytest.mark.parametrize("job", f2.DEMO_JOBS)
def test_heat_strip_is_shown_or_says_why_not(inspected: Inspect, demo_reports: Path, job: str) -> None:
    model = orjson.loads((demo_reports / job / "model.json").read_bytes())["model"]
    shown, skipped = inspected(("job", job), DESKTOP)[0][1].heat
    assert (shown, skipped) in ((1, 0), (0, 1)), f"{job}: svg.heat x{shown}, p.heatstrip-skipped x{skipped}"
    if len(model["present_ranks"]) < 2:
        assert skipped == 1, f"{job}: {len(model['present_ranks'])} rank(s), yet a heat strip"


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
def test_load_warnings_are_on_the_job_pages_first_screen(
    inspected: Inspect, demo_reports: Path, viewport: Viewport,
) -> None:
    warned = {job: document["warnings"] for job in f2.DEMO_JOBS
              if (document := orjson.loads((demo_reports / job / "model.json").read_bytes())).get("warnings")}
    assert "broken-artifact" in warned, "the demo's broken artifact has a load warning"
    for job, warnings in warned.items():
        section = inspected(("job", job), viewport)[0][1].load_warnings
        assert section is not None, f"{job}: no section#load-warnings ({len(warnings)} warnings)"
        assert 0 <= section["box"]["top"] < viewport.height, (
            f"{job} at {viewport.name}: section#load-warnings starts at {section['box']['top']:.0f} px")
        for file, line in ap.FILE_LINE.findall(" ".join(warnings)):  # "<path>/rank_1/telemetry.jsonl:11: ..."
            shown = rf"{re.escape(file.split('/')[-1])}\W{{1,7}}(?:line\W{{1,2}})?{line}\b"
            assert re.search(shown, section["text"]), (f"{job}: section#load-warnings does not give "
                                                       f"{file}:{line}: {section['text'][:300]!r}")


# --- the checks themselves can fail --------------------------------------------------------------------

_LINE = ('<li class="attention" data-severity="critical" data-job-id="j1"><a href="j1/report.html">j1</a> '
         '{signal} on rank 3</li>')
_SIGNAL = '<span class="signal" title="{meaning}">{title} <code>{code}</code></span>'
_OOM = _SIGNAL.format(meaning="The job's process failed to allocate device memory and raised an out-of-memory error.",
                      title="Out of memory", code="alert:error")
_CHART = ('<svg class="chart" data-rank="0" viewBox="0 0 400 100" width="400" height="100">'
          '<line class="capacity" x1="0" x2="400" y1="10" y2="10"/>'
          '<text class="headroom" x="{x}" y="30" font-size="12">{headroom}</text></svg>')


_HEAD = '<meta name="viewport" content="width=device-width, initial-scale=1"><title>t</title>'


def _attention_page(lines: str, *, margin: int = 0) -> str:
    return (f'<!doctype html><html lang="en"><head>{_HEAD}</head><body><main style="margin-top:{margin}px">'
            f'<section id="attention"><h2>Needs attention</h2><ul>{lines}</ul></section></main></body></html>')


def _chart_page(chart: str) -> str:
    return f'<!doctype html><html lang="en"><head>{_HEAD}</head><body><main>{chart}</main></body></html>'


def _first_screen(loaded: Any) -> list[str]:
    found = ap.attention(loaded)
    return [line["jobId"] for line in found["lines"] if not ap.box_in_first_screen(line["box"], PHONE)]


def _signals(loaded: Any) -> list[str]:
    return ap.signal_problems(ap.attention(loaded), job_ids={"j1"})


def _clipped(loaded: Any) -> list[str]:
    return ap.clipped_texts(loaded)[1]


def _headroom(loaded: Any) -> list[str]:
    return ap.headroom_problems(loaded)[1]


def _foreign(loaded: Any) -> list[str]:
    return loaded.foreign_requests()  # type: ignore[no-any-return]


CHECKS: list[tuple[str, str, Callable[[Any], list[str]], bool]] = [
    ("line on the first screen", _attention_page(_LINE.format(signal=_OOM)), _first_screen, False),
    ("line below the first screen", _attention_page(_LINE.format(signal=_OOM), margin=2000), _first_screen, True),
    ("signal with title", _attention_page(_LINE.format(signal=_OOM)), _signals, False),
    ("bare code", _attention_page(_LINE.format(signal="<code>alert:error</code>")), _signals, True),
    ("code as a word", _attention_page(_LINE.format(signal="gap_ratio_breach")), _signals, True),
    ("signal without title", _attention_page(_LINE.format(signal=_SIGNAL.format(
        meaning="m.", title="", code="alert:error"))), _signals, True),
    ("signal with a wrong title", _attention_page(_LINE.format(signal=_SIGNAL.format(
        meaning="m.", title="Error", code="alert:error"))), _signals, True),
    ("text inside", _chart_page(_CHART.format(x=200, headroom="peak 77.4 of 80 GiB, 3 % free")), _clipped, False),
    ("text clipped", _chart_page(_CHART.format(x=350, headroom="peak 77.4 of 80 GiB, 3 % free")), _clipped, True),
    ("headroom", _chart_page(_CHART.format(x=20, headroom="peak 77.4 of 80 GiB, 3 % free")), _headroom, False),
    ("headroom missing", _chart_page(_CHART.format(x=20, headroom="77.4 GiB")), _headroom, True),
    ("a CPU rank", _chart_page(_CHART.format(x=20, headroom="CPU: peak 1.05 GiB").replace(
        '<line class="capacity" x1="0" x2="400" y1="10" y2="10"/>', "")), _headroom, False),
    ("a CPU rank with capacity", _chart_page(_CHART.format(x=20, headroom="CPU: peak 1.05 GiB")), _headroom, True),
    ("no requests", _chart_page(""), _foreign, False),
    ("a request", _chart_page('<img alt="x" src="http://127.0.0.1:9/x.png">'), _foreign, True),
    ("accessible", _chart_page('<p style="color:#000;background:#fff">words</p>'), ap.axe_problems, False),
    ("low contrast", _chart_page('<p style="color:#eee;background:#fff">words</p>'), ap.axe_problems, True),
]


@pytest.mark.parametrize(("case", "html", "check", "fails"), CHECKS, ids=[case[0] for case in CHECKS])
def test_each_check_fails_on_a_page_that_breaks_it(
    browser: Any, tmp_path: Path, case: str, html: str, check: Callable[[Any], list[str]], fails: bool,
) -> None:
    path = tmp_path / "page.html"
    path.write_text(html, encoding="utf-8")
    with open_at(browser, path, PHONE) as loaded:
        problems = check(loaded)
    assert bool(problems) is fails, problems


# --- issue 30: leaks, capacity warnings and growth on the pages -----------------------------------------


@pytest.fixture(scope="module")
def growth_pages(clean_doc: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An index whose attention list holds a critical OOM job, a leak, a capacity warning and two owned
    regressions (:func:`~tests.reports.growth_builders.growth_fleet`), and a job page with leaking ranks."""
    from stormwatch.reports import render_index, render_job
    from tests.reports.builders import read
    from tests.reports.growth_builders import growth_document, growth_fleet

    root = tmp_path_factory.mktemp("attention-growth")
    (root / "index.html").write_text(render_index(growth_fleet()), encoding="utf-8")
    (root / "leaky-1").mkdir()
    (root / "leaky-1" / "report.html").write_text(render_job(read(growth_document(clean_doc))), encoding="utf-8")
    return {"index": root / "index.html", "job": root / "leaky-1" / "report.html"}


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
def test_leaks_and_capacity_warnings_need_attention_and_the_index_stays_axe_clean(
    browser: Any, growth_pages: dict[str, Path], screenshots: list[Path], viewport: Viewport,
) -> None:
    facts = ap.inspect_page(browser, growth_pages["index"], viewport, index=True,
                            screenshot=_shot(screenshots, "growth", viewport, "index"),
                            first_screen=_shot(screenshots, "growth", viewport, "index-first-screen"))
    found = facts.attention
    assert found is not None
    lines = found["lines"]
    titles = [signal["title"] for line in lines for signal in line["signals"]]
    assert "Memory leak" in titles and "Nearing capacity" in titles, titles
    severities = [line["severity"] for line in lines]
    order = {"critical": 0, "warning": 1, "info": 2}
    assert severities[0] == "critical" and severities == sorted(severities, key=order.__getitem__), severities
    leak = next(line for line in lines if "Memory leak" in line["text"])
    assert leak["hrefs"] == ["leaky-1/report.html"] and "would run out of the 80 GiB device 3.4 h after start" in (
        leak["text"])
    capacity = next(line for line in lines if "Nearing capacity" in line["text"])
    assert capacity["hrefs"] == ["train-c-11/report.html"] and "within 3 runs" in capacity["text"]
    explained = [line for line in lines if "explained by suspect device node-bad/2" in line["text"]]
    assert [line["severity"] for line in explained] == ["info"]
    assert ap.signal_problems(found, job_ids={"oom-job", "leaky-1", "train-b-12", "train-c-11", "llama-7b"}) == []
    assert ap.box_in_first_screen(lines[0]["box"], viewport)
    assert facts.axe == [] and facts.errors == [] and facts.foreign_requests == []


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=_viewport_id)
def test_a_job_page_with_leaks_leads_with_them_and_stays_axe_clean(
    browser: Any, growth_pages: dict[str, Path], screenshots: list[Path], viewport: Viewport,
) -> None:
    facts = ap.inspect_page(browser, growth_pages["job"], viewport, index=False,
                            screenshot=_shot(screenshots, "growth", viewport, "job-leaky-1"),
                            first_screen=_shot(screenshots, "growth", viewport, "job-leaky-1-first-screen"))
    assert facts.axe == [] and facts.clipped == [] and facts.errors == []
    with open_at(browser, growth_pages["job"], viewport) as loaded:
        leaks = ap.element(loaded, "#leak-lines")
        table = ap.element(loaded, "table.growth")
    assert leaks is not None and ap.box_in_first_screen(leaks["box"], viewport), leaks
    assert "Memory leak" in leaks["text"] and "rank 0" in leaks["text"]
    assert table is not None and "No growth figure: no device capacity recorded" in table["text"]
