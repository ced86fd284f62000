"""A file that ends mid-record on the job report's first screen and in the fleet index's row:
rendered from real diagnoses of jobs written by stormlog's writers, cut as a killed writer leaves
them; checked as HTML (every name escaped) and in headless Chromium."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from markupsafe import escape

from stormwatch.diagnose import DiagnoseOptions
from stormwatch.diagnose_sessions import diagnose_job
from stormwatch.outputs.fleet import JobStatus, fleet_document, row_from_document
from stormwatch.reports import render_index, render_job
from tests import builders as b
from tests.cut_short_builders import Torn, killed_sink_job, snapshot, tear_last_line
from tests.reports.builders import IMG_PAYLOAD, read
from tests.reports.pages import ELEMENTS_WITH_HANDLERS, open_page, write_page

HOSTILE_NAME = f"{IMG_PAYLOAD}.jsonl"  # a file name may hold markup (never a '/')


def _document(root: Path, *, job_id: str = "job", all_sessions: bool = True) -> dict[str, Any]:
    job = diagnose_job([root], job_id=job_id, source_name=str(root), options=DiagnoseOptions(all_sessions=all_sessions))
    return orjson.loads(job.document.to_json())


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Torn, Path]:
    root = tmp_path_factory.mktemp("killed") / "train-killed"
    _, torn = killed_sink_job(root, world_size=4, torn_rank=3)
    return _document(root, job_id="train-killed"), torn, root


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hostile") / "job"
    path = b.write_jsonl(root / "rank_0" / HOSTILE_NAME, b.timeline_records(samples=8, session_id="s-1"))
    tear_last_line(path)
    return _document(root)


def _at_s(torn: Torn) -> str:
    return f"{(torn.last_event_ns - b.START_NS) / 1e9:.1f}"


def test_the_first_screen_names_rank_file_and_time(killed: tuple[dict[str, Any], Torn, Path]) -> None:
    document, torn, root = killed
    before = snapshot(root)
    html = render_job(read(document))
    file = document["cut_short"][0]["file"]
    assert file.startswith("rank_3/attempt-1/segment-")
    line = re.search(r'<p class="cut-file" data-rank="3">(.*?)</p>', html)
    assert line is not None
    assert (f"rank 3: <code>{file}</code> ends mid-record {_at_s(torn)} s into the job; the writer stopped abruptly"
            in line.group(1))
    assert f"{torn.partial_bytes} B after the last complete record not read" in line.group(1)
    assert html.index('id="cut-short"') < html.index('id="verdict-summary"') + 2000  # in the verdict banner
    assert html.index('id="cut-short"') < html.index('id="first-cause"')
    assert "Ranks ended abruptly" in html and "1 (rank 3)" in html  # the job's coverage block
    assert snapshot(root) == before  # rendering reads the document only; the inputs are untouched


def test_a_hostile_file_name_comes_out_escaped(hostile: dict[str, Any]) -> None:
    assert hostile["cut_short"][0]["file"] == f"rank_0/{HOSTILE_NAME}"
    html = render_job(read(hostile))
    assert "<img" not in html
    assert f"<code>{escape(f'rank_0/{HOSTILE_NAME}')}</code> ends mid-record" in html
    index = render_index(_fleet([hostile]))
    assert "<img" not in index and "&lt;img src=x onerror=alert(1)&gt;.jsonl" in index


def test_an_earlier_attempt_is_named_on_the_restart_page(tmp_path: Path) -> None:
    root = tmp_path / "job"
    _, torn = killed_sink_job(root, world_size=2, torn_rank=1, oom=True)
    b.write_attempt(root, job_id="run-2", world_size=2, attempt="attempt-2", start_ns=b.START_NS + 60 * 10**9)
    document = _document(root)
    html = render_job(read(document))
    first = document["attempts"][0]["session_id"]
    assert (f'ends mid-record {_at_s(torn)} s into attempt 1 of 2 (session <code class="session-id" title="{first}">'
            f"{first[:15]}…</code>)") in html  # legacy-<8 characters of its uuid>…, whole on hover


def test_a_clean_job_shows_no_cut(tmp_path: Path) -> None:
    b.write_multi_rank_job(tmp_path / "job", world_size=2, fmt="jsonl")
    document = _document(tmp_path / "job")
    html = render_job(read(document))
    assert 'id="cut-short"' not in html and "mid-record" not in html
    assert '<p class="cut-mark"' not in render_index(_fleet([document]))
    old = {key: value for key, value in document.items() if key != "cut_short"}  # written before the member
    assert 'id="cut-short"' not in render_job(read(old))


def _fleet(documents: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [row_from_document(read(document), status=JobStatus.DIAGNOSED, report=f"{document['job_id']}/report.html")
            for document in documents]
    return orjson.loads(orjson.dumps(fleet_document(rows, generated_at=datetime(2026, 1, 1, tzinfo=UTC),
                                                    storage="/srv")))


def test_the_fleet_row_says_which_file_of_which_rank(killed: tuple[dict[str, Any], Torn, Path]) -> None:
    document, torn, _ = killed
    fleet = _fleet([document])
    file = document["cut_short"][0]["file"]
    assert fleet["jobs"][0]["cut_short"][0]["file"] == file
    html = render_index(fleet)
    assert f"✂ ended mid-record: rank 3 {file} at {_at_s(torn)} s" in html
    data = orjson.loads(html.split('<script type="application/json" id="jobs-data">')[1].split("</script>")[0])
    assert data["rows"][0][data["columns"].index("cut")] == f"rank 3 {file} at {_at_s(torn)} s"


def test_pages_show_the_cut_in_the_browser(browser: Any, killed: tuple[dict[str, Any], Torn, Path],
                                           hostile: dict[str, Any], tmp_path: Path) -> None:
    document, torn, _ = killed
    file = document["cut_short"][0]["file"]
    job_page = write_page(tmp_path / "train-killed" / "report.html", render_job(read(document)))
    with open_page(browser, job_page) as loaded:
        loaded.assert_quiet()
        line = loaded.page.locator("#cut-short .cut-file").first
        assert line.is_visible() and line.bounding_box()["y"] < 900  # on the first screen
        assert f"rank 3: {file} ends mid-record {_at_s(torn)} s into the job" in " ".join(line.inner_text().split())
    clean = [{**document, "job_id": f"job-{number:03d}", "cut_short": []} for number in range(120)]
    index = write_page(tmp_path / "index.html", render_index(_fleet([*clean, {**hostile, "job_id": "zz-hostile"}])))
    with open_page(browser, index) as loaded:
        loaded.page.wait_for_selector("body[data-ready]")
        loaded.page.locator("#show").select_option("cut")  # the hostile job sits on page 2: built by the script
        marks = loaded.texts("#jobs-table tbody .cut-mark")
        assert marks == [f"✂ ended mid-record: rank 0 rank_0/{HOSTILE_NAME} at {_at_s_of(hostile)} s"]
        assert loaded.page.evaluate(ELEMENTS_WITH_HANDLERS) == 0
        loaded.assert_quiet()


def _at_s_of(document: dict[str, Any]) -> str:
    return f"{document['cut_short'][0]['at_s']:.1f}"
