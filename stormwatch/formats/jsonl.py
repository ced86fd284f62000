"""JSON Lines telemetry (sink segments and ``*.jsonl`` exports) to canonical events.

Clean files of schema v2/v3 records take the columnar path
(:mod:`stormwatch.formats.columnar`); every other line (legacy or v4 records,
or all lines when the columnar parser rejects the file) is parsed on its own.
A malformed line drops only itself, with a warning naming the file and line.
A torn last line (no trailing newline, not valid JSON) is what a crashed writer
leaves behind and is ignored silently, as stormlog does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from stormwatch.formats.columnar import columnar_events
from stormwatch.formats.jsonvalue import parse_json_value
from stormwatch.formats.lines import LineIndex, index_lines
from stormwatch.frame import concat_frames, frame_from_rows
from stormwatch.problems import describe_problems
from stormwatch.records import RecordError, normalise_record

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class ParsedEvents:
    """Events read from one artifact, plus warnings naming its bad lines."""

    frame: pd.DataFrame
    warnings: tuple[str, ...]


def _drop_torn_tail(data: bytes) -> bytes:
    if not data or data.endswith(b"\n"):
        return data
    cut = data.rfind(b"\n") + 1
    tail = data[cut:]
    if not tail.strip():
        return data
    try:
        parse_json_value(tail)
    except (ValueError, UnicodeDecodeError):
        return data[:cut]
    return data


def _parse_rows(
    data: bytes,
    lines: LineIndex,
    positions: np.ndarray,
    *,
    default_session_id: str,
) -> tuple[list[tuple[Any, ...]], list[int], list[tuple[int, str]]]:
    rows: list[tuple[Any, ...]] = []
    kept: list[int] = []
    problems: list[tuple[int, str]] = []
    for position in positions.tolist():
        raw = data[lines.starts[position] : lines.ends[position]]
        number = int(lines.numbers[position])
        try:
            record = parse_json_value(raw)
        except UnicodeDecodeError:
            problems.append((number, "not valid UTF-8"))
            continue
        except ValueError as exc:
            problems.append((number, f"malformed JSON ({exc})"))
            continue
        if not isinstance(record, dict):
            problems.append((number, "record must be a JSON object"))
            continue
        try:
            rows.append(normalise_record(record, default_session_id=default_session_id))
        except RecordError as exc:
            problems.append((number, str(exc)))
            continue
        except RecursionError:  # metadata scanned for tokens, nested near the parser's limit
            problems.append((number, "metadata nested too deeply"))
            continue
        kept.append(position)
    return rows, kept, problems


def read_jsonl(data: bytes, *, label: str, default_session_id: str) -> ParsedEvents:
    """Events of one JSONL artifact in line order; ``label`` names it in warnings."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    data = _drop_torn_tail(data)
    lines = index_lines(data)
    if lines.count == 0:
        return ParsedEvents(frame_from_rows([]), ())
    try:
        fast = columnar_events(data, lines, default_session_id=default_session_id)
    except pa.ArrowException:  # e.g. bytes that are not UTF-8 inside a string
        fast = None
    if fast is None:
        rest = np.arange(lines.count)
        fast_frame, fast_positions, problems = frame_from_rows([]), np.empty(0, np.int64), []
    else:
        rest = fast.rest_positions
        fast_frame, fast_positions, problems = fast.frame, fast.positions, list(fast.problems)
    rows, kept, slow_problems = _parse_rows(data, lines, rest, default_session_id=default_session_id)
    problems.extend(slow_problems)
    problems.sort()
    if rows:
        order = np.argsort(np.concatenate([fast_positions, np.asarray(kept, np.int64)]), kind="stable")
        frame = concat_frames([fast_frame, frame_from_rows(rows)]).take(order).reset_index(drop=True)
    else:
        frame = fast_frame
    return ParsedEvents(frame, tuple(describe_problems(label, problems)))
