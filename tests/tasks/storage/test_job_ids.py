"""Job-id validation: what is accepted unchanged, and what is refused with which reason."""

from __future__ import annotations

import pytest

from stormwatch.tasks.storage.job_ids import MAX_JOB_ID_CHARS, InvalidJobIdError, segment_problem, validate_job_id

VALID = [
    "job-1",
    "a",
    "torchelastic_9f8e7d",
    "slurm.123456",
    "2024-01-01T02:00:00Z",
    "run with inner spaces",
    "ünïcødé-训练",
    "...",
    ".hidden",
    "a..b",
    "100%",
    "50%-done",
    "%41",  # an encoded letter is no separator
    "%2",
    "x" * MAX_JOB_ID_CHARS,
]

INVALID = [
    ("", "is empty"),
    (".", "relative path segment"),
    ("..", "relative path segment"),
    ("/", "absolute path"),
    ("/etc", "absolute path"),
    ("a/b", "path separator"),
    ("a/", "path separator"),
    ("../x", "path separator"),
    ("a\\b", "path separator"),
    ("\\", "path separator"),
    ("..\\..\\x", "path separator"),
    ("a\x00b", "NUL"),
    ("\x00", "NUL"),
    ("bad\x07id", "control character (U+0007)"),
    ("tab\there", "control character (U+0009)"),
    ("line\nbreak", "control character (U+000A)"),
    ("esc\x1b[31m", "control character (U+001B)"),
    ("del\x7f", "control character (U+007F)"),
    ("c1\x85", "control character (U+0085)"),
    ("c1\x9f", "control character (U+009F)"),
    ("rtl\u202eoverride", "invisible format character"),
    ("zero\u200bwidth", "invisible format character"),
    ("line\u2028sep", "line separator"),
    ("para\u2029sep", "paragraph separator"),
    ("bytes\udcff", "undecodable byte"),
    ("a%2fb", "percent-encoded"),
    ("a%2Fb", "percent-encoded"),
    ("a%5cb", "percent-encoded"),
    ("a%5Cb", "percent-encoded"),
    ("%2e%2e", "percent-encoded"),
    ("%2E", "percent-encoded"),
    ("a%252fb", "percent-encoded"),  # decodes to a%2fb, then to a/b
    ("a%25252Eb", "percent-encoded"),
    (" job", "leading or trailing whitespace"),
    ("job ", "leading or trailing whitespace"),
    ("\u00a0job", "leading or trailing whitespace"),
    ("job\u3000", "leading or trailing whitespace"),
    ("x" * (MAX_JOB_ID_CHARS + 1), f"{MAX_JOB_ID_CHARS + 1} characters long"),
    ("../" * 100, "characters long"),
]


@pytest.mark.parametrize("raw", VALID)
def test_valid_ids_are_returned_unchanged(raw: str) -> None:
    assert validate_job_id(raw) is raw
    assert segment_problem(raw) is None


@pytest.mark.parametrize(("raw", "reason"), INVALID)
def test_invalid_ids_are_refused_with_a_reason(raw: str, reason: str) -> None:
    with pytest.raises(InvalidJobIdError) as caught:
        validate_job_id(raw)
    assert reason in caught.value.reason
    assert caught.value.raw == raw
    assert isinstance(caught.value, ValueError)
    assert segment_problem(raw) == caught.value.reason


def test_message_shows_the_id_escaped_and_shortened() -> None:
    with pytest.raises(InvalidJobIdError) as caught:
        validate_job_id("bad\x07" + "y" * 300)
    message = str(caught.value)
    assert "\x07" not in message and "\\x07" in message
    assert len(message) < 200
