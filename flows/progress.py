"""The audit's progress bar: jobs done out of jobs to diagnose, on a terminal only."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column

PROGRESS_MIN_JOBS = 4


class JobProgress:
    """A rich progress bar on stderr for the jobs of an audit, as a context manager.

    Shown only when asked, when stderr is a terminal and when at least :data:`PROGRESS_MIN_JOBS`
    jobs run; otherwise nothing is written. ``step`` counts one finished job (``done`` never
    exceeds ``total``) and shows its id (first 40 characters, as plain text: a job id is never
    read as rich markup). Leaving the block stops the bar, keeping its last line.
    """

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total, self.done = total, 0
        self.enabled = enabled and total >= PROGRESS_MIN_JOBS and sys.stderr.isatty()
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> JobProgress:
        if self.enabled:
            label = TextColumn("{task.description}", markup=False,
                               table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"))  # the rest of a line
            self._bar = Progress(BarColumn(bar_width=30), TextColumn("{task.completed:.0f}/{task.total:.0f} jobs"),
                                 TimeElapsedColumn(), label, expand=True,
                                 console=Console(file=sys.stderr, force_terminal=True))
            self._task = self._bar.add_task("", total=self.total)
            self._bar.start()
        return self

    def step(self, label: str, *, jobs: int = 1) -> None:
        """``jobs`` more finished, the last one ``label``."""
        self.done = min(self.done + jobs, self.total)
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done, description=label[:40], refresh=True)

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
