"""The cause of a fleet.json row's verdict, in plain words: which of its first causes made the
verdict, its signal's title and meaning (:mod:`stormwatch.signals`), where and when it happened.

A row carries two first causes (``earliest``, ``most_severe``). The one shown as the reason is an
out-of-memory error when either is one, else the earliest when it is as severe as the most severe,
else the most severe: a CRITICAL job never leads with a warning. The other, when it differs, is
shown after it, plainly. Causes written before fleet.json placed them (``host``, ``device_id``,
``since_start_ns``, ``oom``, ``oom_dump``; see :mod:`stormwatch.outputs.fleet_causes`) read with
less detail: no host, device or time into the job. Every string is telemetry: plain text here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stormwatch.analysis.model import IndicatorKind
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.reports.fields import as_int
from stormwatch.reports.formatting import NS_PER_S, format_confidence, format_elapsed_s, format_utc_ns
from stormwatch.severity import Severity
from stormwatch.signals import SignalText, describe

SEVERITY_LEVELS = {severity.value: severity.level for severity in Severity}
_OOM_PREFIX = "out of memory"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def device_text(device_id: int | None) -> str | None:
    """``GPU 3``; ``CPU`` for a negative device id (a CPU-only rank); None when unknown."""
    if device_id is None:
        return None
    return "CPU" if device_id < 0 else f"GPU {device_id}"


@dataclass(frozen=True)
class Cause:
    """One first cause of a row. ``since_start_ns``: ns into the run (None: not known);
    ``timestamp_ns``: ns since the epoch; ``dump``: what the OOM dump adds (``tried to allocate ...``)."""

    kind: IndicatorKind
    signal: SignalText
    severity: str
    rank: int | None
    host: str | None
    device_id: int | None
    since_start_ns: int | None
    timestamp_ns: int | None
    phase_path: str | None
    confidence: float | None
    oom: bool
    dump: str | None

    @property
    def level(self) -> int:
        return SEVERITY_LEVELS.get(self.severity, 0)

    @property
    def where(self) -> str:
        """``on rank 3 (gpu-node-01, GPU 3)``; ``on rank 3`` when its place is not known."""
        place = ", ".join(part for part in (self.host, device_text(self.device_id)) if part)
        rank = "" if self.rank is None else f"on rank {self.rank}"
        return f"{rank} ({place})" if rank and place else rank or (f"on {place}" if place else "")

    @property
    def when(self) -> str:
        """``20.0 s into the job``; the UTC time when the run's start is not known; "" when neither is."""
        if self.since_start_ns is not None and self.since_start_ns >= 0:
            return f"{format_elapsed_s(self.since_start_ns / NS_PER_S)} into the job"
        return "" if self.timestamp_ns is None else f"at {format_utc_ns(self.timestamp_ns)}"

    @property
    def phase(self) -> str:
        return "" if not self.phase_path else f"in {self.phase_path}"

    def tail(self) -> str:
        """What follows the signal's title in a sentence: ``on rank 3 (gpu-node-01, GPU 3), 20.0 s
        into the job, in train / backward``."""
        return ", ".join(part for part in (self.where, self.when, self.phase) if part)

    def detail(self) -> str:
        """The table's second line: ``20.0 s into the job · in train / backward · confidence 51 %``, and
        what an OOM's dump says (``tried to allocate 2.0 GiB ...``)."""
        confidence = "" if self.confidence is None else f"confidence {format_confidence(self.confidence)}"
        return " · ".join(part for part in (self.when, self.phase, confidence, self.dump or "") if part)

    def same_as(self, other: Cause) -> bool:
        return (self.signal.code, self.rank, self.timestamp_ns, self.oom) == (
            other.signal.code, other.rank, other.timestamp_ns, other.oom)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _dump(value: Any) -> str | None:
    """What an OOM dump's sentence adds after ``out of memory on rank N:``; None when nothing."""
    text = _text(value)
    if text is None:
        return None
    head, _, rest = text.partition(": ")
    return (rest or None) if head.startswith(_OOM_PREFIX) else text


def cause(item: Any, kind: IndicatorKind) -> Cause | None:
    """A cause dict of a fleet.json row read defensively; None when it is no cause at all."""
    if not isinstance(item, Mapping):
        return None
    code = item.get("signal")
    code = code if isinstance(code, str) else "" if code is None else str(code)
    oom = item.get("oom") is True
    severity = item.get("severity")
    return Cause(
        kind=kind, signal=describe(code or "unknown", oom=oom),
        severity=severity if isinstance(severity, str) and severity in SEVERITY_LEVELS else "other",
        rank=as_int(item.get("rank")), host=_text(item.get("host")), device_id=as_int(item.get("device_id")),
        since_start_ns=as_int(item.get("since_start_ns")), timestamp_ns=as_int(item.get("timestamp_ns")),
        phase_path=_text(item.get("phase_path")), confidence=_number(item.get("confidence")), oom=oom,
        dump=_dump(item.get("oom_dump")) if oom else None,
    )


def verdict_causes(job: Mapping[str, Any]) -> tuple[Cause | None, Cause | None]:
    """(the cause that made the row's verdict, the other first cause when it differs); see the
    module docstring for which is which."""
    first, worst = job.get(IndicatorKind.EARLIEST.value), job.get(IndicatorKind.MOST_SEVERE.value)
    earliest = cause(first, IndicatorKind.EARLIEST)
    if earliest is not None and first == worst:  # one cause, both first causes (the usual case): read it once
        return earliest, None
    most_severe = cause(worst, IndicatorKind.MOST_SEVERE)
    if earliest is None or most_severe is None:
        return earliest or most_severe, None
    if most_severe.oom and not earliest.oom:
        shown, other = most_severe, earliest
    elif earliest.oom or earliest.level >= most_severe.level:
        shown, other = earliest, most_severe
    else:
        shown, other = most_severe, earliest
    return shown, None if other.same_as(shown) else other


def other_label(item: Cause) -> str:
    """How the table introduces the cause not shown as the reason: ``first sign`` (the earliest) or
    ``most severe``."""
    return "first sign" if item.kind is IndicatorKind.EARLIEST else "most severe"


def missing_text(missing: Sequence[int], expected: int | None) -> str:
    """``1 of 4 ranks wrote no telemetry (rank 2)``; "" when no rank is missing."""
    if not missing:
        return ""
    of = f" of {expected}" if expected else ""
    plural = "s" if len(missing) > 1 else ""
    return f"{len(missing)}{of} ranks wrote no telemetry (rank{plural} {format_ranks(missing)})"
