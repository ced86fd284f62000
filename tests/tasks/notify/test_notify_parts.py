"""The pieces under notify_jobs: reading model.json, formatting, escaping, Slack limits, retries, the ledger."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import orjson
import pytest

from stormwatch.severity import Severity
from stormwatch.tasks.notify.delivery import SendError, deliver
from stormwatch.tasks.notify.email import build_message
from stormwatch.tasks.notify.findings import JobFinding, format_offset_ns, format_time_ns, one_line
from stormwatch.tasks.notify.ledger import (
    ChannelName,
    ChannelOutcome,
    ChannelStatus,
    Decision,
    FindingKey,
    append_lines,
    pending_job_ids,
    read_ledger,
)
from stormwatch.tasks.notify.secrets import Redactor
from stormwatch.tasks.notify.slack import MAX_SECTION_CHARS, job_section_text, slack_escape, slack_link, slack_payload
from stormwatch.tasks.retry import RetryPolicy
from tests.tasks.notify.servers import HOSTILE, document

NOW = datetime(2026, 1, 2, 2, 0, tzinfo=UTC)


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


# --- formatting and escaping ---------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("<!channel>", "&lt;!channel&gt;"),
        ("<!here|here>", "&lt;!here|here&gt;"),
        ("<http://evil.example|click>", "&lt;http://evil.example|click&gt;"),
        ("<@U0ADMIN> & <#C0GENERAL>", "&lt;@U0ADMIN&gt; &amp; &lt;#C0GENERAL&gt;"),
        ("&lt; already", "&amp;lt; already"),
        ("line\nbreak", "line break"),
    ],
)
def test_slack_escape(raw: str, escaped: str) -> None:
    assert slack_escape(raw) == escaped


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://r.example/job-1/report.html", "<https://r.example/job-1/report.html|open report>"),
        ("https://r.example/a|b>c<d e?x=1&y=2", "<https://r.example/a%7Cb%3Ec%3Cd%20e?x=1&amp;y=2|open report>"),
        ("file:///srv/reports/<job>/report.html", "file:///srv/reports/&lt;job&gt;/report.html"),
        ("s3://bucket/reports/job-1/report.html", "s3://bucket/reports/job-1/report.html"),
        (None, None),
    ],
)
def test_slack_links_only_for_web_urls(url: str | None, shown: str | None) -> None:
    assert slack_link(url) == shown


def huge_hostile_job() -> JobFinding:
    doc = document("hostile", job_id=HOSTILE * 40)
    for indicator in doc["model"]["indicators"]:
        indicator["details"] = indicator["phase_path"] = indicator["signal"] = "<&>" * 2000
    return JobFinding.from_document(doc, report_url="https://r.example/report.html")


def test_a_section_stays_within_slacks_limit_and_inert() -> None:
    text = job_section_text(huge_hostile_job())
    assert len(text) <= MAX_SECTION_CHARS
    assert text.count("<") == 1 and "<https://r.example/report.html|open report>" in text
    assert not text.rstrip("…").endswith(("&", "&a", "&am", "&l", "&g"))


def test_a_digest_keeps_within_fifty_blocks() -> None:
    jobs = [JobFinding.from_document(document("collective", job_id=f"job-{n}"), report_url=None) for n in range(60)]
    payload = slack_payload(jobs, notify_on=Severity.CRITICAL)
    assert len(payload["blocks"]) == 47
    assert payload["blocks"][-1]["elements"][0]["text"].startswith("… and 15 more job(s)")
    assert payload["text"].startswith("Stormwatch: 60 jobs with critical GPU-memory findings: job job-0 is critical")
    assert len(orjson.dumps(payload)) < 200_000


def test_email_headers_stay_single_lines_for_any_job_id() -> None:
    message = build_message(
        [huge_hostile_job()], notify_on=Severity.CRITICAL, sender="s@example.com", recipients=["a@example.com"], now=NOW
    )
    head = bytes(message).split(b"\r\n\r\n", 1)[0].decode()
    names = [line.split(":", 1)[0] for line in head.split("\r\n") if not line.startswith((" ", "\t"))]
    assert names == ["Subject", "From", "To", "Date", "Message-ID", "Auto-Submitted", "MIME-Version", "Content-Type"]
    assert len(str(message["Subject"])) <= 200


# --- retries ---------------------------------------------------------------------------------


def flaky(failures: list[Exception]) -> Callable[[], None]:
    def send() -> None:
        if failures:
            raise failures.pop(0)

    return send


@pytest.mark.parametrize(
    ("failures", "ok", "attempts", "sleeps"),
    [
        ([], True, 1, []),
        ([SendError("HTTP 500", retriable=True)] * 2, True, 3, [0.1, 0.2]),
        ([SendError("HTTP 500", retriable=True)] * 3, False, 3, [0.1, 0.2]),
        ([SendError("HTTP 400 invalid_payload", retriable=False)], False, 1, []),
        ([SendError("HTTP 429", retriable=True, retry_after_s=7.0)], True, 2, [7.0]),
        ([SendError("HTTP 429", retriable=True, retry_after_s=3600.0)], True, 2, [30.0]),
        ([RuntimeError("bug with https://hooks.example/T/secret-path")], False, 1, []),
    ],
)
def test_deliver_retries_transient_failures_with_exponential_back_off(
    failures: list[Exception], ok: bool, attempts: int, sleeps: list[float]
) -> None:
    slept: list[float] = []
    delivery = deliver(
        flaky(list(failures)),
        what="test message",
        policy=RetryPolicy.exponential(3, first_delay_s=0.1),
        redact=Redactor(["https://hooks.example/T/secret-path"]),
        sleep=slept.append,
    )
    assert (delivery.ok, delivery.attempts, slept) == (ok, attempts, sleeps)
    assert delivery.error is None if ok else "secret-path" not in (delivery.error or "")


def test_back_off_doubles() -> None:
    policy = RetryPolicy.exponential(5, first_delay_s=1.0)
    assert [policy.delay_s(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]


def test_redactor_covers_encoded_forms_and_url_parts() -> None:
    redact = Redactor(["smtp://bot:p%40ss%2Fw0rd@mail.example:25", "https://hooks.example/services/T1/B2/tok3n?x=1"])
    text = (
        "login p@ss/w0rd p%40ss%2Fw0rd url /services/T1/B2/tok3n?x=1 raw https://hooks.example/services/T1/B2/tok3n?x=1"
    )
    assert redact(text) == "login [redacted] [redacted] url [redacted] raw [redacted]"


# --- the ledger ------------------------------------------------------------------------------


def decision(job_id: str, slack: ChannelStatus, email: ChannelStatus, severity: str = "critical") -> Decision:
    key = FindingKey(job_id, "most_severe", 3, "alert:critical", 1_700_000_003_500_000_000)
    channels = {ChannelName.SLACK: ChannelOutcome(slack, 1), ChannelName.EMAIL: ChannelOutcome(email, 0, "boom")}
    return Decision(key, Severity(severity), "2026-01-02T02:00:00+00:00", channels)


def test_ledger_lines_round_trip_and_the_latest_line_wins() -> None:
    first = decision("job-1", ChannelStatus.FAILED, ChannelStatus.NOT_CONFIGURED)
    later = decision("job-1", ChannelStatus.SENT, ChannelStatus.NOT_CONFIGURED)
    state = read_ledger(append_lines(None, [first, later]))
    assert state.latest == {first.key: later} and state.problems == ()
    assert orjson.loads(first.to_line())["key"] == "job-1|most_severe|3|alert:critical|1700000003500000000"


@pytest.mark.parametrize(
    ("existing", "expected_prefix"),
    [(None, b""), (b"", b""), (b'{"x":1}\n', b'{"x":1}\n'), (b'{"torn', b'{"torn\n')],
)
def test_appending_never_rewrites_existing_bytes(existing: bytes | None, expected_prefix: bytes) -> None:
    line = decision("job-1", ChannelStatus.SENT, ChannelStatus.SENT).to_line()
    combined = append_lines(existing, [decision("job-1", ChannelStatus.SENT, ChannelStatus.SENT)])
    assert combined == expected_prefix + line
    assert append_lines(existing, []) == (existing or b"")


def test_unreadable_lines_and_unknown_channels_are_tolerated() -> None:
    line = orjson.loads(decision("job-1", ChannelStatus.SENT, ChannelStatus.SENT).to_line())
    line["channels"]["pager"] = {"status": "sent"}
    data = b"\n".join([b"garbage", orjson.dumps(line), b'{"key": 1}', b""])
    state = read_ledger(data)
    assert list(state.latest) == [decision("job-1", ChannelStatus.SENT, ChannelStatus.SENT).key]
    assert state.problems == (
        "notifications.jsonl line 1: unreadable (JSONDecodeError); skipped",
        "notifications.jsonl line 3: unreadable (KeyError); skipped",
    )


def test_pending_jobs_are_those_not_yet_sent_on_a_configured_channel() -> None:
    data = append_lines(
        None,
        [
            decision("sent-both", ChannelStatus.SENT, ChannelStatus.SENT),
            decision("slack-failed", ChannelStatus.FAILED, ChannelStatus.SENT),
            decision("email-unconfigured", ChannelStatus.SENT, ChannelStatus.NOT_CONFIGURED),
            decision(
                "warning-only", ChannelStatus.SKIPPED_BELOW_THRESHOLD, ChannelStatus.SKIPPED_BELOW_THRESHOLD, "warning"
            ),
        ],
    )
    assert pending_job_ids(data, channels=[ChannelName.SLACK]) == {"slack-failed"}
    assert pending_job_ids(data, channels=list(ChannelName)) == {"slack-failed", "email-unconfigured"}
    assert pending_job_ids(data, channels=[ChannelName.SLACK], notify_on=Severity.WARNING) == {
        "slack-failed",
        "warning-only",
    }
    assert pending_job_ids(None, channels=list(ChannelName)) == set()
