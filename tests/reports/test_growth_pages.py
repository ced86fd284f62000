"""Growth, leaks, headroom, capacity warnings and regression owners on the pages (issue 30), rendered without
a browser: the job page's "Growth and headroom" part and the leak lines in its banner, the index's headroom
line and its "Needs attention" list with leaks, capacity warnings and regressions owned by a rank or
explained by a suspect device; every telemetry string escaped."""

from __future__ import annotations

import html as html_module
import re
from typing import Any

import pytest

from stormwatch.reports import render_index, render_job
from stormwatch.reports.fleetheadroom import MAX_LISTED
from stormwatch.reports.jobgrowth import format_hours, format_rate
from tests import builders as b
from tests.reports.attention_builders import attention_items, job
from tests.reports.builders import IMG_PAYLOAD, SCRIPT_PAYLOAD, make_fleet, read
from tests.reports.fleet_builders import make_job_fleet, with_fleet_intel
from tests.reports.growth_builders import (
    capacity_entry,
    growth_document,
    growth_fleet,
    headroom_member,
    leaking,
    leaking_job,
    owned_regression,
    with_growth,
)


def _section(page: str, section_id: str) -> str:
    start = page.index(f'<section id="{section_id}"')
    return page[start:page.index("</section>", start)]


def _text(fragment: str) -> str:
    return html_module.unescape(" ".join(re.sub(r"<[^>]+>", " ", fragment).split()))


def _row(page: str, rank: int) -> str:
    start = page.index(f'id="growth-row-{rank}"')
    return _text(page[start:page.index("</tr>", start)])


@pytest.mark.parametrize(("bytes_per_hour", "text"), [
    (1.2 * b.GIB, "1.2 GiB/h"), (300 * b.MIB, "300 MiB/h"), (3.25 * b.MIB, "3.2 MiB/h"), (-12 * b.MIB, "−12 MiB/h"),
    (0.0, "0.0 MiB/h"), (None, "—"), (float("nan"), "—"),
])
def test_growth_rates_read_in_gib_or_mib_per_hour(bytes_per_hour: float | None, text: str) -> None:
    assert format_rate(bytes_per_hour) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (42 * 60, "42 min"), (3.4 * 3600, "3.4 h"), (47.9 * 3600, "47.9 h"), (5.2 * 86400, "5.2 days"), (None, "—"),
])
def test_projections_read_in_minutes_hours_or_days(seconds: float | None, text: str) -> None:
    assert format_hours(seconds) == text


@pytest.fixture
def growth_doc(clean_doc: dict[str, Any]) -> dict[str, Any]:
    return growth_document(clean_doc, host=f"node-{IMG_PAYLOAD}-{{rank}}")


def test_the_job_page_tells_each_ranks_growth_projection_and_headroom(growth_doc: dict[str, Any]) -> None:
    page = render_job(read(growth_doc))
    part = _section(page, "growth")
    assert "Growth and headroom" in part
    assert "rank 0 grows 1.2 GiB/h; at this rate it would run out of the 80 GiB device 3.4 h after start" in _row(
        page, 0)
    assert "99 %" in _row(page, 0) and "leak" in _row(page, 0) and "38.8 %" in _row(page, 0)
    assert "rank 1 does not grow (−12 MiB/h)" in _row(page, 1) and " no " in f" {_row(page, 1)} "
    assert "No growth figure: no device capacity recorded (CPU or unknown device)" in _row(page, 2)
    assert "rank 2 grows" not in part
    assert "rank 3 grows 300 MiB/h; at this rate it would run out of the 80 GiB device 40.0 h after start" in _row(
        page, 3)
    # headroom: the fullest rank used 34 of 80 GiB; unused (49 + 48 + 46) GiB × 2 h + 47 GiB × 1 h
    assert _text(_section(page, "verdict")).count("fullest rank used 42.5 % · 333.0 GiB·h unused") == 1


def test_leaks_lead_the_job_page_in_its_banner(growth_doc: dict[str, Any]) -> None:
    banner = _section(render_job(read(growth_doc)), "verdict")
    lines = re.findall(r'<li class="leak-line" data-rank="(\d+)">(.*?)</li>', banner, re.DOTALL)
    assert [rank for rank, _ in lines] == ["0", "3"]
    first = _text(lines[0][1])
    assert first.startswith("Memory leak leak on rank 0 (node-")
    assert first.endswith(": grows 1.2 GiB/h; at this rate it would run out of the 80 GiB device 3.4 h after start")
    assert banner.index('id="leak-lines"') < banner.index('id="verdict-summary"')


def test_growth_telemetry_is_escaped(growth_doc: dict[str, Any]) -> None:
    page = render_job(read(growth_doc))
    for part in (_section(page, "growth"), _section(page, "verdict")):
        assert IMG_PAYLOAD not in part
        assert html_module.escape(IMG_PAYLOAD, quote=True) in part or "&#34;&gt;&lt;img" in part


@pytest.mark.parametrize("growth", [None, []], ids=["no-fleet-growth", "empty-growth"])
def test_a_document_without_growth_has_no_growth_part(clean_doc: dict[str, Any], growth: list[Any] | None) -> None:
    document = make_job_fleet(clean_doc, outliers=[], regression=None)
    if growth is not None:
        document = {**document, "fleet": {**document["fleet"], "growth": growth}}
    page = render_job(read(document))
    assert 'id="growth"' not in page and 'id="leak-lines"' not in page and 'id="job-headroom"' not in page


def test_more_than_three_leaking_ranks_are_counted_not_listed(clean_doc: dict[str, Any]) -> None:
    placed_doc = make_job_fleet(clean_doc, outliers=[], regression=None)
    document = with_growth(placed_doc, [leaking(rank) for rank in range(4)])
    banner = _section(render_job(read(document)), "verdict")
    assert banner.count('class="leak-line"') == 3
    assert "and 1 more leaking rank:" in _text(banner)


# --- the index ------------------------------------------------------------------------------------------

def test_leaks_capacity_and_owned_regressions_need_attention_in_plain_sentences() -> None:
    items = attention_items(render_index(growth_fleet()))
    by_kind = {attrs["data-kind"]: (attrs, text) for attrs, text in items}
    order = {"critical": 0, "warning": 1, "info": 2}
    severities = [str(attrs["data-severity"]) for attrs, _ in items]
    assert severities == sorted(severities, key=order.__getitem__) and severities[-1] == "info"
    assert items[0][0]["data-kind"] == "job"
    leak_attrs, leak = by_kind["leak"]
    assert leak_attrs["data-severity"] == "warning" and leak_attrs["data-job-id"] == "leaky-1"
    assert leak == ("warning leaky-1 Memory leak leak on rank 3 (gpu-node-01, GPU 3): grows 1.2 GiB/h; at this "
                    "rate it would run out of the 80 GiB device 3.4 h after start; 1 more leaking rank")
    _, capacity = by_kind["capacity"]
    assert capacity == ("warning llama-7b Nearing capacity capacity: peak up 6 % a run over 5 runs; at this trend "
                        "it needs more than 80 GiB within 3 runs")
    regressions = [(attrs, text) for attrs, text in items if attrs["data-kind"] == "regression"]
    owned = {attrs["data-job-id"]: (attrs["data-severity"], text) for attrs, text in regressions}
    assert owned["train-c-11"][0] == "warning"
    assert owned["train-c-11"][1].endswith("; carried by rank 5 (node-04, GPU 5)")
    assert owned["train-b-12"][0] == "info"  # the device's problem, not the job's
    assert owned["train-b-12"][1].endswith("; explained by suspect device node-bad/2, not by the job")


def test_links_of_leaks_and_capacity_lead_to_the_job_pages() -> None:
    page = render_index(growth_fleet())
    section = _section(page, "attention")
    assert re.search(r'data-kind="leak"[^>]*>.*?<a class="attention-link" href="leaky-1/report.html">', section,
                     re.DOTALL)
    assert re.search(r'data-kind="capacity"[^>]*>.*?<a class="attention-link" href="train-c-11/report.html">',
                     section, re.DOTALL)


def test_the_regressions_table_says_what_carried_each_regression() -> None:
    table = _section(render_index(growth_fleet()), "regressions")
    assert "<th>Carried by</th>" in table
    rows = {job_id: _text(row) for job_id, row in re.findall(r'<tr[^>]*><td class="job-id"><a [^>]*>([^<]+)</a>'
                                                             r'(.*?)</tr>', table, re.DOTALL)}
    assert rows["train-b-12"].endswith("explained by suspect device node-bad/2")
    assert rows["train-c-11"].endswith("rank 5 (node-04, GPU 5)")


def test_an_older_regression_without_its_carrier_reads_as_before() -> None:
    fleet = with_fleet_intel(make_fleet(jobs=[job("a-1", verdict="clean")]), suspects=[],
                             regressions=[{**owned_regression(job_id="a-1", explained=False),
                                           "rank": None, "host": None, "device_id": None}])
    (_, text), = attention_items(render_index(fleet))
    assert "carried by" not in text and "explained" not in text


def test_the_index_shows_the_fleets_unused_gpu_memory_and_the_jobs_under_half() -> None:
    section = _section(render_index(growth_fleet()), "headroom")
    text = _text(section)
    assert "12,345.6 GiB·h of GPU memory left unused by 40 jobs" in text
    assert "2 jobs used under 50 % of their GPUs" in text
    assert re.findall(r'<li data-job-id="([^"]+)"><a href="([^"]+)">', section) == [
        ("train-c-11", "train-c-11/report.html"), ("train-b-12", "train-b-12/report.html")]
    assert "train-c-11</a>: 12.5 % used</li>" in section


def test_the_under_half_list_is_bounded_for_a_largegrowth_fleet() -> None:
    under = [(f"job-{index:05d}", index / 250) for index in range(10_000)]
    fleet = {**make_fleet(jobs=[]), "headroom": headroom_member(under, counted=10_000, listed=100)}
    section = _section(render_index(fleet), "headroom")
    assert section.count("<li data-job-id=") == MAX_LISTED
    assert "and 9,980 more" in _text(section)


def test_an_index_without_headroom_or_growth_reads_as_before() -> None:
    page = render_index(make_fleet(jobs=[job("a-1", verdict="clean")]))
    assert 'id="headroom"' not in page
    assert 'data-kind="leak"' not in page and 'data-kind="capacity"' not in page


def test_hostile_strings_in_leaks_capacity_and_headroom_are_escaped() -> None:
    hostile = f"{SCRIPT_PAYLOAD}{IMG_PAYLOAD}"
    rows = [leaking_job(hostile, host=hostile)]
    fleet = {**make_fleet(jobs=rows), "capacity": [capacity_entry(job_name=hostile, job_id=hostile)],
             "headroom": headroom_member([(hostile, 3.0)])}
    page = render_index(fleet)
    body = page[:page.index('<script type="application/json"')]
    assert SCRIPT_PAYLOAD not in body and IMG_PAYLOAD not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in _section(page, "headroom")
