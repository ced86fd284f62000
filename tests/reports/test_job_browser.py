"""Job reports in headless Chromium: quiet, self-contained, showing what the model says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stormwatch.reports import render_job
from stormwatch.signals import describe
from tests import builders as b
from tests.reports.builders import large_document, read
from tests.reports.pages import open_page, write_page

ALLOCATOR_SERIES = ["allocated", "reserved", "gap"]
_SAME = ("rank", "signal", "severity", "timestamp_ns", "phase_path", "details")


def _offset(timestamp_ns: int) -> str:
    return f"+{(timestamp_ns - b.START_NS) / 1e9:.3f} s"


def expected_cards(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The first-cause cards a page shows, as (data-kind, indicator): one card when the earliest and the
    most severe cause are the same finding."""
    found = {item["kind"]: item for item in document["model"]["indicators"]}
    earliest, severe = found.get("earliest"), found.get("most_severe")
    if earliest and severe and all(earliest[key] == severe[key] for key in _SAME):
        return [("earliest most_severe", earliest)]
    return [(kind, item) for kind, item in (("earliest", earliest), ("most_severe", severe)) if item]


def signal_title(document: dict[str, Any], indicator: dict[str, Any]) -> str:
    """The plain words of an indicator's signal: an ``alert:error`` at its rank's OOM marker reads "Out of memory"."""
    markers = document["model"]["markers_by_rank"].get(str(indicator["rank"]), [])
    oom = indicator["signal"] == "alert:error" and any(
        marker["kind"] == "oom" and marker["start_ns"] == indicator["timestamp_ns"] for marker in markers)
    return describe(indicator["signal"], oom=oom).title


@pytest.mark.parametrize(
    ("fixture", "series"),
    [
        ("missing_ranks_doc", ALLOCATOR_SERIES),
        ("collective_doc", ALLOCATOR_SERIES),
        ("spike_doc", ALLOCATOR_SERIES),
        ("drift_doc", ALLOCATOR_SERIES),
        ("clean_doc", ALLOCATOR_SERIES),
        ("device_only_doc", ["device_used"]),
        ("empty_doc", []),
    ],
)
def test_report_loads_quietly_with_one_chart_per_present_rank(
    browser: Any, request: pytest.FixtureRequest, tmp_path: Path, fixture: str, series: list[str]
) -> None:
    document = request.getfixturevalue(fixture)
    model = document["model"]
    path = write_page(tmp_path / "reports" / document["job_id"] / "report.html", render_job(read(document)))
    with open_page(browser, path, screenshot=tmp_path / f"{fixture}.png") as loaded:
        loaded.assert_quiet()
        page = loaded.page
        assert loaded.texts(".verdict-label") == [document["verdict"]["status"].upper()]
        assert loaded.texts("#verdict-summary") == [document["verdict"]["summary"]]
        charted = [int(rank) for rank in page.locator("figure.rank-chart").evaluate_all(
            "figures => figures.map(figure => figure.dataset.rank)")]
        assert charted == model["present_ranks"]
        for rank in charted:
            names = page.locator(f"#rank-{rank} svg [data-series]").evaluate_all(
                "paths => paths.map(path => path.dataset.series)")
            assert names == series
            assert all(page.locator(f"#rank-{rank} svg path[data-series]").evaluate_all(
                "paths => paths.map(path => path.getTotalLength() > 0)"))
        cards = expected_cards(document)
        headlines = loaded.texts("article.indicator .headline")
        assert page.locator("article.indicator").evaluate_all("cards => cards.map(c => c.dataset.kind)") == [
            kind for kind, _ in cards]
        for headline, (_, indicator) in zip(headlines, cards, strict=True):
            # plain words first, the code beside them, the meaning on hover
            assert headline.startswith(f"{signal_title(document, indicator)} {indicator['signal']} "
                                       f"on rank {indicator['rank']}")
            assert indicator["severity"].upper() in headline.upper()
        titles = page.locator("article.indicator .signal").evaluate_all("spans => spans.map(s => s.title)")
        assert len(titles) == len(cards) and all(title.endswith(".") for title in titles)
        assert page.locator("#no-indicators").count() == (0 if cards else 1)
        assert page.locator("table.ranks tbody tr").count() == len(model["rows"])


def test_first_cause_cards_show_time_phase_and_reasons(browser: Any, collective_doc: dict[str, Any],
                                                       tmp_path: Path) -> None:
    indicators = collective_doc["model"]["indicators"]
    assert indicators and indicators[0]["reason_codes"] and indicators[0]["confidence"] is not None
    path = write_page(tmp_path / "report.html", render_job(read(collective_doc)))
    with open_page(browser, path) as loaded:
        for index, (_, indicator) in enumerate(expected_cards(collective_doc)):
            card = loaded.page.locator("article.indicator").nth(index)
            text = " ".join(card.inner_text().split())
            assert _offset(indicator["timestamp_ns"]) in card.locator(".offset").inner_text()
            assert f"{indicator['confidence'] * 100:.0f} %" in text
            assert card.locator(".codes code").all_text_contents() == indicator["reason_codes"]
            assert " ".join(card.locator(".phase-path").inner_text().split()) == (indicator["phase_path"] or "—")
        # every rank's first anomaly is framed on the heat strip; the earliest rank is flagged
        first = [row["rank"] for row in collective_doc["model"]["rows"] if row["first_anomaly_timestamp_ns"]]
        framed = loaded.page.locator("g.heat-row:has(rect.heat-anomaly)").evaluate_all(
            "rows => rows.map(row => Number(row.dataset.rank))")
        assert framed == first
        assert loaded.page.locator("g.heat-row.first-cause").get_attribute("data-rank") == str(indicators[0]["rank"])


def test_missing_ranks_stand_out(browser: Any, missing_ranks_doc: dict[str, Any], tmp_path: Path) -> None:
    earliest = missing_ranks_doc["model"]["indicators"][0]
    path = write_page(tmp_path / "report.html", render_job(read(missing_ranks_doc)))
    with open_page(browser, path, screenshot=tmp_path / "missing.png") as loaded:
        page = loaded.page
        assert loaded.texts("#missing-ranks") == ["2,6"]
        missing_rows = page.locator("table.ranks tr.missing")
        assert missing_rows.evaluate_all("rows => rows.map(row => row.dataset.rank)") == ["2", "6"]
        assert loaded.texts("table.ranks tr.missing .missing-badge") == ["MISSING", "MISSING"]
        colour = "row => getComputedStyle(row.cells[1]).backgroundColor"
        assert missing_rows.first.evaluate(colour) != page.locator("table.ranks tr[data-rank='0']").evaluate(colour)
        assert page.locator("g.heat-row.r-missing").evaluate_all(
            "rows => rows.map(row => row.dataset.rank)") == ["2", "6"]
        assert page.locator("#rank-2").count() == 0
        # the earliest cause: signal (plain words, then code), rank, time since start, phase
        card = " ".join(page.locator("article.indicator").first.inner_text().split())
        assert f"{signal_title(missing_ranks_doc, earliest)} {earliest['signal']} on rank {earliest['rank']}" in card
        assert _offset(earliest["timestamp_ns"]) in card
        assert earliest["phase_path"] in card
        # markers: one OOM line per chart, alert lines and phase bands
        for rank in missing_ranks_doc["model"]["present_ranks"]:
            chart = page.locator(f"#rank-{rank} svg")
            assert chart.locator("g.marker.m-oom").count() == 1
            assert chart.locator("g.marker.m-alert").count() == 2
            assert chart.locator("rect.phase").count() == 4
            assert chart.locator("circle.anomaly").count() >= 1


def test_large_job_page_in_browser(browser: Any, tmp_path: Path) -> None:
    document = large_document()
    path = write_page(tmp_path / "big" / "report.html", render_job(read(document)))
    with open_page(browser, path, screenshot=tmp_path / "big.png") as loaded:
        loaded.assert_quiet()
        assert loaded.page.locator("svg [data-series]").count() == 16 * 3
        # the 9 GiB spike among 100,000 samples of rank 5 reaches the top of its panel
        extent = loaded.page.locator("#rank-5 path[data-series='gap']").evaluate(
            "path => { const box = path.getBBox(); return box.height; }")
        assert extent > 0.85 * 64
        assert loaded.page.locator("g.heat-row[data-rank='5'] rect.p5").count() == 1
