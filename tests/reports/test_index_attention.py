"""The fleet index leads with attention (issue 28), rendered without a browser: the "Needs attention"
list's wording and order, the job table's default order and columns, trends from the second night,
coverage and alerts below the table, load warnings, "unchanged", short session ids, the hidden gap
explained, and hostile strings escaped."""

from __future__ import annotations

import re
from typing import Any

import pytest

from stormwatch.reports import render_index
from stormwatch.reports.attention import MAX_SHOWN
from stormwatch.reports.formatting import short_id
from stormwatch.signals import HIDDEN_GAP_MEANING, describe
from tests.reports.attention_builders import attention_items, job, placed
from tests.reports.builders import HOSTILE, IMG_PAYLOAD, SCRIPT_PAYLOAD, make_fleet, make_fleet_job
from tests.reports.fleet_builders import make_regression, make_suspect, make_trends, with_fleet_intel

DUMP = "out of memory on rank 3: tried to allocate 2.0 GiB with 1.1 GiB free of 80 GiB"
SESSION = "legacy-10513d62-958b-5ca2-b529-fe56456eecfd"


def _section(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}"')
    return html[start:html.index("</section>", start)]


def _lines(fleet: dict[str, Any]) -> list[str]:
    return [text for _, text in attention_items(render_index(fleet))]


@pytest.mark.parametrize(("row", "line"), [
    pytest.param(job("oom-job", cause=placed(oom=True, oom_dump=DUMP)),
                 "critical oom-job Out of memory alert:error on rank 3 (gpu-node-01, GPU 3), 20.0 s into the job, "
                 "in train / backward; tried to allocate 2.0 GiB with 1.1 GiB free of 80 GiB", id="oom"),
    pytest.param(job("drift", verdict="warning", cause=placed(rank=1, signal="gap:persistent_drift",
                                                              severity="warning", host="node-7", device_id=1,
                                                              since_s=65.2, phase_path=None)),
                 "warning drift Hidden memory growing gap:persistent_drift on rank 1 (node-7, GPU 1), "
                 "1 min 05 s into the job", id="gap"),
    pytest.param(job("allreduce", cause=placed(rank=0, signal="collective:collective_confident", since_s=9.78,
                                               phase_path="train / step 12")),
                 "critical allreduce Collective memory surge collective:collective_confident on rank 0 "
                 "(gpu-node-01, GPU 3), 9.8 s into the job, in train / step 12", id="collective"),
    pytest.param(job("breach", verdict="warning", cause=placed(signal="gap_ratio_breach", severity="warning",
                                                               since_s=6.0, phase_path=None)),
                 "warning breach Hidden gap over its limit gap_ratio_breach on rank 3 (gpu-node-01, GPU 3), "
                 "6.0 s into the job", id="breach"),
    # a CRITICAL job leads with the critical cause, not the warning that came first
    pytest.param(job("drifting-rank", earliest=placed(rank=1, signal="gap_ratio_breach", severity="warning",
                                                      since_s=6.0, phase_path=None),
                     most_severe=placed(rank=1, signal="gap:persistent_drift", since_s=20.0, phase_path=None)),
                 "critical drifting-rank Hidden memory growing gap:persistent_drift on rank 1 (gpu-node-01, GPU 3), "
                 "20.0 s into the job", id="critical-after-a-warning"),
    pytest.param(job("missing-ranks", verdict="warning", ranks_present=3, ranks_expected=4, missing_ranks=[2]),
                 "warning missing-ranks Missing ranks missing_ranks: 1 of 4 ranks wrote no telemetry (rank 2)",
                 id="missing-ranks"),
    pytest.param(job("cpu-job", verdict="warning", cause=placed(signal="alert:warning", severity="warning",
                                                                host="cpu-host", device_id=-1, phase_path=None)),
                 "warning cpu-job Warning event alert:warning on rank 3 (cpu-host, CPU), 20.0 s into the job",
                 id="cpu-rank"),
    # a row written before causes were placed: less detail, the same words
    pytest.param(job("old-row", cause={"rank": 1, "signal": "alert:critical", "severity": "critical",
                                       "timestamp_ns": 1_700_000_000_000_000_000, "phase_path": None,
                                       "confidence": None}),
                 "critical old-row Critical event alert:critical on rank 1, at 2023-11-14 22:13:20.000 UTC",
                 id="older-row"),
    pytest.param(job("restarted", cause=placed(oom=True, phase_path=None),
                     worst_attempt="attempt 1 of 2, interrupted, OOM on rank 3", worst_session=SESSION),
                 "critical restarted Out of memory alert:error on rank 3 (gpu-node-01, GPU 3), 20.0 s into the job; "
                 "in attempt 1 of 2, interrupted (session legacy-10513d62…)", id="restarted"),
    pytest.param(make_fleet_job(job_id="broken-upload", status="failed", error="OSError: truncated segment-3.jsonl"),
                 "failed broken-upload could not be diagnosed: OSError: truncated segment-3.jsonl", id="failed"),
])
def test_each_line_says_what_where_and_when(row: dict[str, Any], line: str) -> None:
    assert _lines(make_fleet(jobs=[row, make_fleet_job(job_id="fine")])) == [line]


def test_every_line_links_somewhere() -> None:
    """A job's line links to its report; a failed job (no report) to its row; a suspect to its section."""
    jobs = [job("crit", cause=placed()), make_fleet_job(job_id="broken", status="failed", error="x")]
    html = render_index(with_fleet_intel(make_fleet(jobs=jobs), trends=[], regressions=[], suspects=[make_suspect()]))
    links = re.findall(r'<a class="attention-link" (href="[^"]*"[^>]*)>', _section(html, "attention"))
    assert links == ['href="crit/report.html"', 'href="#job-list" data-filter="broken"', 'href="#suspects"']


def test_regressions_and_suspect_devices_need_attention_too() -> None:
    fleet = with_fleet_intel(make_fleet(jobs=[make_fleet_job(job_id="job-1")]), trends=[],
                             regressions=[make_regression()], suspects=[make_suspect()])
    assert _lines(fleet) == [
        "warning job-1 Regression regression: peak reserved 41.0 GiB, +17.1 % over its baseline of 35.0 GiB "
        "(5 earlier runs of llama-pretrain)",
        "warning node-17, GPU 3 Suspect device suspect_device: 6 of 12 jobs placed there had findings (50.0 %), "
        "against 8.0 % across the fleet",
    ]
    (regression, _), (suspect, _) = attention_items(render_index(fleet))
    assert regression["data-job-id"] == "job-1" and regression["data-kind"] == "regression"
    assert "data-job-id" not in suspect and suspect["data-host"] == "node-17"
    assert '<a class="attention-link" href="#suspects">node-17, GPU 3</a>' in render_index(fleet)


def test_nothing_needs_attention_is_one_line() -> None:
    html = render_index(make_fleet(jobs=[make_fleet_job(job_id="a"), make_fleet_job(job_id="b", verdict="info")]))
    section = _section(html, "attention")
    assert attention_items(html) == [] and section.count("<p") == 1
    assert '<p class="attention-none">Nothing needs attention' in section
    assert "hidden-gap-note" not in html  # nothing on the page speaks of hidden memory


def test_critical_before_warning_newest_first_then_failed_and_suspects() -> None:
    jobs = [
        job("warn-new", verdict="warning", cause=placed(severity="warning"), diagnosed_at="2026-11-30T05:00:00+00:00"),
        job("crit-old", cause=placed(), diagnosed_at="2026-11-29T01:00:00+00:00"),
        make_fleet_job(job_id="failed-run", status="failed", error="boom"),
        job("crit-new", cause=placed(), diagnosed_at="2026-11-30T04:00:00+00:00"),
        job("warn-old", verdict="warning", cause=placed(severity="warning"), diagnosed_at="2026-11-28T00:00:00+00:00"),
        make_fleet_job(job_id="regressed", diagnosed_at="2026-11-29T12:00:00+00:00"),
        make_fleet_job(job_id="fine"),
    ]
    fleet = with_fleet_intel(make_fleet(jobs=jobs), trends=[], regressions=[make_regression(job_id="regressed")],
                             suspects=[make_suspect()])
    items = attention_items(render_index(fleet))
    assert [(attrs["data-severity"], attrs.get("data-job-id", attrs.get("data-host"))) for attrs, _ in items] == [
        ("critical", "crit-new"), ("critical", "crit-old"), ("warning", "warn-new"), ("warning", "regressed"),
        ("warning", "warn-old"), ("warning", "failed-run"), ("warning", "node-17")]


def test_the_list_is_capped_and_counts_the_rest() -> None:
    jobs = [job(f"crit-{index:02d}", cause=placed(), diagnosed_at=f"2026-11-{index + 1:02d}T00:00:00+00:00")
            for index in range(25)]
    jobs.append(job("warn", verdict="warning", cause=placed(severity="warning")))
    html = render_index(make_fleet(jobs=jobs))
    ids = [attrs["data-job-id"] for attrs, _ in attention_items(html)]
    assert ids == [f"crit-{index:02d}" for index in range(24, 24 - MAX_SHOWN, -1)]
    more = re.search(r'<a class="attention-more" href="#job-list" data-show="attention">(.*?)</a> '
                     r'<span class="hint">\((.*?)\)', html)
    assert more is not None and more.groups() == ("16 more need attention", "15 critical, 1 warning")


def test_the_attention_member_names_the_jobs() -> None:
    """fleet.json (version 2) lists a job name's newest run: an older critical run of it needs nobody."""
    jobs = [job("train-1", cause=placed(), diagnosed_at="2026-11-28T00:00:00+00:00"),
            job("train-2", verdict="warning", cause=placed(severity="warning"))]
    fleet = {**make_fleet(jobs=jobs), "attention": [{"job_id": "train-2", "status": "diagnosed", "verdict": "warning"}]}
    assert [attrs["data-job-id"] for attrs, _ in attention_items(render_index(fleet))] == ["train-2"]
    gone = {**make_fleet(jobs=[]), "attention": [job("elsewhere", cause=placed(oom=True))]}
    assert _lines(gone)[0].startswith("critical elsewhere Out of memory alert:error on rank 3")


def test_a_signal_shows_its_title_its_code_beside_it_and_its_meaning_on_hover() -> None:
    html = render_index(make_fleet(jobs=[job("oom-job", cause=placed(oom=True))]))
    meaning = describe("oom").meaning.replace("'", "&#39;")
    span = f'<span class="signal" title="{meaning}">Out of memory <code>alert:error</code></span>'
    assert _section(html, "attention").count(span) == 1 and _section(html, "job-list").count(span) == 1


def test_the_hidden_gap_is_explained_where_it_first_appears() -> None:
    drift = job("drift", cause=placed(signal="gap:persistent_drift"))
    html = render_index(make_fleet(jobs=[drift]))
    note = re.search(r'<p class="gap-note" id="hidden-gap-note">.*?</p>', html)
    assert note is not None and HIDDEN_GAP_MEANING.replace("'", "&#39;") in note.group(0)
    assert html.index('id="hidden-gap-note"') < html.index('<section id="summary"')  # in the attention section
    quiet = make_fleet(jobs=[make_fleet_job(job_id="fine"), {**drift, "verdict": "info"}])
    html = render_index(quiet)
    assert html.count('id="hidden-gap-note"') == 1 and html.index('id="hidden-gap-note"') > html.index('id="job-list"')


def test_a_hidden_gap_regression_explains_the_words_where_it_first_shows() -> None:
    regression = make_regression(job_id="job-1", metric="hidden_gap_peak_bytes")
    fleet = with_fleet_intel(make_fleet(jobs=[make_fleet_job(job_id="job-1")]), trends=[], suspects=[],
                             regressions=[regression])
    html = render_index(fleet)
    assert html.count('id="hidden-gap-note"') == 1 and 'id="hidden-gap-note"' in _section(html, "attention")
    ooms = [job(f"oom-{index:02d}", cause=placed(oom=True)) for index in range(MAX_SHOWN)]  # push it off the list
    html = render_index(with_fleet_intel(make_fleet(jobs=[*ooms, make_fleet_job(job_id="job-1")]), trends=[],
                                         suspects=[], regressions=[regression]))
    assert html.count('id="hidden-gap-note"') == 1 and 'id="hidden-gap-note"' in _section(html, "regressions")


def test_sections_attention_first_then_the_table_then_the_fleet_and_alerts() -> None:
    fleet = {**with_fleet_intel(make_fleet(jobs=[job("a", cause=placed())])), "alerts": {"receivers": []}}
    html = render_index(fleet)
    order = [html.index(f'<section id="{name}"') for name in
             ("attention", "summary", "job-list", "trends", "regressions", "suspects", "coverage", "alerts")]
    assert order == sorted(order) and html.index("<header") < order[0]


@pytest.mark.parametrize(("statuses", "column"), [
    (("diagnosed", "diagnosed"), False),
    (("diagnosed", "skipped"), True),
    (("diagnosed", "failed"), True),
])
def test_the_status_column_appears_only_when_some_job_was_not_diagnosed(statuses: tuple[str, ...],
                                                                         column: bool) -> None:
    jobs = [make_fleet_job(job_id=f"job-{index}", status=status) for index, status in enumerate(statuses)]
    html = render_index(make_fleet(jobs=jobs))
    assert ('<th data-key="status"' in html) is column
    assert ('class="badge st-diagnosed"' in html) is column
    assert '<th data-key="worst"' not in html and "Worst severity" not in html


def test_unchanged_jobs_read_unchanged_not_skipped() -> None:
    html = render_index(make_fleet(jobs=[make_fleet_job(job_id="a", status="skipped"), make_fleet_job(job_id="b")]))
    visible = re.sub(r"<script.*?</script>|<style.*?</style>|<[^>]+>", " ", html, flags=re.DOTALL)
    assert "skipped" not in visible.lower()
    assert '<span class="label">unchanged</span>' in html and '<option value="skipped">unchanged</option>' in html
    assert '<span class="badge st-skipped">unchanged</span>' in html


def test_trends_start_from_the_second_night() -> None:
    one = render_index(with_fleet_intel(make_fleet(jobs=[make_fleet_job()]), trends=make_trends(["2026-11-30"])))
    trends = _section(one, "trends")
    assert "Trends start after a second night of history; so far there is one (2026-11-30)." in trends
    assert "<svg" not in trends
    two = _section(render_index(with_fleet_intel(make_fleet(jobs=[make_fleet_job()]),
                                                 trends=make_trends(["2026-11-29", "2026-11-30"]))), "trends")
    assert 'id="trend-jobs"' in two and "Trends start" not in two


def test_load_warnings_are_counted_on_the_row_and_linked() -> None:
    jobs = [{**make_fleet_job(job_id="lost-a-line"), "coverage": {"load_warnings": 2}},
            {**make_fleet_job(job_id="one", report=None), "coverage": {"load_warnings": 1}},
            {**make_fleet_job(job_id="none"), "coverage": {"load_warnings": 0}}]
    html = render_index(make_fleet(jobs=jobs))
    assert '<p class="load-mark"><a href="lost-a-line/report.html#load-warnings">⚠ 2 load warnings</a></p>' in html
    assert '<p class="load-mark">⚠ 1 load warning</p>' in html and html.count('class="load-mark"') == 2


def test_session_ids_are_shortened_with_the_full_id_on_hover() -> None:
    html = render_index(make_fleet(jobs=[job("restarted", cause=placed(oom=True), worst_session=SESSION,
                                             worst_attempt="attempt 1 of 2, interrupted, OOM on rank 3")]))
    span = f'<span class="session-id" title="{SESSION}">legacy-10513d62…</span>'
    assert html.count(span) == 2  # the attention line and the table row
    visible = re.sub(r"<script.*?</script>|<[^>]+>", " ", html, flags=re.DOTALL)
    assert SESSION not in visible


def test_hostile_strings_stay_text_in_the_attention_list() -> None:
    hostile = placed(oom=True, host=HOSTILE, phase_path=SCRIPT_PAYLOAD, oom_dump=f"out of memory: {IMG_PAYLOAD}",
                     signal=SCRIPT_PAYLOAD)
    jobs = [job(HOSTILE, cause=hostile, worst_session=IMG_PAYLOAD, worst_attempt=f"attempt 1 of 2, {SCRIPT_PAYLOAD}"),
            make_fleet_job(job_id=IMG_PAYLOAD, status="failed", error=SCRIPT_PAYLOAD),
            job("plain", verdict="warning", cause=placed(signal=IMG_PAYLOAD, severity="warning", oom=False))]
    fleet = with_fleet_intel(make_fleet(jobs=jobs), trends=[], regressions=[make_regression(job_id=HOSTILE,
                                                                                            job_name=IMG_PAYLOAD)],
                             suspects=[make_suspect(host=SCRIPT_PAYLOAD, device_id=2)])
    html = render_index(fleet)
    assert SCRIPT_PAYLOAD not in html and "<img" not in html
    items = attention_items(html)
    assert [attrs.get("data-job-id") for attrs, _ in items] == [HOSTILE, "plain", HOSTILE, IMG_PAYLOAD, None]
    assert items[0][1] == (f"critical {HOSTILE} Out of memory {SCRIPT_PAYLOAD} on rank 3 ({HOSTILE}, GPU 3), "
                           f"20.0 s into the job, in {SCRIPT_PAYLOAD}; {IMG_PAYLOAD}; in attempt 1 of 2, "
                           f"{SCRIPT_PAYLOAD} (session {short_id(IMG_PAYLOAD)})")
    assert items[-1][0]["data-host"] == SCRIPT_PAYLOAD
