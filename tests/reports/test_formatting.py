"""Human units in reports."""

from __future__ import annotations

import pytest

from stormwatch.reports.formatting import (
    NOT_AVAILABLE,
    format_bytes,
    format_confidence,
    format_duration_s,
    format_iso,
    format_offset,
    format_utc_ns,
)
from tests.builders import GIB, MIB, START_NS


@pytest.mark.parametrize(
    ("value", "signed", "expected"),
    [
        (None, False, NOT_AVAILABLE),
        (0, False, "0 B"),
        (512, False, "512 B"),
        (1536, False, "1.50 KiB"),
        (256 * MIB, False, "256 MiB"),
        (88 * MIB, True, "+88.0 MiB"),
        (-88 * MIB, True, "-88.0 MiB"),
        (GIB + GIB // 2, False, "1.50 GiB"),
        (80 * GIB, False, "80.0 GiB"),
        (3 * 1024 * GIB, False, "3.00 TiB"),
        (float("nan"), False, NOT_AVAILABLE),
    ],
)
def test_format_bytes(value: float | None, signed: bool, expected: str) -> None:
    assert format_bytes(value, signed=signed) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(None, NOT_AVAILABLE), (0.25, "0.250 s"), (2.0, "2.000 s"), (12.5, "12.5 s"), (184.5, "3 min 04.5 s"),
     (7384.0, "2 h 03 min 04 s"), (-1.5, "-1.500 s")],
)
def test_format_duration(seconds: float | None, expected: str) -> None:
    assert format_duration_s(seconds) == expected


def test_offsets_and_times() -> None:
    assert format_offset(START_NS + 2_000_000_000, START_NS) == "+2.000 s"
    assert format_offset(START_NS, None) == "2023-11-14 22:13:20.000 UTC"
    assert format_offset(None, START_NS) == NOT_AVAILABLE
    assert format_utc_ns(START_NS + 500_000_000) == "2023-11-14 22:13:20.500 UTC"
    assert format_iso("2026-11-30T19:12:22.143606+00:00") == "2026-11-30 19:12:22 UTC"
    assert format_iso("2026-11-30T20:12:22+01:00") == "2026-11-30 19:12:22 UTC"
    assert format_iso("yesterday") == "yesterday"
    assert format_iso(None) == NOT_AVAILABLE
    assert format_confidence(0.51) == "51 %"
    assert format_confidence(None) == NOT_AVAILABLE
