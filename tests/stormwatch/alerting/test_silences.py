"""Silences: matchers, expiry, stable ids, the stored file and its errors (naming the line)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from stormwatch.alerting.config_file import ConfigError
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.observations import Labels
from stormwatch.alerting.silences import Silence, SilenceBook, SilenceMatcher, parse_until, read_silences, silence_id
from stormwatch.severity import Severity

NOW = datetime(2026, 11, 30, 2, tzinfo=UTC)
FILE = "reports/silences.json"
LLAMA = Labels("llama-8r-0142", "llama-8r", AlertKind.REGRESSION, Severity.WARNING, "regression:peak_reserved_bytes",
               None)
DEVICE = Labels("", "", AlertKind.SUSPECT_HOST, Severity.WARNING, "suspect_host", "node-13")

MATCHES = [
    ("job=llama-*", LLAMA, True),
    ("job=llama-?r-*", LLAMA, True),
    ("job=bert-*", LLAMA, False),
    ("job!=bert-*", LLAMA, True),
    ("job_name=llama-8r", LLAMA, True),
    ("job_name=llama", LLAMA, False),
    ("kind=regression", LLAMA, True),
    ("kind=REGRESSION", LLAMA, True),
    ("kind!=regression", LLAMA, False),
    ("severity=critical", LLAMA, False),
    ("signal=regression:*", LLAMA, True),
    ("host=node-1*", DEVICE, True),
    ("host=node-1*", LLAMA, False),
    ("job=*", DEVICE, True),  # a device's job id is empty
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES, ids=[f"{m[0]}-{m[1].kind}" for m in MATCHES])
def test_matchers(text: str, labels: Labels, expected: bool) -> None:
    matcher = SilenceMatcher.parse(text)
    assert matcher.matches(labels) is expected
    assert SilenceMatcher.parse(matcher.text) == matcher


BAD = [("job", "is not name=value"), ("jobs=x", "unknown name 'jobs'"), ("job=", "empty"),
       ("kind=oops", "kind is one of"), ("severity=fatal", "severity is one of"), ("job=a\nb", "control characters"),
       ("=x", "is not name=value")]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[b[0] for b in BAD])
def test_unparsable_matchers_say_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SilenceMatcher.parse(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-08", datetime(2026, 12, 9, tzinfo=UTC)),  # through the end of that day
    ("2026-12-08T12:30", datetime(2026, 12, 8, 12, 30, tzinfo=UTC)),
    ("2026-12-08T12:30+02:00", datetime(2026, 12, 8, 10, 30, tzinfo=UTC)),
])
def test_until(text: str, expected: datetime) -> None:
    assert parse_until(text) == expected


def test_until_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="is not a date"):
        parse_until("next tuesday")


def silence(*texts: str, until: datetime = NOW + timedelta(days=7), reason: str = "known") -> Silence:
    matchers = tuple(sorted(SilenceMatcher.parse(text) for text in texts))
    return Silence(silence_id(matchers, until, reason), matchers, until, reason, NOW, "ana")


def test_a_silence_holds_while_active_and_all_its_matchers_match() -> None:
    item = silence("job=llama-*", "kind=regression")
    book, added = SilenceBook().add(item)
    assert added and book.silencing(LLAMA, NOW) == item
    assert book.silencing(LLAMA, item.until) is None  # expired at its time
    assert book.silencing(DEVICE, NOW) is None
    assert SilenceBook().add(silence("job=llama-*", "kind=oom"))[0].silencing(LLAMA, NOW) is None
    expired = book.expire(item.id, NOW)
    assert expired.silencing(LLAMA, NOW) is None and expired.find(item.id).expired_at == NOW
    with pytest.raises(KeyError):
        book.expire("s-00000000", NOW)


def test_ids_are_short_stable_and_the_same_add_twice_is_one_silence() -> None:
    first, again = silence("kind=regression", "job=llama-*"), silence("job=llama-*", "kind=regression")
    assert first.id == again.id and len(first.id) == 10 and first.id.startswith("s-")
    assert silence("job=llama-*", reason="other").id != first.id
    book, _ = SilenceBook().add(first)
    same, added = book.add(again)
    assert not added and same == book
    readded, added = book.expire(first.id, NOW).add(again)  # an expired one can be added again
    assert added and readded.silencing(LLAMA, NOW) is not None and len(readded.silences) == 1


def test_the_file_round_trips_one_silence_per_line() -> None:
    book = SilenceBook((silence("job=llama-*"), silence("host=node-13", reason="bad host")))
    data = book.to_bytes()
    assert read_silences(data, file=FILE) == book
    assert data.decode().splitlines()[1].startswith('{"id": "s-') and len(data.decode().splitlines()) == 4
    assert read_silences(None, file=FILE) == read_silences(b"  \n", file=FILE) == SilenceBook()


def _with(line2: str, line3: str | None = None) -> bytes:
    third = line3 if line3 is not None else json.dumps(silence("job=llama-*").to_json())
    return f'{{"version": 1, "silences": [\n{line2},\n{third}\n]}}\n'.encode()


def _item(identifier: str, matchers: str, until: str = "2026-12-09T00:00:00+00:00") -> str:
    return (f'{{"id": "{identifier}", "matchers": {matchers}, "until": "{until}", "reason": "", '
            f'"created_at": "2026-11-01T00:00:00+00:00"}}')


FILE_ERRORS = [
    ("not json", b'{"version": 1, "silences": [\n{"id": \n', 3, "not valid JSON"),
    ("not the layout", b'[1, 2]\n', 1, 'expected {"version": 1'),
    ("unknown version", b'{"version": 9, "silences": []}', 1, "unknown version"),
    ("a bad matcher on line 3", _with(_item("s-0000000a", '["job=x"]'), _item("s-0000000b", '["jb=x"]')), 3,
     "silence 2: matcher 'jb=x': unknown name"),
    ("a naive time", _with(_item("s-0000000a", '["job=x"]', until="2026-12-09T00:00:00")), 2,
     "silence 1: until has no time zone"),
    ("a bad id", _with(_item("x", '["job=x"]')), 2, "id must be"),
    ("no matcher", _with(_item("s-0000000a", "[]")), 2, "matchers must be"),
]


@pytest.mark.parametrize(("case", "data", "line", "message"), FILE_ERRORS, ids=[e[0] for e in FILE_ERRORS])
def test_a_malformed_file_names_the_line(case: str, data: bytes, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_silences(data, file=FILE)
    assert caught.value.line == line and message in str(caught.value), str(caught.value)
    assert str(caught.value).startswith(f"{FILE} line {line}: ")
