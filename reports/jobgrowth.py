"""The job page's "Growth and headroom" part (issue 30): per rank, how fast allocated and reserved memory
grew after warm-up, how sure that is, whether it is a leak, when at that rate the rank would run out of
its device, and how much of the device it used; for the job, its headroom (the fullest rank's used
percent, and the device memory left unused in GiB·hours).

From model.json's ``fleet`` member: ``fleet.growth`` (one :class:`~stormwatch.growth.figures.RankGrowth`
per present rank; absent in documents written before growth was measured: the part is then not
shown) and ``fleet.ranks`` (peak device used and device total per rank, for the used percent). A rank
without a growth figure shows why (:attr:`~stormwatch.growth.figures.GrowthGap.reason`), never a guess.

Units: slopes are bytes per hour, shown in GiB/h (MiB/h under 1 GiB/h); used percent is peak device
use / device total × 100 and unused GiB·hours Σ over ranks of (device total − peak use) × the rank's span
(:mod:`stormwatch.growth.headroom`, which says what a rank's peak use is). Host names
are telemetry: plain text here, escaped by the template.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stormwatch.growth.figures import GrowthCounter, RankGrowth
from stormwatch.growth.headroom import job_headroom
from stormwatch.outputs.document import JobDocument
from stormwatch.peers.rank_facts import RankFacts
from stormwatch.reports.capacity import capacity_text
from stormwatch.reports.fleetcause import device_text
from stormwatch.reports.formatting import NOT_AVAILABLE, format_confidence
from stormwatch.reports.signalview import SignalView, signal_view

GIB = 1024**3
MIB = 1024**2
S_PER_HOUR = 3_600
MAX_LEAK_LINES = 3  # leaking ranks named on the first screen; the growth table lists every one
_COUNTER_WORDS = {GrowthCounter.ALLOCATED: "allocated", GrowthCounter.RESERVED: "reserved"}


def format_rate(bytes_per_hour: float | None) -> str:
    """A growth rate: ``1.2 GiB/h``; ``340 MiB/h`` under 1 GiB/h; ``−12 MiB/h`` when it shrinks."""
    if bytes_per_hour is None or not math.isfinite(bytes_per_hour):
        return NOT_AVAILABLE
    sign = "−" if bytes_per_hour < 0 else ""
    size = abs(bytes_per_hour)
    if size >= GIB:
        return f"{sign}{size / GIB:.1f} GiB/h"
    mib = size / MIB
    return f"{sign}{mib:.1f} MiB/h" if mib < 10 else f"{sign}{mib:.0f} MiB/h"


def format_hours(seconds: float | None) -> str:
    """A projection's distance from the start: ``42 min``, ``3.4 h``, ``5.2 days`` (from 48 h)."""
    if seconds is None or not math.isfinite(seconds):
        return NOT_AVAILABLE
    hours = seconds / S_PER_HOUR
    if hours < 1:
        return f"{max(seconds / 60, 0):.0f} min"
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


def format_used_percent(percent: float | None) -> str:
    """``96.8 %``; "—" when unknown."""
    return NOT_AVAILABLE if percent is None else f"{percent:.1f} %"


def format_gib_hours(gib_hours: float | None) -> str:
    """``1,234.5 GiB·h``; "—" when unknown."""
    return NOT_AVAILABLE if gib_hours is None else f"{gib_hours:,.1f} GiB·h"


@dataclass(frozen=True, kw_only=True)
class GrowthRow:
    """One rank of the growth table; ``gap_reason``: why there is no figure ("" when there is one)."""

    rank: int
    place: str  # "gpu-node-01, GPU 3", "" when unknown
    allocated: str
    reserved: str
    judged: str  # "allocated" or "reserved": the counter the leak verdict is judged on
    confidence: str
    leak: bool
    projection: str  # the plain sentence, "" without a figure
    used_percent: str
    gap_reason: str


@dataclass(frozen=True, kw_only=True)
class LeakLine:
    """A leaking rank for the banner: ``{signal} on rank 3 (gpu-node-01, GPU 3): {text}``."""

    rank: int
    place: str
    text: str


@dataclass(frozen=True, kw_only=True)
class JobGrowth:
    """The part's view; ``present``: the document measured growth (else the page leaves the part out)."""

    present: bool
    rows: tuple[GrowthRow, ...] = ()
    leaks: tuple[LeakLine, ...] = ()  # the first MAX_LEAK_LINES leaking ranks
    leak_count: int = 0
    used_percent: str = NOT_AVAILABLE  # the fullest rank's
    unused_gib_hours: str = NOT_AVAILABLE
    signal: SignalView = signal_view("leak")

    @property
    def more_leaks(self) -> int:
        return self.leak_count - len(self.leaks)


def _place(facts: RankFacts | None) -> str:
    if facts is None:
        return ""
    return ", ".join(part for part in (facts.host, device_text(facts.device_id)) if part)


def projection(growth: RankGrowth) -> str:
    """``rank 3 grows 1.2 GiB/h; at this rate it would run out of the 80 GiB device 3.4 h after start``;
    a rank that does not grow says so; "" without a figure."""
    rate = growth.judged_bytes_per_hour
    if growth.gap is not None or rate is None:
        return ""
    if rate <= 0:
        return f"rank {growth.rank} does not grow ({format_rate(rate)})"
    head = f"rank {growth.rank} grows {format_rate(rate)}"
    if growth.capacity_after_start_s is None or growth.device_total_bytes is None:
        return head
    device = capacity_text(growth.device_total_bytes).removeprefix("capacity ")
    return (f"{head}; at this rate it would run out of the {device} device "
            f"{format_hours(growth.capacity_after_start_s)} after start")


def _row(growth: RankGrowth, facts: RankFacts | None, percent: float | None) -> GrowthRow:
    figure = growth.gap is None
    return GrowthRow(
        rank=growth.rank, place=_place(facts),
        allocated=format_rate(growth.allocated_bytes_per_hour) if figure else NOT_AVAILABLE,
        reserved=format_rate(growth.reserved_bytes_per_hour) if figure else NOT_AVAILABLE,
        judged=_COUNTER_WORDS.get(growth.judged_counter, "") if growth.judged_counter is not None else "",
        confidence=format_confidence(growth.confidence) if figure else NOT_AVAILABLE,
        leak=growth.leak, projection=projection(growth),
        used_percent=format_used_percent(percent),
        gap_reason="" if growth.gap is None else growth.gap.reason,
    )


def _leak_text(growth: RankGrowth) -> str:
    sentence = projection(growth)
    return sentence.removeprefix(f"rank {growth.rank} ")  # the line names the rank already


def job_growth(document: JobDocument, *, detailed: JobDocument | None = None) -> JobGrowth:
    """The part for the page of ``document``, detailing ``detailed``'s attempt when given (its facts)."""
    member = document.fleet if detailed is None or detailed.fleet is None else detailed.fleet
    facts = None if member is None else member.facts
    figures = () if facts is None else facts.growth
    if facts is None or not figures:
        return JobGrowth(present=False)
    by_rank = {item.rank: item for item in facts.ranks}
    ordered = sorted(figures, key=lambda item: item.rank)
    leaking = [item for item in ordered if item.leak]
    headroom = job_headroom(facts.ranks, {item.rank: item.duration_ns for item in ordered})
    percents = {rank.rank: rank.used_percent for rank in headroom.ranks}
    return JobGrowth(
        present=True,
        rows=tuple(_row(item, by_rank.get(item.rank), percents.get(item.rank)) for item in ordered),
        leaks=tuple(LeakLine(rank=item.rank, place=_place(by_rank.get(item.rank)), text=_leak_text(item))
                    for item in leaking[:MAX_LEAK_LINES]),
        leak_count=len(leaking),
        used_percent=format_used_percent(headroom.used_percent),
        unused_gib_hours=format_gib_hours(headroom.unused_gib_hours if headroom.ranks_counted else None),
    )
