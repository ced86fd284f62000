"""Durations as people and deployments write them (``7d``, ``36h``, ``P7D``), read at the edge for the alert policy."""

from __future__ import annotations

from datetime import timedelta

import pytest

from stormwatch.tasks.notify.settings import parse_duration


@pytest.mark.parametrize(("raw", "expected"), [
    ("7d", timedelta(days=7)), ("36h", timedelta(hours=36)), ("90m", timedelta(minutes=90)),
    ("3600s", timedelta(hours=1)), ("1.5d", timedelta(hours=36)), ("3600", timedelta(hours=1)),
    ("P7D", timedelta(days=7)), ("PT12H", timedelta(hours=12)), (timedelta(days=2), timedelta(days=2)),
    (60, timedelta(minutes=1)),
])
def test_durations(raw: object, expected: timedelta) -> None:
    assert parse_duration(raw) == expected


@pytest.mark.parametrize("raw", ["", "soon", "7w", "d", "0", "-1d", 0, True])
def test_bad_durations(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(raw)
