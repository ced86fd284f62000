"""The audit's progress bar (rich): shown on a terminal for more than a few jobs, silent otherwise."""

from __future__ import annotations

import io
import re

import pytest

from stormwatch.flows.progress import PROGRESS_MIN_JOBS, JobProgress

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_bar(monkeypatch: pytest.MonkeyPatch, total: int, *, tty: bool, enabled: bool = True,
            labels: list[str] | None = None) -> str:
    """The text the bar writes to stderr for ``total`` jobs (ANSI control sequences removed)."""
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "120")
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    stream = Terminal() if tty else io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    with JobProgress(total, enabled=enabled) as bar:
        for index in range(total):
            bar.step((labels or [])[index] if labels else f"job-{index}")
        assert bar.done == total
    return ANSI.sub("", stream.getvalue())


@pytest.mark.parametrize(("total", "tty", "enabled", "shown"), [
    (10, True, True, True),
    (PROGRESS_MIN_JOBS, True, True, True),
    (PROGRESS_MIN_JOBS - 1, True, True, False),
    (10, False, True, False),
    (10, True, False, False),
])
def test_progress_bar_only_on_a_terminal_for_enough_jobs(
    monkeypatch: pytest.MonkeyPatch, total: int, tty: bool, enabled: bool, shown: bool
) -> None:
    text = run_bar(monkeypatch, total, tty=tty, enabled=enabled)
    assert bool(text) is shown
    if shown:
        assert f"{total}/{total} jobs" in text and text.endswith("\n")
        assert f"job-{total - 1}" in text  # the last finished job is named
        assert "━" * 30 in text  # the full bar, 30 cells wide


def test_progress_counts_each_finished_job(monkeypatch: pytest.MonkeyPatch) -> None:
    text = run_bar(monkeypatch, 6, tty=True)
    counts = [int(done) for done in re.findall(r"(\d+)/6 jobs", text)]
    assert counts and counts == sorted(counts) and set(range(1, 7)) <= set(counts)  # one redraw per job, in order
    last_line = text.rstrip("\n").splitlines()[-1]
    assert "6/6 jobs" in last_line


def test_job_ids_are_shown_as_text_not_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    labels = ["[bold]x", "[/]", "[link=http://evil.example]y", "z" * 60, "ok"]
    text = run_bar(monkeypatch, len(labels), tty=True, labels=labels)
    assert "[/]" in text and "[bold]x" in text and "[link=http://evil.example]y" in text
    assert "z" * 40 in text and "z" * 41 not in text  # a long id is cut at 40 characters
