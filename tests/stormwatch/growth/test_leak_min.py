"""parse_leak_min and LeakMin: accepted and refused text, canonical text, the threshold on a device,
and the leak-min as rank_growth applies it."""

from __future__ import annotations

import pytest

from stormwatch.growth.leak_min import DEFAULT_LEAK_MIN, LeakMin, parse_leak_min
from stormwatch.growth.rank_growth import GrowthSettings, rank_growth
from tests.stormwatch.growth.frames import GIB, MIB, Memory, rank_frame


@pytest.mark.parametrize(("text", "bytes_per_hour", "share", "canonical"), [
    ("512MiB/h", 512 * MIB, None, "512MiB/h"),
    ("1.5GiB/h", 1.5 * GIB, None, "1.5GiB/h"),
    ("268435456/h", 256 * MIB, None, "256MiB/h"),
    ("100B/h", 100, None, "100/h"),
    ("2048KiB/h", 2 * MIB, None, "2MiB/h"),
    ("0.3GiB/h", 0.3 * GIB, None, "307.2MiB/h"),
    ("1TiB/h", float(1 << 40), None, "1TiB/h"),
    (" 2 gib / H ", 2 * GIB, None, "2GiB/h"),
    ("0.8%/h", None, 0.008, "0.8%/h"),
    ("100%/h", None, 1.0, "100%/h"),
    ("1GiB/h,1%/h", GIB, 0.01, "1GiB/h,1%/h"),
    ("1%/h, 1GiB/h", GIB, 0.01, "1GiB/h,1%/h"),
    ("default", 256 * MIB, 0.005, "default"),
    (" Default ", 256 * MIB, 0.005, "default"),
    ("256MiB/h,0.5%/h", 256 * MIB, 0.005, "default"),
])
def test_accepted_forms_and_their_canonical_text(text: str, bytes_per_hour: float | None, share: float | None,
                                                 canonical: str) -> None:
    parsed = parse_leak_min(text)
    assert parsed == LeakMin(bytes_per_hour=bytes_per_hour, device_share_per_hour=share)
    assert parsed.text == canonical
    assert parse_leak_min(parsed.text) == parsed  # the canonical text reads back to the same value
    assert parsed.is_default is (canonical == "default")


@pytest.mark.parametrize(("text", "problem"), [
    ("", "is empty"),
    ("   ", "is empty"),
    ("8GB/h", "has unknown unit 'GB'"),
    ("8 gigs/h", "has unknown unit 'gigs'"),
    ("512MiB", "is not a number with a unit per hour"),
    ("fast", "is not a number with a unit per hour"),
    ("nan/h", "is not a number with a unit per hour"),
    ("1GiB/h,", "is not a number with a unit per hour"),
    ("1GiB/d", "is per 'd', not per hour"),
    ("1GiB/", "is per 'nothing', not per hour"),
    ("0MiB/h", "is not a positive rate"),
    ("-1GiB/h", "is not a positive rate"),
    ("1e400/h", "is not a positive rate"),
    ("0%/h", "is a share outside (0, 100] %"),
    ("150%/h", "is a share outside (0, 100] %"),
    ("1%/h,2%/h", "gives two shares"),
    ("1GiB/h,2GiB/h", "gives two rates"),
    ("1GiB/h\n", None),  # trailing whitespace is fine
])
def test_refused_forms_say_what_is_wrong_in_one_line_with_the_accepted_forms(text: str, problem: str | None) -> None:
    if problem is None:
        assert parse_leak_min(text).text == "1GiB/h"
        return
    with pytest.raises(ValueError) as caught:
        parse_leak_min(text)
    message = str(caught.value)
    assert message.startswith(f"--leak-min {text!r} {problem}")
    assert "\n" not in message
    for form in ("512MiB/h", "1.5GiB/h", "268435456/h", "0.8%/h", "default"):
        assert form in message


@pytest.mark.parametrize(("leak_min", "device_total_bytes", "threshold"), [
    (DEFAULT_LEAK_MIN, 80 * GIB, 0.005 * 80 * GIB),   # the share wins on a large device
    (DEFAULT_LEAK_MIN, 16 * GIB, 256 * MIB),          # the floor wins on a small one
    (DEFAULT_LEAK_MIN, None, 256 * MIB),              # unknown device: the rate alone
    (LeakMin(bytes_per_hour=8 * GIB), 80 * GIB, 8 * GIB),
    (LeakMin(device_share_per_hour=0.01), 80 * GIB, 0.01 * 80 * GIB),
    (LeakMin(device_share_per_hour=0.01), None, None),  # no threshold without a device
    (LeakMin(bytes_per_hour=GIB, device_share_per_hour=0.02), 80 * GIB, 0.02 * 80 * GIB),
    (LeakMin(bytes_per_hour=GIB, device_share_per_hour=0.02), 16 * GIB, GIB),
])
def test_the_threshold_on_a_device_is_the_larger_of_those_set(leak_min: LeakMin, device_total_bytes: int | None,
                                                              threshold: float | None) -> None:
    assert leak_min.for_device(device_total_bytes) == threshold
    assert GrowthSettings(leak_min=leak_min).leak_min_for(device_total_bytes) == threshold


@pytest.mark.parametrize("fields", [{}, {"bytes_per_hour": 0.0}, {"bytes_per_hour": float("inf")},
                                    {"device_share_per_hour": 0.0}, {"device_share_per_hour": 1.5}])
def test_a_leak_min_is_checked(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LeakMin(**fields)


@pytest.mark.parametrize(("leak_min", "leak", "threshold"), [
    (DEFAULT_LEAK_MIN, True, 0.005 * 80 * GIB),
    (parse_leak_min("1%/h"), True, 0.01 * 80 * GIB),
    (parse_leak_min("3%/h"), False, 0.03 * 80 * GIB),  # 2.4 GiB/h: above the 2 GiB/h leak
    (parse_leak_min("3GiB/h"), False, 3 * GIB),
    (parse_leak_min("1GiB/h,3%/h"), False, 0.03 * 80 * GIB),
])
def test_rank_growth_applies_the_leak_min_and_records_it(leak_min: LeakMin, leak: bool, threshold: float) -> None:
    (growth,) = rank_growth(rank_frame(Memory(leak_bytes_per_hour=2 * GIB)), [0],
                            settings=GrowthSettings(leak_min=leak_min))
    assert growth.device_total_bytes == 80 * GIB
    assert growth.leak is leak and growth.leak_min_bytes_per_hour == pytest.approx(threshold)
