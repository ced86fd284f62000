"""The job page tells the job's story (issue 28), checked without a browser: capacity and headroom,
distinct ticks, one card for one finding, the heat strip's rule, peer outliers not checked, load
warnings with file and line, short session ids, the hidden gap explained where it first appears, the
exit code said for what it is, and the 64-rank page under 2 MB. Real rendering of real diagnoses
(:mod:`tests.reports.job_story_builders`), table-driven where natural."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from stormwatch.reports import render_job
from stormwatch.reports.capacity import BREAK_BAND_PX, headroom_label, memory_range
from stormwatch.reports.jobbanner import load_warning_texts, with_short_ids
from stormwatch.reports.scales import LinearScale, TextAnchor, Tick, byte_ticks, keep_inside
from stormwatch.signals import HIDDEN_GAP_MEANING
from tests import builders as b
from tests.reports import job_story_builders as jb
from tests.reports.builders import diagnosed, read

GIB = b.GIB
SIZE_BUDGET_BYTES = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def near_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("near")
    jb.write_near_capacity_job(root)
    return diagnosed(root, job_id="near-capacity")


@pytest.fixture(scope="module")
def cpu_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("cpu")
    jb.write_cpu_job(root)
    return diagnosed(root, job_id="cpu-job")


@pytest.fixture(scope="module")
def bad_line_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("bad-line")
    jb.write_job_with_bad_line(root)
    return diagnosed(root, job_id="bad-line")


@pytest.fixture(scope="module")
def one_rank_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("one-rank")
    jb.write_single_rank_job(root)
    return diagnosed(root, job_id="one-rank")


def _section(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}"')
    return html[start:html.index("</section>", start)]


def _charts(html: str) -> dict[str, str]:
    return dict(re.findall(r'<svg class="chart[^"]*"[^>]*data-rank="(\d+)">(.*?)</svg>', html, flags=re.DOTALL))


@pytest.mark.parametrize(
    ("low_gib", "high_gib", "capacity_gib", "broken"),
    [
        (70.0, 77.0, 80, False),  # near the limit: the axis runs up to the capacity
        (20.0, 22.7, 80, True),  # far below: the data keeps its range, the capacity sits above a break
        (0.0, 40.0, 80, False),  # half the device, from zero: unbroken
        (10.0, 30.0, 80, True),  # a third of the way up from 10 GiB: broken
        (79.0, 81.0, 80, False),  # at the limit (the device total in range)
        (20.0, 22.7, None, False),  # no capacity known: no line, the data's range
    ],
)
def test_the_memory_range_runs_to_the_capacity_only_when_the_data_still_fills_the_panel(
        low_gib: float, high_gib: float, capacity_gib: int | None, broken: bool) -> None:
    capacity = None if capacity_gib is None else capacity_gib * GIB
    found = memory_range(low_gib * GIB, high_gib * GIB, capacity_bytes=capacity)
    assert found.broken is broken and found.band_px == (BREAK_BAND_PX if broken else 0)
    if capacity is not None and not broken:
        assert found.low <= low_gib * GIB and found.high > capacity  # the line inside the panel, room above it
    if broken:
        assert (found.low, found.high) == (low_gib * GIB, high_gib * GIB)


@pytest.mark.parametrize(
    ("peak", "capacity", "cpu", "label"),
    [
        (77.4 * GIB, 80 * GIB, False, "peak 77.4 of 80 GiB, 3 % free"),
        (22.8 * GIB, 80 * GIB, False, "peak 22.8 of 80 GiB, 72 % free"),
        (79.9 * GIB, 80 * GIB, False, "peak 79.9 of 80 GiB, < 1 % free"),
        (512 * b.MIB, 80 * GIB, False, "peak 512 MiB of 80 GiB, 99 % free"),
        (40 * GIB, int(79.6 * GIB), False, "peak 40 of 79.6 GiB, 50 % free"),
        (22.8 * GIB, None, False, "peak 22.8 GiB (device capacity not recorded)"),
        (1.05 * GIB, None, True, "CPU: peak 1.05 GiB (no device memory limit)"),
    ],
)
def test_the_headroom_label(peak: float, capacity: int | None, cpu: bool, label: str) -> None:
    assert headroom_label(peak, capacity, cpu=cpu) == label


@pytest.mark.parametrize(
    ("low", "high"),
    [(-1.0, 1.0), (0.0, 3.0), (-0.5, 0.5), (20 * GIB, 22.7 * GIB), (GIB, 1.049 * GIB), (0.0, 1 << 20)],
)
def test_byte_ticks_never_repeat_a_label(low: float, high: float) -> None:
    labels = [tick.label for tick in byte_ticks(LinearScale(low, high, 100.0, 0.0))]
    assert labels and len(set(labels)) == len(labels)
    assert not any(label.endswith(" B") and "." in label for label in labels)  # no fractions of a byte


def test_labels_near_an_edge_are_anchored_inward() -> None:
    ticks = keep_inside([Tick(5.0, "0 s"), Tick(480.0, "10 min"), Tick(955.0, "12.5 min")], low_px=2, high_px=958)
    assert [tick.anchor for tick in ticks] == [TextAnchor.START, TextAnchor.MIDDLE, TextAnchor.END]


def test_every_gpu_chart_draws_its_capacity_and_headroom(near_doc: dict[str, Any]) -> None:
    charts = _charts(render_job(read(near_doc)))
    assert sorted(charts) == ["0", "1"]
    for rank, body in charts.items():
        assert body.count('<line class="capacity"') == 1
        (headroom,) = re.findall(r'<text class="headroom"[^>]*>([^<]*)</text>', body)
        assert re.fullmatch(r"peak \d+(\.\d)? of 80 GiB, \d+ % free", headroom), headroom
        assert ("axis-break" in body) is (rank == "1")  # rank 1 is far below its capacity: broken axis
    assert "peak 76.8 of 80 GiB, 4 % free" in charts["0"]


def test_cpu_ranks_show_cpu_and_no_allocator_or_gap_axes(cpu_doc: dict[str, Any]) -> None:
    assert {fact["device_id"] for fact in cpu_doc["fleet"]["ranks"]} == {-1}
    html = render_job(read(cpu_doc))
    ranks = _section(html, "ranks")
    assert ranks.count('<td class="device">CPU</td>') == 2 and ">-1<" not in ranks
    assert "Hidden gap latest" not in ranks and "Reserved Δ" in ranks
    for body in _charts(html).values():
        assert 'data-series="gap"' not in body and "Hidden gap" not in body and "Allocated / reserved" not in body
        assert body.count('<g class="panel') == 1 and 'class="capacity"' not in body
        assert re.search(r'<text class="capacity-note"[^>]*>CPU: peak [\d.]+ [KMG]iB \(no device memory limit\)<', body)
        labels = re.findall(r'<text class="ylabel"[^>]*>([^<]*)<', body)
        assert labels and len(set(labels)) == len(labels)
    assert "the job&#39;s ranks ran on the CPU" in _section(html, "heat")


def test_identical_first_causes_are_one_card_and_distinct_ones_two(near_doc: dict[str, Any],
                                                                    missing_ranks_doc: dict[str, Any]) -> None:
    one = _section(render_job(read(near_doc)), "first-cause")
    assert one.count("<article") == 1 and 'data-kind="earliest most_severe"' in one
    assert "<h3>Earliest and most severe anomaly</h3>" in one
    assert ">Out of memory <code>alert:error</code></span> on" in one
    two = _section(render_job(read(missing_ranks_doc)), "first-cause")
    assert re.findall(r'data-kind="([\w ]+)"', two) == ["earliest", "most_severe"]


@pytest.mark.parametrize(
    ("fixture", "shown", "sentence"),
    [
        ("one_rank_doc", False, "Not shown: the job has one rank"),
        ("clean_doc", False, "Not shown: all 4 ranks had the same hidden gap throughout (256 MiB)"),
        ("cpu_doc", False, "Not shown: the job&#39;s ranks ran on the CPU"),
        ("collective_doc", True, None),
        ("missing_ranks_doc", True, None),
    ],
)
def test_the_heat_strip_shows_only_ranks_that_differ(request: pytest.FixtureRequest, fixture: str, shown: bool,
                                                     sentence: str | None) -> None:
    heat = _section(render_job(read(request.getfixturevalue(fixture))), "heat")
    assert ('<svg class="heat"' in heat) is shown
    skipped = re.findall(r'<p class="heatstrip-skipped"[^>]*>([^<]*)</p>', heat)
    assert len(skipped) == (0 if shown else 1)
    assert sentence is None or skipped[0].startswith(sentence)


@pytest.mark.parametrize(
    ("fixture", "note"),
    [
        ("one_rank_doc", "Peer outliers were not checked: outliers need 4 or more ranks to compare, and this job has "
                         "1 rank with memory figures."),
        ("near_doc", "not checked: outliers need 4 or more ranks"),
        ("clean_doc", None),
    ],
)
def test_peer_outliers_say_when_they_were_not_checked(request: pytest.FixtureRequest, fixture: str,
                                                      note: str | None) -> None:
    outliers = _section(render_job(read(request.getfixturevalue(fixture))), "outliers")
    if note is None:
        assert "No rank stands out from its peers." in outliers and "not checked" not in outliers
    else:
        assert note in outliers and "No rank stands out" not in outliers
        assert 'id="outliers-not-checked"' in outliers


def test_load_warnings_are_on_the_first_screen_with_file_and_line(bad_line_doc: dict[str, Any]) -> None:
    (warning,) = load_warning_texts(read(bad_line_doc))
    file, line, _ = warning.split(":", 2)
    html = render_job(read(bad_line_doc))
    section = _section(html, "load-warnings")
    assert f'<code class="file">{file}</code> <span class="line">line {line}</span>: malformed JSON' in section
    assert html.index('id="verdict"') < html.index('id="load-warnings"') < html.index('id="first-cause"')
    without_fleet = {key: value for key, value in bad_line_doc.items() if key != "fleet"}
    assert load_warning_texts(read(without_fleet)) == (warning,)  # counted without the fleet member too


def test_a_job_without_load_warnings_has_no_section(clean_doc: dict[str, Any], killed_doc: dict[str, Any]) -> None:
    assert 'id="load-warnings"' not in render_job(read(clean_doc))
    # a file cut mid-record is said in the banner, not counted as a load warning
    assert killed_doc["cut_short"] and load_warning_texts(read(killed_doc)) == ()


@pytest.fixture(scope="module")
def killed_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.cut_short_builders import killed_sink_job

    root = tmp_path_factory.mktemp("killed") / "job"
    killed_sink_job(root, world_size=2, torn_rank=1)
    return diagnosed(root, job_id="killed")


@pytest.mark.parametrize(
    ("text", "ids", "parts"),
    [
        ("from attempt 1 (session legacy-10513d62-958b-5ca2-b529-fe56456eecfd); 4/4",
         ["legacy-10513d62-958b-5ca2-b529-fe56456eecfd"],
         [("from attempt 1 (session ", ""), ("legacy-10513d62…", "legacy-10513d62-958b-5ca2-b529-fe56456eecfd"),
          ("); 4/4", "")]),
        ("session train-run1-rank0 failed", ["train-run1-rank0"], [("session train-run1-rank0 failed", "")]),
        ("no ids here", [], [("no ids here", "")]),
    ],
)
def test_session_ids_are_shortened_with_the_full_id_kept(text: str, ids: list[str],
                                                         parts: list[tuple[str, str]]) -> None:
    assert [(part.text, part.title) for part in with_short_ids(text, ids)] == parts


def test_the_banner_carries_no_long_session_id_and_no_exit_code_tile(missing_ranks_doc: dict[str, Any]) -> None:
    html = render_job(read(missing_ranks_doc))
    banner = _section(html, "verdict")
    assert "<dt>Exit code</dt>" not in banner
    assert not re.search(r">[^<]*[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}[^<]*<", banner)
    exit_line = re.search(r'<p class="hint" id="stormwatch-exit">(.*?)</p>', html, flags=re.DOTALL)
    assert exit_line is not None and "It is not the training job's exit code." in exit_line.group(1)


@pytest.mark.parametrize(
    ("fixture", "section"),
    [("drift_doc", "verdict"), ("clean_doc", "ranks"), ("near_doc", "ranks")],
)
def test_hidden_gap_is_explained_where_the_page_first_speaks_of_it(request: pytest.FixtureRequest, fixture: str,
                                                                    section: str) -> None:
    html = render_job(read(request.getfixturevalue(fixture)))
    body = html[html.index("<body"):]
    meaning = HIDDEN_GAP_MEANING.replace("'", "&#39;")
    hover = body.count(f'title="{meaning}"') + body.count(f"<title>{meaning}</title>")
    assert body.count(meaning) - hover == 1  # said once in the page's words; the rest are hover texts
    assert 'id="hidden-gap-meaning"' in _section(html, section)
    start = body.index(f'<section id="{section}"')
    words = [re.sub(r"<[^>]*>", " ", part) for part in (body[:start], _section(body, section))]  # text, not titles
    mention = re.compile(r"hidden[ -]?(gap|memory)|\bgap[:_]", flags=re.IGNORECASE)
    assert mention.search(words[0]) is None and mention.search(words[1]) is not None  # its first mention is there


def test_signals_read_in_plain_words_with_their_code(missing_ranks_doc: dict[str, Any]) -> None:
    html = render_job(read(missing_ranks_doc))
    spans = re.findall(r'<span class="signal[^"]*" title="([^"]+)">([^<]+) <code>([^<]+)</code></span>', html)
    assert {code for _, _, code in spans} >= {"alert:warning", "alert:critical", "alert:error"}
    assert ("Out of memory", "alert:error") in {(title, code) for _, title, code in spans}
    assert all(meaning.endswith(".") and title for meaning, title, _ in spans)


def test_a_64_rank_job_page_stays_under_2_mb(tmp_path: Path) -> None:
    html = render_job(read(jb.sixty_four_rank_document()))
    size = len(html.encode("utf-8"))
    print(f"\n64 ranks x 20,000 samples: {size / 1e6:.3f} MB ({size:,} bytes)")
    assert size < SIZE_BUDGET_BYTES
    assert html.count('<figure class="rank-chart') == 64 and html.count('<line class="capacity"') == 64
