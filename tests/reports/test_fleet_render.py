"""Fleet comparisons (issue 16) rendered without a browser: the index's trends, regressions, suspect
hosts, coverage and outlier marks; the job report's peer outliers and earlier runs; older documents
without the members; malformed members; hostile strings escaped; the data block stays compact."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from stormwatch.outputs.document import DocumentError
from stormwatch.reports import render_index, render_job
from stormwatch.reports.fleetdata import fleet_data
from stormwatch.reports.fleetintel import MAX_TABLE_ROWS
from stormwatch.reports.fleetview import fleet_view
from stormwatch.reports.minicharts import sparkline, stacked_bars
from tests import builders as b
from tests.reports.builders import (
    HOSTILE,
    IMG_PAYLOAD,
    SCRIPT_PAYLOAD,
    large_document,
    make_fleet,
    make_fleet_job,
    read,
)
from tests.reports.fleet_builders import (
    NIGHTS,
    make_job_fleet,
    make_outlier,
    make_regression,
    make_suspect,
    with_fleet_intel,
)


def _section(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}"')
    return html[start:html.index("</section>", start)]


def _intel_fleet(**options: Any) -> dict[str, Any]:
    jobs = [make_fleet_job(job_id="job-1", verdict="warning"),
            {**make_fleet_job(job_id="job-2"), "outlier_ranks": [make_outlier(rank=5), make_outlier(rank=3),
                                                                 make_outlier(rank=3, metric="hidden_gap_peak_bytes")]}]
    return with_fleet_intel(make_fleet(jobs=jobs), **options)


def test_index_shows_trends_regressions_suspects_and_coverage() -> None:
    html = render_index(_intel_fleet())
    trends = _section(html, "trends")
    assert trends.count('<g class="bar">') == 2 * len(NIGHTS)
    assert "2026-11-14: 29 jobs · critical 1 · warning 3 · info 1 · clean 23 · empty 1" in trends
    assert f">{NIGHTS[0]}</text>" in trends and f">{NIGHTS[-1]}</text>" in trends
    assert trends.count('class="dot point"') == len(NIGHTS) - 1  # the null night has no point
    assert ">40.0 GiB</text>" in trends and "p95 peak reserved 43.0 GiB" in trends
    regressions = _section(html, "regressions")
    assert '<a href="job-1/report.html">job-1</a>' in regressions
    assert all(text in regressions for text in ("Peak reserved", "41.0 GiB", "35.0 GiB", "+17.1 %", ">5<"))
    suspects = _section(html, "suspects")
    assert all(text in suspects for text in ("node-17", ">12<", ">6<", "50.0 %", "8.0 %", "6.2×"))
    coverage = _section(html, "coverage")
    assert "97.5 % (936 of 960)" in coverage and "v3: 900 · v4: 44" in coverage
    assert "stormlog: 930 · nvml-sidecar: 14" in coverage and "Sessions without stop</dt><dd>7<" in coverage
    assert "No history yet." not in html
    assert html.count('class="outlier-mark"') == 1 and "⚑ outliers 3,5" in html


def test_index_without_the_new_members_says_no_history_yet() -> None:
    html = render_index(make_fleet(jobs=[make_fleet_job()]))
    for section in ("trends", "regressions", "suspects", "coverage"):
        assert "No history yet." in _section(html, section)
    assert 'class="outlier-mark"' not in html
    empty = render_index({**make_fleet(jobs=[]), "regressions": [], "suspect_hosts": []})
    assert "No job regressed" in empty and "No host or device stands out." in empty


@pytest.mark.parametrize("value", [None, "x", 5, {"a": 1}, [1, "x", None, {"night": 3}], [{"night": "n"}]])
def test_malformed_members_still_render(value: Any) -> None:
    fleet = {**make_fleet(jobs=[{**make_fleet_job(), "outlier_ranks": value, "coverage": value}]),
             "trends": value, "regressions": value, "suspect_hosts": value, "coverage": value}
    assert render_index(fleet).startswith("<!doctype html>")
    document = {**large_document(ranks=2, samples=50),
                "fleet": {"ranks": value, "outlier_ranks": value, "coverage": value, "regression": value}}
    with pytest.raises(DocumentError, match=r'member "fleet\.'):  # the job page reads a typed document
        read(document)


def test_tables_are_capped() -> None:
    many = [make_regression(job_id=f"job-{i}") for i in range(MAX_TABLE_ROWS + 7)]
    html = render_index(_intel_fleet(regressions=many, suspects=[make_suspect(host=f"h{i}") for i in range(3)]))
    assert _section(html, "regressions").count("<tr>") == MAX_TABLE_ROWS + 1  # and the header
    assert "7 more in fleet.json." in html


def test_hostile_strings_stay_escaped_on_the_index() -> None:
    fleet = _intel_fleet(regressions=[make_regression(job_id=HOSTILE, job_name=IMG_PAYLOAD, metric=SCRIPT_PAYLOAD)],
                         suspects=[make_suspect(host=HOSTILE, device_id=IMG_PAYLOAD)],
                         trends=[{"night": SCRIPT_PAYLOAD, "jobs": 1}])
    fleet["coverage"]["collectors"] = {HOSTILE: 3}
    fleet["coverage"]["schema_versions"] = {IMG_PAYLOAD: 1}
    html = render_index(fleet)
    assert SCRIPT_PAYLOAD not in html and "<img" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5


def test_outlier_ranks_travel_in_the_data_block_compactly() -> None:
    fleet = _intel_fleet()
    data = fleet_data(fleet_view(fleet).rows)
    column = data["columns"].index("outliers")
    assert [row[column] for row in data["rows"]] == ["", "3,5"]
    without = fleet_data(fleet_view(make_fleet(jobs=fleet["jobs"][:1])).rows)
    with_column = len(orjson.dumps(without["rows"]))
    without_column = [[*row[:column], *row[column + 1 :]] for row in without["rows"]]
    assert with_column - len(orjson.dumps(without_column)) == 3  # ,"" per job


def test_job_report_shows_fleet_ranks_outliers_and_earlier_runs(missing_ranks_doc: dict[str, Any]) -> None:
    document = make_job_fleet(missing_ranks_doc, outliers=[make_outlier(rank=1), make_outlier(rank=4, robust_z=-5.5)])
    html = render_job(read(document))
    ranks = html[html.index('<table class="ranks">'):]
    ranks = ranks[:ranks.index("</table>")]
    assert ranks.count('class="host">node-') == 6 and ranks.count("outlier-badge") == 2
    assert re.search(r'<tr class="\w+ outlier" data-rank="1"', ranks) and ">31.0 GiB<" in ranks
    assert 'data-rank="2" id="rank-row-2">' in ranks  # a missing rank: no fleet entry, dashes
    outliers = _section(html, "outliers")
    assert outliers.count("<tr data-rank=") == 2 and "+6.2" in outliers and "-5.5" in outliers
    assert "node-4" in outliers and "40.0 GiB" in outliers and "30.0 GiB" in outliers
    assert "75.0 % (6 of 8)" in outliers
    comparison = _section(html, "comparison")
    assert comparison.count('<svg class="mini spark"') == 2 and comparison.count('class="dot current"') == 2
    assert comparison.count('class="dot earlier"') == 10 and comparison.count('class="baseline"') == 2
    assert "+17.1 %" in comparison and "baseline 35.0 GiB" in comparison and "this run: 41.0 GiB" in comparison
    assert "cmp-regression" in comparison and "within baseline" in comparison


def test_job_report_without_a_baseline_or_without_fleet(clean_doc: dict[str, Any]) -> None:
    comparison = _section(render_job(read(make_job_fleet(clean_doc, regression="no_baseline"))), "comparison")
    assert "no baseline yet (2 earlier runs)" in comparison and comparison.count('class="dot earlier"') == 2
    html = render_job(read(make_job_fleet(clean_doc, outliers=[], regression=None)))
    assert "No rank stands out from its peers." in html and "No history yet." in _section(html, "comparison")
    old = render_job(read({key: value for key, value in clean_doc.items() if key != "fleet"}))
    assert 'id="outliers"' not in old and "No history yet." in _section(old, "comparison")
    ranks = old.split('<table class="ranks">')[1].split("</table>")[0]
    assert "outlier" not in ranks and "<th>Host</th>" not in ranks


def test_hostile_hosts_stay_escaped_on_the_job_report(clean_doc: dict[str, Any]) -> None:
    document = make_job_fleet(clean_doc, host=HOSTILE + "{rank}", outliers=[make_outlier(rank=0)])
    document["fleet"]["regression"]["job_name"] = SCRIPT_PAYLOAD
    document["fleet"]["regression"]["metrics"][0]["job_name"] = IMG_PAYLOAD
    html = render_job(read(document))
    assert SCRIPT_PAYLOAD not in html and "<img" not in html and html.count("&lt;script&gt;") >= 3


def test_mini_chart_geometry() -> None:
    chart = stacked_bars(["a", "b"], [[("v-critical", 2), ("v-clean", 2)], [("v-clean", 0)]], label="x")
    first, second = chart.bars
    assert [segment.css for segment in first.segments] == ["v-critical", "v-clean"] and second.segments == ()
    assert first.segments[0].y + first.segments[0].height == pytest.approx(chart.bottom, abs=0.1)
    assert first.segments[1].y == pytest.approx(chart.top, abs=0.1)
    spark = sparkline([("t0", b.GIB), ("t1", 2 * b.GIB)], 3 * b.GIB, 2 * b.GIB, label="x")
    assert [dot.css for dot in spark.dots] == ["earlier", "earlier", "current"]
    assert spark.dots[-1].y < spark.baseline_y < spark.dots[0].y  # type: ignore[operator]
    alone = sparkline([], b.GIB, None, label="x")
    assert alone.path == "" and len(alone.dots) == 1 and alone.baseline_y is None


def test_the_engines_current_spellings_render_too(clean_doc: dict[str, Any]) -> None:
    """Counts under ``verdicts``, ``peak_reserved_p95_bytes``, ``ranks_present_percent`` and ``earlier_bytes``."""
    trends = [{"night": night, "jobs": 3, "verdicts": {"critical": 1, "clean": 2},
               "peak_reserved_p95_bytes": 8 * b.GIB} for night in NIGHTS[:3]]
    fleet = with_fleet_intel(make_fleet(jobs=[make_fleet_job()]), trends=trends)
    fleet["coverage"] = {"expected_ranks": 8, "present_ranks": 6, "ranks_present_percent": 75.0}
    html = render_index(fleet)
    assert "2026-11-03: 3 jobs · critical 1 · warning 0" not in html and "critical 1 · clean 2" in html
    assert "p95 peak reserved 8.00 GiB" in html and "75.0 % (6 of 8)" in html
    comparison = _section(render_job(read(make_job_fleet(clean_doc))), "comparison")
    assert comparison.count('class="dot earlier"') == 10 and "earlier run 5: 35.2 GiB" in comparison
