"""The manual keeps up with the code: every command and flag the parser knows is in docs/cli.md,
every relative link of the README and docs/ resolves, and the README stays a front door."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from stormwatch.flows.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "bench" / "README.md", *DOCS]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], set[str]]]:
    """(command path, its long option strings) for every command and nested command."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.extend(_commands(sub, (*path, name)))
    options = {option for action in parser._actions for option in action.option_strings
               if option.startswith("--") and option != "--help"}
    found.append((path, options))
    return found


@pytest.mark.parametrize(("command", "options"), _commands(build_parser()),
                         ids=lambda value: " ".join(value) if isinstance(value, tuple) else None)
def test_every_command_and_flag_is_in_the_cli_manual(command: tuple[str, ...], options: set[str]) -> None:
    manual = (REPO / "docs" / "cli.md").read_text()
    if command:
        assert f"stormwatch {' '.join(command)}" in manual or f"stormwatch {command[0]}" in manual
    missing = sorted(option for option in options if not re.search(rf"{re.escape(option)}(?![\w-])", manual))
    assert not missing, f"{' '.join(command) or 'stormwatch'}: {missing} not in docs/cli.md"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.relative_to(REPO)} links to {target}, which does not exist"


def test_the_readme_is_a_front_door() -> None:
    readme = (REPO / "README.md").read_text().splitlines()
    assert len(readme) <= 150
    blocks = [line for line in readme if line.startswith("pip install")]
    assert blocks[:2] == ["pip install -e . && stormwatch demo", "pip install -e '.[test]' && python -m pytest -q"]
