"""CSV exports (stormlog trackers' ``export_events(..., "csv")``) to canonical events.

Differences from stormlog 0.3.5, on purpose: integers are exact (stormlog reads
them through ``float``, rounding nanosecond timestamps); ``metadata`` written as
a Python literal (what ``csv``/pandas make of a dict) is recovered with
``ast.literal_eval``, never ``eval``; bytes that are not UTF-8 drop only their
row; a byte-order mark is ignored.
"""

from __future__ import annotations

import ast
import csv
import io
import json
from typing import Any

from stormwatch.events.frame import frame_from_rows
from stormwatch.events.records import normalise_record
from stormwatch.events.schema import COUNTER_COLUMNS, INT_COLUMNS, RecordError
from stormwatch.formats.bad_input import describe_problems
from stormwatch.formats.jsonl import BOM, ParsedEvents

#: CSV cells read as exact integers: the canonical integer fields and stormlog's legacy ones.
INT_FIELDS = frozenset(
    {*INT_COLUMNS, *COUNTER_COLUMNS, "memory_allocated", "memory_reserved", "memory_change", "total_memory"}
)
FLOAT_FIELDS = frozenset({"timestamp"})
_MAX_LITERAL_CHARS = 1 << 20


def parse_metadata_cell(text: str) -> dict[str, Any]:
    """A metadata cell as a dict: JSON, else a Python literal, else empty."""
    for parse in (json.loads, ast.literal_eval):
        if parse is ast.literal_eval and len(text) > _MAX_LITERAL_CHARS:
            break
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return value if isinstance(value, dict) else {}
    return {}


def parse_int_cell(text: str) -> int:
    """Exact for integer text; other numbers truncate toward zero as stormlog does."""
    try:
        return int(text)
    except ValueError:
        return int(float(text))


def normalise_row(row: dict[Any, Any]) -> dict[Any, Any]:
    """Cell texts to record values: blanks to None, numbers by field, metadata parsed."""
    out: dict[Any, Any] = {}
    for key, raw in row.items():
        value = raw.strip() if isinstance(raw, str) else raw
        if value == "":
            out[key] = None
        elif key == "metadata":
            out[key] = parse_metadata_cell(value) if isinstance(value, str) else {}
        elif key in INT_FIELDS:
            if not isinstance(value, str):
                raise RecordError(f"{key} is missing (short row)")
            try:
                out[key] = parse_int_cell(value)
            except (ValueError, OverflowError) as exc:
                raise RecordError(f"{key} is not a number: {value[:40]!r}") from exc
        elif key in FLOAT_FIELDS and isinstance(value, str):
            try:
                out[key] = float(value)
            except ValueError as exc:
                raise RecordError(f"{key} is not a number: {value[:40]!r}") from exc
        else:
            out[key] = value
    if None in out:
        raise RecordError("row has more cells than the header")
    return out


def read_csv(data: bytes, *, label: str, default_session_id: str) -> ParsedEvents:
    text = (
        data[len(BOM) :].decode("utf-8", errors="surrogateescape")
        if data.startswith(BOM)
        else data.decode("utf-8", errors="surrogateescape")
    )
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = []
    problems: list[tuple[int, str]] = []
    try:
        for row in reader:
            line = reader.line_num
            try:
                if any(isinstance(v, str) and _has_surrogate(v) for v in row.values()):
                    raise RecordError("not valid UTF-8")
                record = normalise_row(row)
                rows.append(
                    normalise_record(
                        record,
                        default_session_id=default_session_id,
                        default_collector="legacy.csv",
                        default_sampling_interval_ms=0,
                    )
                )
            except RecordError as exc:
                problems.append((line, str(exc)))
    except csv.Error as exc:
        problems.append((reader.line_num, f"unreadable CSV ({exc}); the rest of the file is skipped"))
    return ParsedEvents(frame_from_rows(rows), tuple(describe_problems(label, problems, where="row")))


def _has_surrogate(value: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in value)
