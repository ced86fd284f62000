"""Structured edits of one record inside an artifact, written back as raw JSON text.

A record edit gets a parsed record (a dict) and returns the record's new JSON
text, so that it can hold what ``json.dumps`` never writes: ``NaN``, integers
beyond 64 bits spelled out, duplicate keys, nesting deeper than any recursive
encoder allows. Placeholders mark the edited spot in a normally encoded copy.
"""

from __future__ import annotations

import copy
import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Any

from tests.fuzz.corpus import Fmt

_RAW = "@@fuzz-raw@@"
_DUP_KEY, _DUP_VALUE = "@@fuzz-dup-key@@", "@@fuzz-dup-value@@"
_MAX_DEPTH = 3
_MAX_LIST_SLOTS = 16

Path_ = tuple[str | int, ...]
#: A record edit: (record, rng) -> (new JSON text of the record, note), or None when it cannot apply.
RecordEdit = Callable[[dict[str, Any], Random], tuple[str, str] | None]


@dataclass(frozen=True)
class Slot:
    """``container[key]`` where ``container`` is the node at ``path`` below the record."""

    path: Path_
    key: str | int

    def value(self, record: Any) -> Any:
        return node_at(record, self.path)[self.key]

    def __str__(self) -> str:
        return ".".join(str(part) for part in (*self.path, self.key))


def node_at(record: Any, path: Path_) -> Any:
    node = record
    for part in path:
        node = node[part]
    return node


def slots(record: Any, *, path: Path_ = ()) -> list[Slot]:
    """Every key of every dict and the first list items, down to a small depth."""
    out: list[Slot] = []
    node = node_at(record, path)
    items = list(node.items()) if isinstance(node, dict) else list(enumerate(node[:_MAX_LIST_SLOTS]))
    for key, value in items:
        out.append(Slot(path, key))
        if isinstance(value, dict | list) and value and len(path) < _MAX_DEPTH:
            out.extend(slots(record, path=(*path, key)))
    return out


def dict_paths(record: Any) -> list[Path_]:
    """Paths of the dict nodes of a record (the record itself first)."""
    return [()] + [(*s.path, s.key) for s in slots(record) if isinstance(s.value(record), dict)]


def with_raw(record: Any, slot: Slot, raw: str) -> str:
    """The record's JSON text with ``raw`` as the value of ``slot``."""
    changed = copy.deepcopy(record)
    node_at(changed, slot.path)[slot.key] = _RAW
    return json.dumps(changed).replace(json.dumps(_RAW), raw, 1)


def without(record: Any, slot: Slot) -> str:
    changed = copy.deepcopy(record)
    del node_at(changed, slot.path)[slot.key]
    return json.dumps(changed)


def with_duplicate(record: Any, path: Path_, key: str, raw: str, *, first: bool) -> str:
    """The record with ``key`` written twice in the dict at ``path``: the copy holding
    ``raw`` comes first (so a last-wins parser keeps the original) or last."""
    changed = copy.deepcopy(record)
    node = node_at(changed, path)
    items = list(node.items())
    at = next(i for i, (name, _) in enumerate(items) if name == key) + (0 if first else 1)
    items.insert(at, (_DUP_KEY, _DUP_VALUE))
    node.clear()
    node.update(items)
    marker = f"{json.dumps(_DUP_KEY)}: {json.dumps(_DUP_VALUE)}"
    return json.dumps(changed).replace(marker, f"{json.dumps(key)}: {raw}", 1)


def edit_record(fmt: Fmt, data: bytes, rng: Random, edit: RecordEdit) -> tuple[bytes, str] | None:
    """Apply ``edit`` to one record of a JSON-ish artifact chosen by ``rng``: a line of
    JSONL, an element of a JSON array (or of an object's ``events``), or the whole
    document of a timeline or manifest. None when there is no record to edit."""
    if fmt is Fmt.JSONL:
        lines = data.split(b"\n")
        parsed = {i: _as_dict(line) for i, line in enumerate(lines)}
        candidates = [i for i, record in parsed.items() if record is not None]
        if not candidates:
            return None
        index = rng.choice(candidates)
        done = edit(parsed[index], rng)  # type: ignore[arg-type]
        if done is None:
            return None
        lines[index] = done[0].encode()
        return b"\n".join(lines), f"line {index + 1}: {done[1]}"
    doc = json.loads(data)
    if fmt is Fmt.JSON:
        records = doc if isinstance(doc, list) else doc.get("events")
        indices = [i for i, r in enumerate(records) if isinstance(r, dict)] if isinstance(records, list) else []
        if not indices:
            return None
        index = rng.choice(indices)
        done = edit(records[index], rng)
        if done is None:
            return None
        records[index] = _RAW
        text = json.dumps(doc, indent=2).replace(json.dumps(_RAW), done[0], 1)
        return text.encode(), f"record {index + 1}: {done[1]}"
    done = edit(doc, rng) if isinstance(doc, dict) else None
    return None if done is None else (done[0].encode(), done[1])


def _as_dict(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --- CSV ------------------------------------------------------------------------------------

def csv_rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def csv_bytes(rows: list[list[str]]) -> bytes:
    """Rows as stormlog's DictWriter writes them (``\\r\\n`` terminators, minimal quoting)."""
    out = io.StringIO(newline="")
    csv.writer(out).writerows(rows)
    return out.getvalue().encode("utf-8")


def edit_cell(data: bytes, rng: Random, new_text: Callable[[str, str, Random], str | None],
              *, column: str | None = None) -> tuple[bytes, str] | None:
    """Replace one data cell (in ``column``, or any) with ``new_text(header, old, rng)``."""
    rows = csv_rows(data)
    if len(rows) < 2:
        return None
    header = rows[0]
    row = rng.randrange(1, len(rows))
    columns = [header.index(column)] if column in header else list(range(len(header)))
    col = rng.choice([c for c in columns if c < len(rows[row])] or [0])
    if col >= len(rows[row]):
        return None
    text = new_text(header[col], rows[row][col], rng)
    if text is None:
        return None
    rows[row][col] = text
    return csv_bytes(rows), f"row {row + 1} {header[col]}={text[:40]!r}{'...' if len(text) > 40 else ''}"
