"""Severity of a finding, and the thresholds a caller can fail or notify on."""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    """How bad a finding is; ordered ``info < warning < critical`` by :attr:`level`."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def level(self) -> int:
        return _LEVELS[self]


_LEVELS = {Severity.INFO: 1, Severity.WARNING: 2, Severity.CRITICAL: 3}


class FailOn(StrEnum):
    """The least severity that counts as a failure (``never``: nothing does)."""

    NEVER = "never"
    WARNING = "warning"
    CRITICAL = "critical"

    def reached_by(self, severity: Severity | None) -> bool:
        if self is FailOn.NEVER or severity is None:
            return False
        return severity.level >= Severity(self.value).level
