"""The whole notification ledger as a reader sees it: notifications.jsonl, then every segment in key order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from stormwatch.tasks.storage.protocol import LEDGER_FOLDER, NOTIFICATIONS_KEY


def ledger_bytes(get: Callable[[str], bytes | None], keys: Iterable[str], *, reports: str = "reports/") -> bytes:
    """``get``: an object's bytes by its full key; ``keys``: every stored key (the segments are picked)."""
    segments = sorted(key for key in keys if key.startswith(f"{reports}{LEDGER_FOLDER}/") and key.endswith(".jsonl"))
    parts = [get(f"{reports}{NOTIFICATIONS_KEY}") or b"", *(get(key) or b"" for key in segments)]
    return b"".join(part if part.endswith(b"\n") or not part else part + b"\n" for part in parts)


def ledger_lines(get: Callable[[str], bytes | None], keys: Iterable[str], *, reports: str = "reports/",
                 ) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in ledger_bytes(get, keys, reports=reports).splitlines() if line.strip()]


def ledger_lines_at(root: Path) -> list[dict[str, Any]]:
    """The ledger of a local storage root (its ``reports/`` folder)."""
    keys = [path.relative_to(root).as_posix() for path in (root / "reports").rglob("*.jsonl")]
    return ledger_lines(lambda key: (root / key).read_bytes() if (root / key).is_file() else None, keys)
