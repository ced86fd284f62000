"""Job names from job ids: the default pattern and custom ones, table-driven."""

from __future__ import annotations

import pytest

from stormwatch.history.job_names import JobNamePattern, JobNamePatternError


@pytest.mark.parametrize(
    ("job_id", "name"),
    [
        ("llama-8r-0142", "llama-8r"),
        ("train-a-2026-11-30", "train-a"),
        ("train-a-20261130", "train-a"),
        ("train-a-2026-11-30T020000Z", "train-a"),
        ("bert_7", "bert"),
        ("resnet.12", "resnet"),
        ("bert-large", "bert-large"),   # no trailing number: the id is the name
        ("llama-8r", "llama-8r"),       # "8r" is no run number
        ("x-1-2", "x-1"),               # only the last number goes
        ("12345", "12345"),             # nothing would be left: the id is the name
        ("-7", "-7"),
    ],
)
def test_default_pattern_strips_a_trailing_run_number_or_date(job_id: str, name: str) -> None:
    assert JobNamePattern().name_of(job_id) == name


@pytest.mark.parametrize(
    ("regex", "job_id", "name"),
    [
        (r"([a-z]+)-.*", "llama-8r-0142", "llama"),
        (r"team-(\w+)-run\d+", "team-vision-run12", "vision"),
        (r"team-(\w+)-run\d+", "other-job", "other-job"),   # no match: the id is the name
        (r"(x)?job-\d+", "job-3", "job-3"),                 # group 1 empty: the id is the name
        (r"(?P<name>.+)@\d+", "svc@42", "svc"),
    ],
)
def test_custom_patterns_take_group_one_of_a_full_match(regex: str, job_id: str, name: str) -> None:
    assert JobNamePattern(regex).name_of(job_id) == name


@pytest.mark.parametrize(
    ("regex", "words"),
    [
        (r"(unclosed", "does not compile"),
        (r"[z-a]", "does not compile"),
        (r"llama-\d+", "has no group"),
        (r"(?:llama)-\d+", "has no group"),
    ],
)
def test_a_pattern_that_does_not_compile_or_has_no_group_is_a_usage_error(regex: str, words: str) -> None:
    with pytest.raises(JobNamePatternError, match=words):
        JobNamePattern(regex)


def test_patterns_are_frozen_values() -> None:
    assert JobNamePattern(r"(a)") == JobNamePattern(r"(a)")
    with pytest.raises(AttributeError):
        JobNamePattern().regex = "(b)"  # type: ignore[misc]
