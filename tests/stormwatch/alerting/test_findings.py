"""A job's finding read from model.json, and the plain-text forms of its times and strings."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stormwatch.alerting.findings import JobFinding
from stormwatch.alerting.plain_text import format_offset_ns, format_time_ns, one_line
from stormwatch.severity import Severity
from tests.stormwatch.alerting.documents import document

# --- model.json -> JobFinding -------------------------------------------------------------


def test_a_critical_collective_job_reads_as_two_indicators_timed_from_the_first_session() -> None:
    doc = document("collective")
    job = JobFinding.from_document(doc, report_url="https://r.example/x")
    started = min(session["started_at_ns"] for session in doc["sessions"])
    assert job.started_at_ns == started == 1_700_000_000_000_000_000
    assert [(item.kind, item.rank, item.severity, item.signal) for item in job.indicators] == [
        ("earliest", 0, Severity.CRITICAL, "collective:collective_confident"),
        ("most_severe", 0, Severity.CRITICAL, "collective:collective_confident"),
    ]
    assert job.indicators[0].since_start_ns == 2_830_000_000
    assert job.indicators[0].phase_path == "train / all_reduce"
    assert job.indicators[0].when == "2023-11-14 22:13:22.830 UTC (+2.830 s after start)"
    assert (job.verdict, job.worst(), job.missing_ranks, job.expected_ranks) == ("critical", Severity.CRITICAL, (), 4)


def test_job_start_falls_back_to_the_earliest_sample_or_marker() -> None:
    doc = document("collective")
    doc["sessions"] = []
    assert JobFinding.from_document(doc, report_url=None).started_at_ns == 1_700_000_000_000_000_000
    doc["model"]["per_rank_timelines"], doc["model"]["markers_by_rank"] = {}, {}
    job = JobFinding.from_document(doc, report_url=None)
    assert job.started_at_ns is None and job.indicators[0].since_start_ns is None


def test_missing_ranks_and_clean_jobs() -> None:
    missing = JobFinding.from_document(document("missing"), report_url=None)
    assert (missing.verdict, missing.indicators, missing.missing_text, missing.expected_ranks) == (
        "warning",
        (),
        "2-3",
        4,
    )
    assert JobFinding.from_document(document("clean"), report_url=None).worst() is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda doc: doc.pop("model"),
        lambda doc: doc["model"]["indicators"][0].pop("rank"),
        lambda doc: doc["model"]["indicators"][0].update(severity="fatal"),
        lambda doc: doc.update(verdict=None),
    ],
)
def test_a_malformed_document_is_a_value_error(damage: Callable[[dict], object]) -> None:
    doc = document("alerts")
    damage(doc)
    with pytest.raises(ValueError, match="not a stormwatch model.json document"):
        JobFinding.from_document(doc, report_url=None)


# --- plain text ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset_ns", "text"),
    [
        (2_830_000_000, "+2.830 s"),
        (0, "+0.000 s"),
        (-500_000_000, "-0.500 s"),
        (75_000_000_000, "+1 min 15.0 s"),
        (3_723_500_000_000, "+1 h 02 min 03.5 s"),
    ],
)
def test_offsets(offset_ns: int, text: str) -> None:
    assert format_offset_ns(offset_ns) == text


def test_times_are_utc_to_the_millisecond() -> None:
    assert format_time_ns(1_700_000_002_830_999_999) == "2023-11-14 22:13:22.830 UTC"


@pytest.mark.parametrize(
    ("raw", "limit", "text"),
    [
        ("a\r\nBcc: x", 300, "a  Bcc: x"),
        ("left\u202eright\u2028end\x00", 300, "left right end "),
        ("abcdef", 4, "abc…"),
    ],
)
def test_one_line(raw: str, limit: int, text: str) -> None:
    assert one_line(raw, limit) == text


def test_one_line_blanks_exactly_the_control_format_and_line_separator_characters() -> None:
    """Every code point, alone (the printable fast path) and all together (the per-character pass)."""
    import unicodedata

    every = [chr(point) for point in range(0x110000)]
    blanked = {ch for ch in every if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")}
    assert {ch for ch in every if one_line(ch) != ch} == blanked and {one_line(ch) for ch in blanked} == {" "}
    assert one_line("".join(every), len(every)) == "".join(" " if ch in blanked else ch for ch in every)


