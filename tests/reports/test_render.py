"""Rendering without a browser: autoescaping, the CSP, self-containment, odd documents, the size budget."""

from __future__ import annotations

import base64
import hashlib
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from stormwatch.diagnose import diagnose
from stormwatch.outputs.document import DocumentError, JobDocument
from stormwatch.reports import render_index, render_job
from stormwatch.reports.fleetview import report_href
from stormwatch.reports.render import environment, script_json
from tests import model_builders as mb
from tests.reports.builders import large_document, make_fleet, make_fleet_job, make_indicator, read

SIZE_BUDGET_BYTES = 2 * 1024 * 1024


class _Page(HTMLParser):
    """Tags, attributes and the text of <style>/<script> elements of a page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.raw: dict[str, list[str]] = {"style": [], "script": []}
        self._open: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._open = tag if tag in self.raw else None

    def handle_endtag(self, tag: str) -> None:
        self._open = None

    def handle_data(self, data: str) -> None:
        if self._open:
            self.raw[self._open].append(data)

    def csp(self) -> str:
        return next(attrs["content"] or "" for tag, attrs in self.tags
                    if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _fleet() -> dict[str, Any]:
    return make_fleet(jobs=[make_fleet_job(job_id="a", verdict="critical", earliest=make_indicator()),
                            make_fleet_job(job_id="b", status="failed", error="boom")])


def test_every_template_autoescapes_and_none_marks_anything_safe() -> None:
    env = environment()
    names = env.list_templates(filter_func=lambda name: name.endswith(".j2"))
    assert {"base.html.j2", "job.html.j2", "index.html.j2"} <= set(names)
    for name in names:
        source = env.loader.get_source(env, name)[0]  # type: ignore[union-attr]
        assert "|safe" not in source.replace(" ", "") and "{% autoescape" not in source
        assert env.get_template(name).environment.autoescape is True
    assert env.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"


@pytest.mark.parametrize("page", ["job", "index"])
def test_pages_are_self_contained_and_the_csp_allows_only_their_own_style_and_script(
    page: str, missing_ranks_doc: dict[str, Any]
) -> None:
    html = render_job(read(missing_ranks_doc)) if page == "job" else render_index(_fleet())
    parsed = _Page(html)
    csp = parsed.csp()
    assert "default-src 'none'" in csp and "img-src data:" in csp
    (style,) = parsed.raw["style"]
    assert f"style-src {_sha256(style)};" in csp
    scripts = [attrs for tag, attrs in parsed.tags if tag == "script"]
    if page == "job":
        assert scripts == [] and "script-src 'none'" in csp
    else:
        assert scripts == [{"type": "application/json", "id": "jobs-data"}, {}]
        assert f"script-src {_sha256(parsed.raw['script'][-1])};" in csp
    assert ("link", {"rel": "icon", "href": "data:,"}) in parsed.tags
    for tag, attrs in parsed.tags:
        assert "src" not in attrs and "style" not in attrs
        for name in ("href", "xlink:href", "action"):
            value = attrs.get(name)
            if value is not None and tag != "link":
                assert value.startswith("#") or re.fullmatch(r"(\.\./)?[\w.%-]+(/[\w.%-]+)*", value), value
    assert not re.search(r"https?:|//[a-z]|@import|url\((?!#)", html, flags=re.IGNORECASE)


def test_empty_job_and_job_without_indicators_render(empty_doc: dict[str, Any], clean_doc: dict[str, Any]) -> None:
    assert empty_doc["verdict"]["status"] == "empty" and clean_doc["model"]["indicators"] == []
    empty = render_job(read(empty_doc))
    assert ">EMPTY<" in empty and "No anomaly found (nothing was loaded)." in empty and "No timelines to draw." in empty
    clean = render_job(read(clean_doc))
    assert ">CLEAN<" in clean and 'id="no-indicators"' in clean and clean.count("data-series=") == 4 * 3


def test_device_only_ranks_draw_device_memory_and_show_missing_counters(device_only_doc: dict[str, Any]) -> None:
    timelines = device_only_doc["model"]["per_rank_timelines"]
    assert set(timelines["0"]) == {"timestamps_ns", "device_used"}
    html = render_job(read(device_only_doc))
    assert html.count('data-series="device_used"') == 2 and 'data-series="gap"' not in html
    assert "no hidden gap: device memory only" in html


@pytest.mark.parametrize(
    ("document", "member"),
    [
        ({}, "schema_version"),
        ({"schema_version": 1, "job_id": "j", "source": "s", "generated_at": "2026-11-30T02:00:00+00:00",
          "engine_version": "0", "input_fingerprint": "f", "sessions": "x", "sources_loaded": [], "warnings": None,
          "verdict": [], "model": "nope"}, "sessions"),
    ],
)
def test_odd_documents_are_refused_before_rendering(document: dict[str, Any], member: str) -> None:
    """What the report reads is typed: a damaged model.json fails to read, naming the member."""
    with pytest.raises(DocumentError) as caught:
        read(document)
    assert caught.value.member == member


def test_odd_fleets_still_render() -> None:
    for fleet in ({}, {"jobs": "x"}, {"jobs": [{}, {"job_id": 5, "missing_ranks": "1", "earliest": "x"}]}):
        assert render_index(fleet).startswith("<!doctype html>")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("job-1/report.html", "job-1/report.html"),
        ("a b/report.html", "a%20b/report.html"),
        ("javascript:alert(1)/report.html", None),
        ("JAVASCRIPT:alert(1)", None),
        ("/etc/passwd", None),
        ("//evil.example/x", None),
        ("../outside/report.html", None),
        ("a/./b", None),
        ("x?y#z/report.html", "x%3Fy%23z/report.html"),
        ('"><img src=x>/report.html', "%22%3E%3Cimg%20src%3Dx%3E/report.html"),
        (None, None),
        (5, None),
    ],
)
def test_report_links_stay_relative(value: Any, expected: str | None) -> None:
    assert report_href(value) == expected


def test_script_json_cannot_close_its_element() -> None:
    text = str(script_json({"k": "</script><!-- & \u2028\u2029 >"}))
    assert text == '{"k":"\\u003c/script\\u003e\\u003c!-- \\u0026 \\u2028\\u2029 \\u003e"}'


def test_large_job_renders_under_the_size_budget() -> None:
    document = large_document(ranks=16, samples=100_000)
    started = time.perf_counter()
    html = render_job(read(document))
    elapsed_s = time.perf_counter() - started
    size = len(html.encode("utf-8"))
    print(f"\n16 ranks x 100,000 samples: {size / 1e6:.3f} MB ({size:,} bytes), rendered in {elapsed_s:.2f} s")
    assert size < SIZE_BUDGET_BYTES
    assert html.count("data-series=") == 48


def test_many_ranks_chart_a_subset_and_keep_every_rank_in_the_heat_strip() -> None:
    document = large_document(ranks=256, samples=2_000)
    started = time.perf_counter()
    html = render_job(read(document))
    elapsed_s = time.perf_counter() - started
    size = len(html.encode("utf-8"))
    print(f"\n256 ranks x 2,000 samples: {size / 1e6:.3f} MB, rendered in {elapsed_s:.2f} s")
    assert html.count('<figure class="rank-chart') == 64
    assert 'id="rank-5"' in html  # the first cause's rank is always charted
    assert html.count('class="heat-row') == 256
    assert "Charts for 64 of 256 ranks" in html


def test_the_document_as_built_renders_like_its_model_json_read_back(tmp_path: Path) -> None:
    """The pipeline renders ``Diagnosis.document`` as the engine built it (numpy timelines, its arrays)."""
    mb.build_collective_synchronized(tmp_path, world_size=4, ranks=[0, 1, 3])
    result = diagnose([tmp_path], job_id="in-memory", source_name="in-memory")
    read_back = JobDocument.from_json(result.model_json(), name="in-memory/model.json")
    assert render_job(result.document) == render_job(read_back)
