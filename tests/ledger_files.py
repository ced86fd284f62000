"""The whole notification ledger, every decision ever: the archives, notifications.jsonl unless it is
carried (its lines are in the archives), then every segment, each in key order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from stormwatch.alerting.ledger_carry import carried_header
from stormwatch.tasks.storage.protocol import LEDGER_ARCHIVE_FOLDER, LEDGER_FOLDER, NOTIFICATIONS_KEY


def ledger_bytes(get: Callable[[str], bytes | None], keys: Iterable[str], *, reports: str = "reports/") -> bytes:
    """``get``: an object's bytes by its full key; ``keys``: every stored key (the segments are picked)."""
    keys = list(keys)
    archives, segments = (sorted(key for key in keys
                                 if key.startswith(f"{reports}{folder}/") and key.endswith(".jsonl"))
                          for folder in (LEDGER_ARCHIVE_FOLDER, LEDGER_FOLDER))
    base = get(f"{reports}{NOTIFICATIONS_KEY}") or b""
    parts = [*(get(key) or b"" for key in archives), b"" if carried_header(base) else base,
             *(get(key) or b"" for key in segments)]
    return b"".join(part if part.endswith(b"\n") or not part else part + b"\n" for part in parts)


def ledger_lines(get: Callable[[str], bytes | None], keys: Iterable[str], *, reports: str = "reports/",
                 ) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in ledger_bytes(get, keys, reports=reports).splitlines() if line.strip()]


def ledger_lines_at(root: Path) -> list[dict[str, Any]]:
    """The ledger of a local storage root (its ``reports/`` folder)."""
    keys = [path.relative_to(root).as_posix() for path in (root / "reports").rglob("*.jsonl")]  # dot folders too
    return ledger_lines(lambda key: (root / key).read_bytes() if (root / key).is_file() else None, keys)
