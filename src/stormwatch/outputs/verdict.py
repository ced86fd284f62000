"""A diagnosed job's verdict and the command line's exit codes, each defined once.

The verdict is the worst first-cause severity (missing ranks count as a warning),
``empty`` when nothing could be loaded; its exit code applies the caller's
``--fail-on``. :class:`ExitCode` holds every documented exit code (README, "Exit codes").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.formats.oom_dump import OomDump
from stormwatch.severity import FailOn, Severity


class ExitCode(IntEnum):
    """Exit codes (stable): 0 clean, 3 findings at or above ``--fail-on``, 2 usage,
    5 nothing loadable, 1 other error."""

    CLEAN = 0
    ERROR = 1
    USAGE = 2
    FINDINGS = 3
    NOTHING_LOADABLE = 5


class VerdictStatus(StrEnum):
    """A job's verdict; ordered ``empty < clean < info < warning < critical`` by :attr:`rank`.
    Definition order is the order of fleet.json's summary counts."""

    CLEAN = "clean"
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"
    EMPTY = "empty"  # nothing loadable

    @property
    def rank(self) -> int:
        """How bad: 0 for ``empty`` up to 4 for ``critical`` (the fleet index sorts by it)."""
        return _RANKS[self]

    @property
    def severity(self) -> Severity | None:
        """The severity this verdict stands for; None for ``clean`` and ``empty``."""
        return None if self in (VerdictStatus.CLEAN, VerdictStatus.EMPTY) else Severity(self.value)

    @classmethod
    def of(cls, severity: Severity | None) -> VerdictStatus:
        """The verdict of a job whose worst finding is ``severity`` (None: clean)."""
        return cls.CLEAN if severity is None else cls(severity.value)

    @classmethod
    def worst(cls, statuses: Iterable[VerdictStatus]) -> VerdictStatus | None:
        """The highest-ranked of ``statuses``; None when there are none."""
        return max(statuses, key=lambda status: status.rank, default=None)


_RANKS = {VerdictStatus.EMPTY: 0, VerdictStatus.CLEAN: 1, VerdictStatus.INFO: 2, VerdictStatus.WARNING: 3,
          VerdictStatus.CRITICAL: 4}


@dataclass(frozen=True)
class Verdict:
    status: VerdictStatus
    exit_code: ExitCode
    summary: str

    @property
    def severity(self) -> Severity | None:
        return self.status.severity


def decide_verdict(model: DiagnosticsModel, *, events: int, fail_on: FailOn = FailOn.NEVER,
                   oom_dumps: Sequence[OomDump] = ()) -> Verdict:
    """Worst first-cause severity, raised to warning when ranks are missing; the summary ends with what
    the job's OOM flight-recorder dumps say (``out of memory on rank 3: tried to allocate ...``)."""
    if events == 0:
        return Verdict(VerdictStatus.EMPTY, ExitCode.NOTHING_LOADABLE, "No telemetry events could be loaded.")
    worst = max((Severity(item.severity) for item in model.indicators), key=lambda s: s.level, default=None)
    if model.missing_ranks and (worst is None or worst.level < Severity.WARNING.level):
        worst = Severity.WARNING
    status = VerdictStatus.of(worst)
    parts = []
    if model.indicators:
        first = model.indicators[-1]
        parts.append(f"most severe: {first.signal} on rank {first.rank} ({first.severity})")
    if model.missing_ranks:
        parts.append(f"missing ranks {format_ranks(model.missing_ranks)}")
    parts += list(dict.fromkeys(dump.sentence() for dump in oom_dumps))
    present = len(model.present_ranks)
    summary = f"{status.value}: {present}/{len(model.expected_ranks)} ranks present" + (
        "; " + "; ".join(parts) if parts else "; no anomalies"
    )
    return Verdict(status, exit_code_for_severity(worst, fail_on), summary)


def exit_code_for_severity(severity: Severity | None, fail_on: FailOn) -> ExitCode:
    """``findings`` when ``severity`` reaches ``fail_on``, else ``clean``."""
    return ExitCode.FINDINGS if fail_on.reached_by(severity) else ExitCode.CLEAN


def exit_code_for(status: VerdictStatus | str, fail_on: FailOn) -> ExitCode:
    """The exit code a stored verdict status gives under ``fail_on`` (a skipped job's, say)."""
    if status == VerdictStatus.EMPTY:
        return ExitCode.NOTHING_LOADABLE
    severity = None if status == VerdictStatus.CLEAN else Severity(status)
    return exit_code_for_severity(severity, fail_on)
