"""Errors in the alerting configuration files (routes, silences), naming the file and the line.

:class:`ConfigError` is what a parser raises; its text reads ``reports/routes.toml line 7:
route 2 names the unknown receiver 'infra'``. :class:`TomlLines` finds the line of a table or
of a key inside one in a TOML text, so errors found after parsing (``tomllib`` gives positions
for syntax errors only) still name a line. A message never quotes a value that may be a secret.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SYNTAX_POSITION = re.compile(r"\(at line (\d+), column \d+\)")
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")


class ConfigError(ValueError):
    """A configuration file that cannot be used: ``file`` (as the user knows it), ``line`` (1-based;
    None when unknown), ``message``."""

    def __init__(self, file: str, line: int | None, message: str) -> None:
        where = f"{file} line {line}" if line is not None else file
        super().__init__(f"{where}: {message}")
        self.file = file
        self.line = line
        self.message = message


def toml_syntax_line(error_text: str) -> tuple[int | None, str]:
    """tomllib's error text split into its line and the message without the position."""
    found = _SYNTAX_POSITION.search(error_text)
    message = _SYNTAX_POSITION.sub("", error_text).strip()
    return (int(found.group(1)) if found else None), message


def _bare(name: str) -> str:
    return name.strip().strip("\"'")


@dataclass(frozen=True)
class TomlLines:
    """Where tables and keys sit in a TOML text (1-based lines; a best effort for inline tables)."""

    text: str

    def _headers(self) -> list[tuple[int, str]]:
        out = []
        for number, line in enumerate(self.text.splitlines(), start=1):
            found = _HEADER.match(line)
            if found:
                out.append((number, ".".join(_bare(part) for part in found.group(1).split("."))))
        return out

    def table(self, name: str, occurrence: int = 0) -> int | None:
        """The line of the ``occurrence``-th (0-based) header ``[name]`` or ``[[name]]``."""
        seen = [number for number, header in self._headers() if header == name]
        return seen[occurrence] if occurrence < len(seen) else None

    def key(self, table_line: int | None, key: str) -> int | None:
        """The line of ``key = ...`` in the table whose header is at ``table_line`` (None: the top level),
        else the table's own line."""
        lines = self.text.splitlines()
        start = 0 if table_line is None else table_line
        for index in range(start, len(lines)):
            if _HEADER.match(lines[index]):
                break
            found = _KEY.match(lines[index])
            if found and _bare(found.group(1)) == key:
                return index + 1
        return table_line
