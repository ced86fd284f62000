"""Job names: what recurring runs of one training job share, taken from their job ids.

A job name groups runs for regression baselines (``llama-8r-0142``, ``llama-8r-0143`` are runs of
``llama-8r``). It is group 1 of a regular expression matched against the whole job id
(``--job-name-pattern``); a job id the pattern does not match, or whose group 1 is empty, is its
own name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A trailing run number (``-0142``, ``_7``, ``.3``) or date (``-2026-11-30``, ``-20261130``,
#: optionally with a time ``T020000Z``) is stripped: ``llama-8r-0142`` → ``llama-8r``,
#: ``train-a-2026-11-30`` → ``train-a``.
DEFAULT_JOB_NAME_REGEX = (
    r"(.+?)(?:[-_.](?:\d{4}-\d{2}-\d{2}(?:[T_-]?\d{2}[:-]?\d{2}(?:[:-]?\d{2})?Z?)?|\d{8}(?:T\d{4,6}Z?)?|\d+))"
)


class JobNamePatternError(ValueError):
    """A ``--job-name-pattern`` that does not compile or has no capturing group (a usage error)."""


@dataclass(frozen=True)
class JobNamePattern:
    """``regex`` must compile and hold at least one capturing group; group 1 is the job name.

    The whole job id must match (``re.fullmatch``).
    """

    regex: str = DEFAULT_JOB_NAME_REGEX
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            compiled = re.compile(self.regex)
        except re.error as error:
            raise JobNamePatternError(f"--job-name-pattern {self.regex!r} does not compile: {error}") from error
        if compiled.groups < 1:
            raise JobNamePatternError(f"--job-name-pattern {self.regex!r} has no group: group 1 is the job name")
        object.__setattr__(self, "_compiled", compiled)

    def name_of(self, job_id: str) -> str:
        """Group 1 of the match; ``job_id`` itself when nothing matches or group 1 is empty."""
        found = self._compiled.fullmatch(job_id)
        name = found.group(1) if found is not None else None
        return name or job_id
