"""The leak threshold (``--leak-min``): :class:`LeakMin` and its parser :func:`parse_leak_min`.

A rank's growth is a leak only when it reaches the threshold on the rank's device
(:mod:`stormwatch.growth.rank_growth`). The threshold is a rate in bytes per hour, a share of the
device's total per hour, or both (then the larger of the two on each device). The default sets both:
256 MiB/h and 0.5 %/h, so a small device needs 256 MiB/h and an 80 GiB one 409.6 MiB/h.

Accepted text (spaces around the parts and the units' case do not matter):

- ``512MiB/h``, ``1.5GiB/h`` (binary units: B, KiB, MiB, GiB, TiB), ``268435456/h`` (bytes);
- ``0.8%/h``: of the rank's device total;
- ``1GiB/h,1%/h``: both, the larger applies;
- ``default``: 256 MiB/h and 0.5 %/h.

Decimal units (``GB``) are refused rather than guessed: a GB is not a GiB.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_UNITS_BYTES = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_UNIT_NAMES = {1 << 10: "KiB", 1 << 20: "MiB", 1 << 30: "GiB", 1 << 40: "TiB"}
_PART = re.compile(r"^(?P<number>[+-]?[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(?P<unit>[a-z%]*)\s*/\s*(?P<per>[a-z]*)$",
                   re.IGNORECASE)
DEFAULT_TEXT = "default"
ACCEPTED_FORMS = ("512MiB/h, 1.5GiB/h, 268435456/h (bytes), 0.8%/h (of the rank's device), 1GiB/h,1%/h "
                  "(the larger) or default (the larger of 256MiB/h and 0.5%/h)")


@dataclass(frozen=True, slots=True)
class LeakMin:
    """The growth a leak must reach: ``bytes_per_hour`` (bytes per hour), ``device_share_per_hour``
    (a share of the device's total per hour, 0.005 for 0.5 %/h), or both: on a device, the larger.

    Invariants: at least one is set; each set one is finite and positive; the share is at most 1.
    """

    bytes_per_hour: float | None = None
    device_share_per_hour: float | None = None

    def __post_init__(self) -> None:
        if self.bytes_per_hour is None and self.device_share_per_hour is None:
            raise ValueError("a leak-min sets a rate in bytes per hour, a share of the device per hour, or both")
        if self.bytes_per_hour is not None and not (math.isfinite(self.bytes_per_hour) and self.bytes_per_hour > 0):
            raise ValueError(f"leak-min bytes_per_hour {self.bytes_per_hour} is not a positive number")
        share = self.device_share_per_hour
        if share is not None and not (math.isfinite(share) and 0 < share <= 1):
            raise ValueError(f"leak-min device_share_per_hour {share} is outside (0, 1]")

    def for_device(self, device_total_bytes: int | None) -> float | None:
        """The threshold (bytes per hour) on a device of ``device_total_bytes``: the larger of those set.
        An unknown total (None) leaves the rate alone; None when only a share is set and the total is
        unknown (no threshold: such a rank gets no growth figure anyway)."""
        shares = [] if self.device_share_per_hour is None or device_total_bytes is None else [
            self.device_share_per_hour * device_total_bytes]
        rates = [*([] if self.bytes_per_hour is None else [self.bytes_per_hour]), *shares]
        return float(max(rates)) if rates else None

    @property
    def is_default(self) -> bool:
        return self == DEFAULT_LEAK_MIN

    @property
    def text(self) -> str:
        """The canonical form, which :func:`parse_leak_min` reads back to this value: ``default``,
        else the rate in the largest binary unit it reaches and/or the share in percent."""
        if self.is_default:
            return DEFAULT_TEXT
        parts = []
        if self.bytes_per_hour is not None:
            parts.append(_rate_text(self.bytes_per_hour))
        if self.device_share_per_hour is not None:
            parts.append(f"{_number_text(self.device_share_per_hour * 100, digits=12)}%/h")
        return ",".join(parts)


#: The default leak threshold: the larger of this ...
LEAK_MIN_FLOOR_BYTES_PER_HOUR = float(256 << 20)
#: ... and this share of the device's total per hour.
LEAK_MIN_DEVICE_SHARE_PER_HOUR = 0.005
DEFAULT_LEAK_MIN = LeakMin(bytes_per_hour=LEAK_MIN_FLOOR_BYTES_PER_HOUR,
                           device_share_per_hour=LEAK_MIN_DEVICE_SHARE_PER_HOUR)


def _number_text(value: float, *, digits: int | None = None) -> str:
    """The shortest text of ``value`` (``digits`` significant digits at most when given), no ``.0``."""
    text = repr(value) if digits is None else f"{value:.{digits}g}"
    return text.removesuffix(".0")


def _rate_text(bytes_per_hour: float) -> str:
    """In the largest binary unit the rate reaches (exact: units are powers of two), else in bytes."""
    unit = max((size for size in _UNIT_NAMES if bytes_per_hour >= size), default=1)
    return f"{_number_text(bytes_per_hour / unit)}{_UNIT_NAMES.get(unit, '')}/h"


def _refused(text: str, problem: str) -> ValueError:
    return ValueError(f"--leak-min {text!r} {problem}: use {ACCEPTED_FORMS}")


def parse_leak_min(text: str) -> LeakMin:
    """``text`` as a :class:`LeakMin` (forms in the module docstring); ValueError, one line naming
    the value and what is wrong with it and showing the accepted forms."""
    cleaned = text.strip()
    if cleaned.lower() == DEFAULT_TEXT:
        return DEFAULT_LEAK_MIN
    if not cleaned:
        raise _refused(text, "is empty")
    rate: float | None = None
    share: float | None = None
    for part in cleaned.split(","):
        match = _PART.match(part.strip())
        if match is None:
            raise _refused(text, "is not a number with a unit per hour")
        if match["per"].lower() != "h":
            raise _refused(text, f"is per {match['per'] or 'nothing'!r}, not per hour (/h)")
        number, unit = float(match["number"]), match["unit"].lower()
        if unit == "%":
            if share is not None:
                raise _refused(text, "gives two shares")
            if not 0 < number <= 100:
                raise _refused(text, "is a share outside (0, 100] %")
            share = number / 100
            continue
        if unit not in _UNITS_BYTES:
            raise _refused(text, f"has unknown unit {match['unit']!r} (binary units: B, KiB, MiB, GiB, TiB)")
        if rate is not None:
            raise _refused(text, "gives two rates")
        rate = number * _UNITS_BYTES[unit]
        if not (math.isfinite(rate) and rate > 0):
            raise _refused(text, "is not a positive rate")
    return LeakMin(bytes_per_hour=rate, device_share_per_hour=share)
