"""The signal table: every code the engine emits has plain words, and docs/signals.md shows the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormwatch.analysis.collective import CollectiveClass
from stormwatch.analysis.columns import ALERT_TYPES
from stormwatch.analysis.gaps import GapClass
from stormwatch.signals import SIGNALS, SignalFamily, describe, markdown_table

ENGINE_CODES = (
    [f"alert:{kind}" for kind in sorted(ALERT_TYPES)]
    + [f"gap:{kind.value}" for kind in GapClass]
    + [f"collective:{kind.label}" for kind in CollectiveClass]
    + ["gap_ratio_breach", "oom", "missing_ranks", "regression", "outlier", "suspect_device", "suspect_host"]
)


@pytest.mark.parametrize("code", ENGINE_CODES)
def test_every_engine_signal_has_a_title_and_a_meaning(code: str) -> None:
    text = describe(code)
    assert text is SIGNALS[code]
    assert text.title and text.title[0].isupper() and ":" not in text.title
    assert text.meaning.endswith(".") and text.meaning.count(". ") == 0, "one sentence"


@pytest.mark.parametrize(
    ("code", "oom", "title", "family"),
    [
        ("alert:error", True, "Out of memory", SignalFamily.JOB),
        ("alert:error", False, "Error event", SignalFamily.ALERT),
        ("alert:custom_thing", False, "Custom thing", SignalFamily.ALERT),
        ("gap:new_shape", False, "New shape", SignalFamily.GAP),
        ("something_else", False, "Something else", SignalFamily.JOB),
    ],
)
def test_titles_of_known_and_unknown_codes(code: str, oom: bool, title: str, family: SignalFamily) -> None:
    text = describe(code, oom=oom)
    assert (text.title, text.family, text.code) == (title, family, code)
    assert text.meaning.endswith(".")


def test_docs_show_the_table() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "signals.md").read_text(encoding="utf-8")
    assert markdown_table() in docs
