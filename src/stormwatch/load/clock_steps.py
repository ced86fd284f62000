"""Sample clocks that step back in file order, found while a file's order still exists.

The loader sorts each session's events stably by time (:func:`stormwatch.events.merge.sort_events`)
and keeps no arrival order, so a rank whose clock stepped back (an NTP step, a VM migration, a
host whose clock was set by hand) would show in the loaded frame only as samples that overlap in
time: nothing downstream could tell it from a clean run, and a growth slope over it is no figure
(:class:`~stormwatch.growth.figures.GrowthGap` ``CLOCK_BACKWARDS``). So each file is scanned once,
right after it is parsed: per (session, rank), the *sample* events' timestamps in file order (the
model's rule for a sample: ``event_type`` stripped and lower-cased is ``"sample"``) must never
decrease by more than :data:`CLOCK_STEP_TOLERANCE_S`. Within that tolerance a decrease is a writer's
threads reordering records around a flush, not a clock step.

Cost: one stable sort of the sample rows by (session, rank) when a file holds more than one of
them (none for the usual one-rank file), then one numpy diff; Python runs per step found, never per
event. Where the step is: :class:`ClockStepBack` names the file and the 1-based line of a JSONL or
CSV file (found again in the file's bytes only when a step was found), else the 1-based record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd

from stormwatch.analysis.columns import Coded
from stormwatch.formats.csv_table import record_lines
from stormwatch.formats.lines import Buffer, index_lines

NS_PER_S = 1_000_000_000
#: A sample earlier than the one before it by more than this (seconds) is a clock step back.
CLOCK_STEP_TOLERANCE_S = 1.0


class StepPlace(StrEnum):
    """What :attr:`ClockStepBack.number` counts."""

    LINE = "line"      # the file's 1-based line (JSONL, CSV: as its bad-line warnings count them)
    RECORD = "record"  # the 1-based record among those read from the file (JSON, a bundle's timeline)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClockStepBack:
    """The first sample of ``rank`` in ``source`` (a file's identity) that is earlier than the sample
    before it (of its session and rank, in file order) by ``back_s`` seconds, more than
    :data:`CLOCK_STEP_TOLERANCE_S`; at ``place`` ``number`` of the file."""

    source: str
    rank: int
    place: StepPlace
    number: int
    back_s: float

    def warning(self) -> str:
        """The load warning, naming the file and the line (or record) as bad-line warnings do."""
        where = f"{self.source}:{self.number}" if self.place is StepPlace.LINE else \
            f"{self.source}: record {self.number}"
        return (f"{where}: rank {self.rank}'s clock steps back {self.back_s:.1f} s (a sample earlier than "
                f"the one before it); rank {self.rank} gets no growth figure")


@dataclass(frozen=True, kw_only=True, slots=True)
class StepFound:
    """A step back in one parsed file: ``row`` is the sample's 0-based row in the file's frame."""

    session_id: str
    rank: int
    row: int
    back_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleSpan:
    """A (session, rank)'s samples in one file: its first sample's row, first and last stamp (ns)."""

    first_row: int
    first_ns: int
    last_ns: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ClockScan:
    """A file's first step back per (session, rank), in file order, and every (session, rank)'s span."""

    steps: tuple[StepFound, ...]
    spans: dict[tuple[str, int], SampleSpan]


def scan_clock(frame: pd.DataFrame, *, tolerance_s: float = CLOCK_STEP_TOLERANCE_S) -> ClockScan:
    """The steps back in ``frame`` (a parsed file's events, in file order; see the module docstring)."""
    if frame.empty:
        return ClockScan(steps=(), spans={})
    rows = np.flatnonzero(Coded.of(frame["event_type"]).where(lambda kind: kind.strip().lower() == "sample"))
    if not rows.size:
        return ClockScan(steps=(), spans={})
    sessions = Coded.of(frame["session_id"])
    codes = sessions.codes[rows]
    ranks = frame["rank"].to_numpy(dtype=np.int64)[rows]
    if codes.min() != codes.max() or ranks.min() != ranks.max():
        order = np.lexsort((ranks, codes))  # stable: file order within a (session, rank)
        rows, codes, ranks = rows[order], codes[order], ranks[order]
    stamps = frame["timestamp_ns"].to_numpy(dtype=np.int64)[rows]
    starts = np.flatnonzero(np.r_[True, (codes[1:] != codes[:-1]) | (ranks[1:] != ranks[:-1])])
    ends = np.r_[starts[1:], len(rows)] - 1
    back = np.r_[0, stamps[:-1] - stamps[1:]]  # how far each sample is before the one before it
    back[starts] = 0
    stepped = np.flatnonzero(back > tolerance_s * NS_PER_S)
    if stepped.size:  # the first step of each (session, rank): groups are ascending runs of rows
        group = np.searchsorted(starts, stepped, side="right") - 1
        stepped = stepped[np.r_[True, group[1:] != group[:-1]]]
    steps = sorted((StepFound(session_id=str(sessions.values[codes[at]]), rank=int(ranks[at]), row=int(rows[at]),
                              back_s=float(back[at]) / NS_PER_S) for at in stepped.tolist()),
                   key=lambda step: step.row)
    spans = {(str(sessions.values[codes[first]]), int(ranks[first])):
             SampleSpan(first_row=int(rows[first]), first_ns=int(stamps[first]), last_ns=int(stamps[last]))
             for first, last in zip(starts.tolist(), ends.tolist(), strict=True)}
    return ClockScan(steps=tuple(steps), spans=spans)


def jsonl_lines(data: Buffer, rows: Sequence[int], *, records: int, torn: bool) -> list[int] | None:
    """The 1-based lines of a JSONL file's records ``rows`` (0-based, among its ``records`` read),
    when every non-blank line was read as one record (``torn``: but the last, cut short); else None
    (a skipped line would shift them)."""
    lines = index_lines(data)
    if lines.count != records + int(torn):
        return None
    return [int(number) for number in lines.numbers[np.asarray(rows, dtype=np.int64)]]


def csv_lines(data: bytes, rows: Sequence[int], *, records: int) -> list[int] | None:
    """The lines (as ``csv.DictReader`` counts them) of a CSV file's records ``rows``, when every
    record was read; else None."""
    lines = record_lines(data)
    if lines is None or len(lines) != records:
        return None
    return [lines[row] for row in rows]


def placed(steps: Sequence[StepFound], *, source: str, lines: Sequence[int] | None) -> tuple[ClockStepBack, ...]:
    """``steps`` of the file ``source`` named by line (``lines``: each step's line) or, without
    ``lines``, by 1-based record."""
    return tuple(ClockStepBack(
        source=source, rank=step.rank, place=StepPlace.RECORD if lines is None else StepPlace.LINE,
        number=step.row + 1 if lines is None else lines[index], back_s=step.back_s)
        for index, step in enumerate(steps))


def across_files(
    scan: ClockScan, last_ns: dict[tuple[str, int], int], reported: set[tuple[str, int]], *,
    tolerance_s: float = CLOCK_STEP_TOLERANCE_S,
) -> tuple[StepFound, ...]:
    """The steps of one file of several written in turn (a sink's segments, in order): where a
    (session, rank)'s first sample here is before its last one in the files before (``last_ns``,
    updated), or ``scan``'s own steps; only the first per (session, rank) (``reported``, updated)."""
    out = []
    for key, span in scan.spans.items():
        before = last_ns.get(key)
        if before is not None and key not in reported and before - span.first_ns > tolerance_s * NS_PER_S:
            out.append(StepFound(session_id=key[0], rank=key[1], row=span.first_row,
                                 back_s=(before - span.first_ns) / NS_PER_S))
            reported.add(key)
        last_ns[key] = span.last_ns
    for step in scan.steps:
        key = (step.session_id, step.rank)
        if key not in reported:
            out.append(step)
            reported.add(key)
    return tuple(sorted(out, key=lambda step: step.row))
