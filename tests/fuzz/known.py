"""Known, not yet fixed fuzzer findings: none today (every finding so far is fixed).

A finding whose fix cannot land at once gets an entry here, naming the reproducer
in tests/stormwatch/test_fuzz_regressions.py (marked ``xfail(strict=True)`` until
the fix). The CI fuzz run and the property tests pass over entries (and fail on
anything else); ``bench/fuzz.py`` reports them apart from new failures.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.harness import Failure, Outcome

_REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Known:
    """Failures of ``kind`` whose innermost engine frame starts with ``where`` and whose
    detail holds ``detail`` (``trace`` for a dead worker's stack); optionally only on
    targets ending with ``target`` or mutation notes holding ``note``."""

    test: str
    kind: str
    where: str = ""
    detail: str = ""
    trace: str = ""
    target: str = ""
    note: str = ""

    def matches(self, outcome: Outcome, failure: Failure) -> bool:
        return (failure.kind == self.kind and failure.where.startswith(self.where) and self.detail in failure.detail
                and self.trace in failure.trace and outcome.case.target.endswith(self.target)
                and self.note in outcome.note)


_REGRESSIONS = "tests/stormwatch/test_fuzz_regressions.py::"
KNOWN: tuple[Known, ...] = ()  # every finding so far is fixed; add new ones with their reproducer


def known_issue(outcome: Outcome, failure: Failure) -> Known | None:
    return next((known for known in KNOWN if known.matches(outcome, failure)), None)


def new_failures(outcome: Outcome) -> list[Failure]:
    return [failure for failure in outcome.failures if known_issue(outcome, failure) is None]


def known_exception(exc: BaseException) -> Known | None:
    """The known crash an exception raised by the loader is, if any (for the property tests)."""
    # resolved: a strict editable install runs the repo's files through links under build/
    frames = [(f, Path(f.filename).resolve()) for f in traceback.extract_tb(exc.__traceback__)]
    frames = [(f, path) for f, path in frames if path.is_relative_to(_REPO / "src" / "stormwatch")]
    if not frames:
        return None
    frame, path = frames[-1]
    where = f"{path.relative_to(_REPO)}:{frame.name}"
    text = f"{type(exc).__name__}: {exc}"
    return next((k for k in KNOWN if k.kind == "crash" and where.startswith(k.where) and k.detail in text), None)
