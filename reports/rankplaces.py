"""Where each rank ran and how much memory its device had: the job page's host, device and capacity.

From the detailed attempt's fleet facts (model.json's ``fleet.ranks``,
:class:`~stormwatch.peers.rank_facts.RankFacts`); a document without them gives no places and the
page shows dashes. Memory is in bytes.

A rank whose ``device_id`` is negative (``-1``) ran on stormlog's CPU tracker (:attr:`DeviceKind.CPU`): it has
no device, so no device capacity, no allocator pool and no hidden gap, and the page says "CPU"
rather than drawing axes that mean nothing there. Any other device id is a GPU, whose capacity may
still be unknown (a tracker that did not record ``device_total_bytes``). The fleet index reads device
ids the same way (``GPU 3``, ``CPU``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from stormwatch.outputs.document import JobDocument
from stormwatch.reports.formatting import NOT_AVAILABLE


class DeviceKind(StrEnum):
    """What a rank's memory lived on (a CSS class too)."""

    GPU = "gpu"
    CPU = "cpu"
    UNKNOWN = "unknown"  # no fleet facts for the rank


@dataclass(frozen=True)
class RankPlace:
    """One rank's host and device; ``capacity_bytes``: its device's total memory (None: unknown, or a
    CPU rank); ``peak_used_bytes``: the most device memory it used (else its peak reserved)."""

    rank: int
    host: str | None
    device_id: int | None
    capacity_bytes: int | None
    peak_used_bytes: int | None
    peak_reserved_bytes: int | None

    @property
    def kind(self) -> DeviceKind:
        if self.device_id is not None and self.device_id < 0:
            return DeviceKind.CPU
        return DeviceKind.UNKNOWN if self.device_id is None else DeviceKind.GPU

    @property
    def device_label(self) -> str:
        """``GPU 3``, ``CPU`` or ``—``."""
        if self.kind is DeviceKind.CPU:
            return "CPU"
        return NOT_AVAILABLE if self.device_id is None else f"GPU {self.device_id}"

    @property
    def host_label(self) -> str:
        return self.host or NOT_AVAILABLE

    def where(self) -> str:
        """``gpu-node-01, GPU 3``; ``GPU 3`` without a host; "" when neither is known."""
        parts = [part for part in (self.host, None if self.device_id is None else self.device_label) if part]
        return ", ".join(parts)


def rank_places(document: JobDocument) -> dict[int, RankPlace]:
    """Every rank the document's fleet facts list, by rank (the first entry of a rank listed twice)."""
    fleet = document.fleet
    places: dict[int, RankPlace] = {}
    for fact in () if fleet is None else fleet.facts.ranks:
        peak = fact.peak_device_used_bytes if fact.peak_device_used_bytes is not None else fact.peak_reserved_bytes
        places.setdefault(fact.rank, RankPlace(
            rank=fact.rank, host=fact.host, device_id=fact.device_id,
            capacity_bytes=None if fact.device_id is not None and fact.device_id < 0 else fact.device_total_bytes,
            peak_used_bytes=peak, peak_reserved_bytes=fact.peak_reserved_bytes))
    return places
