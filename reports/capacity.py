"""A rank's device capacity on its memory chart: where the capacity line goes and what the headroom
label says.

**The y-range.** A chart that always ran up to the capacity would flatten most ranks into a line
(22 GiB used of 80 GiB: the data in a quarter of the panel, its shape lost); one that never did would
hide how close a rank came to the limit. So the memory panel runs up to the capacity only when the
data then still fills at least :data:`MIN_FILL` of the panel (a rank near its limit: the line and the
headroom are the story). Otherwise the axis is **broken**: a band of :data:`BREAK_BAND_PX` at the top of
the panel holds the capacity line (labelled with its value) above a break mark on the y axis, and the
data keeps its own range below the band. Either way every GPU chart draws the capacity, and the
headroom label states the numbers exactly, so the break loses nothing.

**The label.** ``peak 77.4 of 80 GiB, 3 % free`` (a ``<text class="headroom">``): the rank's peak of
device memory used (the fleet facts' ``peak_device_used_bytes``, else the peak of what the chart draws)
against the capacity, both in the capacity's unit (a peak under one such unit in its own:
``peak 512 MiB of 80 GiB, 99 % free``); ``< 1 % free`` when under half a percent is left. Without a
capacity there is no line and the label is a note instead (``<text class="capacity-note">``): a CPU
rank reads ``CPU: peak 1.05 GiB (no device memory limit)``, a GPU rank whose capacity was not recorded
``peak 22.8 GiB (device capacity not recorded)``.

Bytes in, pixels (the SVG's viewBox units) out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stormwatch.reports.formatting import byte_unit, format_bytes

#: The share of the panel the data must fill for the axis to run unbroken up to the capacity.
MIN_FILL = 0.4
#: Room above the capacity line on an unbroken axis, as a share of the axis span.
TOP_MARGIN = 0.04
#: Pixels at the top of a broken panel: the capacity line, its label and the break mark.
BREAK_BAND_PX = 22
CAPACITY_LINE_OFFSET_PX = 5  # from the panel's top, on a broken axis
BREAK_MARK_OFFSET_PX = 17


@dataclass(frozen=True)
class MemoryRange:
    """The memory panel's data range (``low``..``high`` bytes) and, on a broken axis, the pixels the
    band takes at its top (0: unbroken)."""

    low: float
    high: float
    band_px: int

    @property
    def broken(self) -> bool:
        return self.band_px > 0


def memory_range(low: float, high: float, *, capacity_bytes: int | None) -> MemoryRange:
    """The range of a memory panel whose data spans ``low``..``high`` (already padded) and whose device
    holds ``capacity_bytes`` (None: no line, the data's range as it is)."""
    if capacity_bytes is None or capacity_bytes <= 0 or not (math.isfinite(low) and math.isfinite(high)):
        return MemoryRange(low, high, 0)
    if high >= capacity_bytes:  # at or over the limit: the line sits inside the data's range
        return MemoryRange(low, max(high, capacity_bytes * (1 + TOP_MARGIN)), 0)
    span_to_capacity = capacity_bytes - low
    if span_to_capacity > 0 and (high - low) / span_to_capacity >= MIN_FILL:
        return MemoryRange(low, capacity_bytes + span_to_capacity * TOP_MARGIN, 0)
    return MemoryRange(low, high, BREAK_BAND_PX)


def _number(value: float) -> str:
    """``80``, ``79.6``, ``77.4``: at most one decimal, none when it is 0."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def headroom_label(peak_bytes: float | None, capacity_bytes: int | None, *, cpu: bool) -> str:
    """What the chart's headroom label says (see the module docstring)."""
    peak = format_bytes(peak_bytes) if peak_bytes is not None else None
    if cpu:
        return f"CPU: peak {peak} (no device memory limit)" if peak else "CPU (no device memory limit)"
    if capacity_bytes is None or capacity_bytes <= 0:
        return f"peak {peak} (device capacity not recorded)" if peak else "device capacity not recorded"
    unit, size = byte_unit(capacity_bytes)
    if peak_bytes is None:
        return f"capacity {_number(capacity_bytes / size)} {unit}"
    free = max(capacity_bytes - peak_bytes, 0) / capacity_bytes * 100  # a device never holds more than its total
    room = "< 1 % free" if 0 < free < 0.5 else f"{free:.0f} % free"
    # the peak in the capacity's unit (``77.4 of 80 GiB``), or in its own when it is under one of those
    shown = _number(peak_bytes / size) if peak_bytes >= size else format_bytes(peak_bytes)
    return f"peak {shown} of {_number(capacity_bytes / size)} {unit}, {room}"


def capacity_text(capacity_bytes: int) -> str:
    """The capacity line's own label: ``capacity 80 GiB``."""
    unit, size = byte_unit(capacity_bytes)
    return f"capacity {_number(capacity_bytes / size)} {unit}"
