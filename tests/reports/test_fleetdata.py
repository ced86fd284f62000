"""The fleet index's JSON data block: every job, compact, decodable to exactly the rows the page
renders, safe inside its <script> element; the page stays small at 10,000 jobs."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from stormwatch.reports import render_index
from stormwatch.reports.fleetdata import COLUMNS, dense_ranks, fleet_data, script_href
from stormwatch.reports.fleetview import PAGE_SIZE, SORT_KEYS, fleet_view
from tests.reports.builders import HOSTILE_JOB_IDS, make_fleet, make_fleet_job, make_large_fleet

INDEX_BUDGET_BYTES = 5 * 10**6  # issue 15: index.html <= 5 MB at 10,000 jobs


def _decode(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows as index.js reads them."""
    vocabulary = {"status": data["statuses"], "verdict": data["verdicts"]}
    decoded = []
    for row in data["rows"]:
        item = dict(zip(data["columns"], row, strict=True))
        for name, value in item.items():
            if name in vocabulary:
                item[name] = vocabulary[name][value]
            elif name == "sig":
                item[name] = None if value < 0 else tuple(data["signals"][value])
            elif name == "also" and value is not None:
                item[name] = (value[0], tuple(data["signals"][value[1]]), value[2])
            elif name not in ("href", "loadw", "also") and isinstance(value, int):
                item[name] = data["strings"][value]
        if item["href"] == "":
            item["href"] = script_href(item["job"])
        decoded.append(item)
    return decoded


def _signal(signal: Any) -> tuple[str, str, str] | None:
    return None if signal is None else (signal.title, signal.code, signal.meaning)


def test_every_row_decodes_to_what_the_page_renders() -> None:
    fleet = make_large_fleet(600)
    for index, job in enumerate(fleet["jobs"][::40]):
        job["outlier_ranks"] = [{"rank": index % 4}, {"rank": 6, "metric": "hidden_gap_peak_bytes"}]
        job["coverage"] = {"load_warnings": index}
    view = fleet_view(fleet)
    data = fleet_data(view.rows)
    assert sum(bool(row.outliers) for row in view.rows) == 15
    assert sum(row.load_warnings > 0 for row in view.rows) == 14
    by_id = {row.job_id: row for row in view.rows}
    assert by_id[fleet["jobs"][40]["job_id"]].outliers == "1,6"
    assert by_id[fleet["jobs"][40]["job_id"]].load_warnings == 1
    assert data["columns"] == list(COLUMNS) and data["page_size"] == PAGE_SIZE
    decoded = _decode(data)
    assert len(decoded) == len(view.rows) == 600
    for row, item in zip(view.rows, decoded, strict=True):
        also = None if row.also is None else (row.also[0], _signal(row.also[1]), row.also[2])
        assert item == {"job": row.job_id, "status": row.status, "verdict": row.verdict,
                        "summary": row.summary, "sig": _signal(row.signal), "where": row.cause_where,
                        "detail": row.cause_detail, "also": also, "session": row.session, "ranks": row.ranks,
                        "missing": row.missing, "diagnosed": row.diagnosed_at, "error": row.error,
                        "href": row.report_href, "outliers": row.outliers, "cut": row.cut_short,
                        "loadw": row.load_warnings}
    assert data["strings"] and len(set(data["strings"])) == len(data["strings"])
    assert any(row[COLUMNS.index("href")] not in ("", None) for row in data["rows"])  # ids "/" or "'" in them
    assert data["attention"] == [row.index for row in view.rows if row.needs_attention]
    assert data["status_column"] is True and data["status_labels"][data["statuses"].index("skipped")] == "unchanged"


def test_rows_come_most_severe_first_then_newest() -> None:
    view = fleet_view(make_large_fleet(600))
    levels = {"critical": 6, "warning": 5, "failed": 4, "refused": 3, "info": 2, "clean": 1, "empty": 0}
    keys = [(levels[row.verdict] if row.verdict in levels else levels[row.status], row.sort_keys[0][1])
            for row in view.rows]
    assert keys == sorted(keys, reverse=True)
    assert [row.index for row in view.rows] == list(range(600))


def test_sort_orders_are_dense_ranks_of_the_sort_keys() -> None:
    assert dense_ranks(["b", "a", "c", "a"]) == [1, 0, 2, 0]
    assert dense_ranks([(1, 8), (0, 8), (0, 7)]) == [2, 1, 0]
    view = fleet_view(make_large_fleet(300))
    order = fleet_data(view.rows)["order"]
    assert list(order) == list(SORT_KEYS)
    for position, name in enumerate(SORT_KEYS):
        keys = [row.sort_keys[position] for row in view.rows]
        by_rank = sorted(range(len(keys)), key=lambda index, ranks=order[name]: (ranks[index], index))
        assert by_rank == sorted(range(len(keys)), key=lambda index, keys=keys: (keys[index], index))


@pytest.mark.parametrize(
    ("job_id", "expected"),
    [
        ("job-1", "job-1/report.html"),
        ("it's (quoted)!*~", "it's%20(quoted)!*~/report.html"),  # encodeURIComponent keeps !*'()~
        ("a/b?c#d", "a%2Fb%3Fc%23d/report.html"),
        ("é\u2028", "%C3%A9%E2%80%A8/report.html"),
        ("\ud800", None),  # encodeURIComponent throws on a lone surrogate: the link is spelled out
    ],
)
def test_script_href_is_what_encode_uri_component_builds(job_id: str, expected: str | None) -> None:
    assert script_href(job_id) == expected


def test_hostile_job_ids_cannot_leave_the_data_block() -> None:
    jobs = [make_fleet_job(job_id=f"{index}-{job_id}", error=job_id) for index, job_id in enumerate(HOSTILE_JOB_IDS)]
    html = render_index(make_fleet(jobs=jobs))
    assert "<!--" not in html
    assert len(re.findall("</script", html, flags=re.IGNORECASE)) == 2  # the data block's and the script's own
    block = re.search(r'<script type="application/json" id="jobs-data">(.*?)</script>', html, flags=re.DOTALL)
    assert block is not None and not re.search("[<>&\u2028\u2029]", block.group(1))
    decoded = [item["job"] for item in _decode(orjson.loads(block.group(1)))]
    assert sorted(decoded) == sorted(job["job_id"] for job in jobs)


def test_ten_thousand_jobs_stay_under_the_size_budget() -> None:
    fleet = make_large_fleet(10_000)
    html = render_index(fleet)
    size = len(html.encode("utf-8"))
    print(f"\n10,000 jobs: index.html {size / 1e6:.2f} MB")
    assert size <= INDEX_BUDGET_BYTES
    assert html.count('<tr class="job ') == PAGE_SIZE and "first 100 of 10000 jobs, most severe first" in html
