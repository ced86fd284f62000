"""Kill an audit at an exact storage step: the child process arms a kill point, then runs the CLI.

``python -m tests.faults.killpoints POINT -- stormwatch-args...`` runs ``stormwatch`` in this
process with one kill point armed; the process group (the audit and its engine workers) gets
SIGKILL at the moment named, as a machine losing power would. POINT is
``before|after:<glob>:<n>``: before or after the ``n``-th (1-based) report write whose key matches
``<glob>`` (fnmatch, against the key relative to the reports folder), on local storage and S3 alike.
The parent starts the child in a new session, so the group holds nothing else.

Used by ``tests/faults/test_killed_audits.py`` and ``bench/kill_bench.py``.
"""

from __future__ import annotations

import fnmatch
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from stormwatch.tasks.storage.local import LocalStorage
from stormwatch.tasks.storage.s3 import S3Storage


class When(StrEnum):
    BEFORE = "before"
    AFTER = "after"


@dataclass(frozen=True)
class KillPoint:
    when: When
    pattern: str
    nth: int

    @classmethod
    def parse(cls, text: str) -> KillPoint:
        when, pattern, nth = text.split(":")
        return cls(When(when), pattern, int(nth))

    def text(self) -> str:
        return f"{self.when.value}:{self.pattern}:{self.nth}"


def die() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def arm(point: KillPoint, *, kill: Callable[[], None] = die) -> None:
    """Patch both storages' ``write_report`` and ``create_report_exclusive`` (leases, ledger segments) so
    the process dies at ``point``."""
    seen = [0]
    lock = threading.Lock()

    def hit(key: str) -> bool:
        if not fnmatch.fnmatchcase(key, point.pattern):
            return False
        with lock:
            seen[0] += 1
            return seen[0] == point.nth

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def write_report(self: Any, key: str, data: bytes, *, content_type: str) -> Any:
            chosen = hit(key)
            if chosen and point.when is When.BEFORE:
                kill()
            result = original(self, key, data, content_type=content_type)
            if chosen and point.when is When.AFTER:
                kill()
            return result
        return write_report

    for storage in (LocalStorage, S3Storage):
        storage.write_report = wrap(storage.write_report)  # type: ignore[method-assign]
        storage.create_report_exclusive = wrap(storage.create_report_exclusive)  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    point, _, rest = argv[0], argv[1], argv[2:]
    arm(KillPoint.parse(point))
    from stormwatch.flows.cli import main as cli

    return cli(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
