"""The audit's progress bar: shown on a terminal for more than a few jobs, silent otherwise."""

from __future__ import annotations

import io

import pytest

from stormwatch.flows.audit import PROGRESS_MIN_JOBS, Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("total", "tty", "shown"), [(10, True, True), (PROGRESS_MIN_JOBS - 1, True, False),
                                                     (10, False, False)])
def test_progress_bar(monkeypatch: pytest.MonkeyPatch, total: int, tty: bool, shown: bool) -> None:
    stream = Terminal() if tty else io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    bar = Progress(total, enabled=True)
    for index in range(total):
        bar.step(f"job-{index}")
    text = stream.getvalue()
    assert bool(text) is shown
    if shown:
        assert f"{total}/{total} jobs" in text and text.endswith("\n") and "#" * 30 in text
