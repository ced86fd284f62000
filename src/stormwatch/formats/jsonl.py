"""JSON Lines telemetry (sink segments and ``*.jsonl`` exports) to canonical events.

Clean files of schema v2/v3/v4 records take the columnar path
(:mod:`stormwatch.formats.columnar`); every other line (legacy records, or all
lines when the columnar parser rejects the file) is parsed on its own.
A malformed line drops only itself, with a warning naming the file and line.
A torn last line (no trailing newline, not valid JSON) is what a crashed writer
leaves behind: it is dropped without a warning, as stormlog does, and its length is
returned (:attr:`ParsedEvents.cut_short_bytes`) for the loader to report beside the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa

from stormwatch.events.frame import concat_frames, frame_from_rows
from stormwatch.events.records import normalise_record
from stormwatch.events.schema import RecordError
from stormwatch.events.sessions import SessionSummary
from stormwatch.formats.bad_input import MAX_LISTED_PER_FILE, describe_problems
from stormwatch.formats.columnar import columnar_events
from stormwatch.formats.json_value import parse_json_value
from stormwatch.formats.lines import Buffer, LineIndex, index_lines
from stormwatch.load.limits import JobLimitError

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class ParsedEvents:
    """Events read from one artifact, plus warnings naming its bad lines.

    ``cut_short_bytes``: None when the artifact ends cleanly; else its last record was cut short
    and this many bytes after its last complete record were not read (a torn JSONL line; a JSON
    array that breaks off, where it may be 0: the array was left open right after a record).
    """

    frame: pd.DataFrame
    warnings: tuple[str, ...]
    cut_short_bytes: int | None = None
    #: Sessions' summaries the artifact states itself (a tracker result's ``session_summary``), which
    #: stand for those sessions as stormlog 0.4.3 takes them; others are inferred from their events.
    summaries: tuple[SessionSummary, ...] = ()


def _torn_bytes(original: Buffer, kept: Buffer) -> int | None:
    """The bytes :func:`_drop_torn_tail` dropped, None when it dropped none (lengths only: no copy)."""
    dropped = len(original) - len(kept)
    return dropped if dropped else None


def _drop_torn_tail(data: Buffer) -> Buffer:
    if not len(data) or data[-1:] == b"\n":
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
    data: Buffer,
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


def _parse_buffer(
    data: Buffer, *, default_session_id: str, line_offset: int = 0
) -> tuple[pd.DataFrame, list[tuple[int, str]]]:
    """Events of newline-aligned JSONL bytes in line order, and (line number, reason) problems;
    line numbers count from ``line_offset + 1`` (the lines before this buffer in its file)."""
    lines = index_lines(data)
    if lines.count == 0:
        return frame_from_rows([]), []
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
    if line_offset:
        problems = [(number + line_offset, reason) for number, reason in problems]
    if rows:
        order = np.argsort(np.concatenate([fast_positions, np.asarray(kept, np.int64)]), kind="stable")
        frame = concat_frames([fast_frame, frame_from_rows(rows)]).take(order).reset_index(drop=True)
    else:
        frame = fast_frame
    return frame, problems


def read_jsonl(data: Buffer, *, label: str, default_session_id: str) -> ParsedEvents:
    """Events of one JSONL artifact in line order; ``label`` names it in warnings.

    ``data`` is only read (a mapping of the file will do).
    """
    if data[: len(BOM)] == BOM:
        data = data[len(BOM) :]
    if data.find(b"\n") < 0 and data.find(b"\r") >= 0:  # classic Mac line endings, read as lines by Python
        data = bytes(data).replace(b"\r", b"\n")
    kept = _drop_torn_tail(data)
    frame, problems = _parse_buffer(kept, default_session_id=default_session_id)
    return ParsedEvents(frame, tuple(describe_problems(label, problems)), _torn_bytes(data, kept))


class _Problems:
    """Problems of a streamed file: the first few kept (as many as warnings list), the rest counted."""

    def __init__(self) -> None:
        self.kept: list[tuple[int, str]] = []
        self.total = 0

    def extend(self, problems: list[tuple[int, str]]) -> None:
        self.kept.extend(problems[: max(0, MAX_LISTED_PER_FILE - len(self.kept))])
        self.total += len(problems)

    def warnings(self, label: str) -> tuple[str, ...]:
        listed = describe_problems(label, self.kept)
        hidden = self.total - len(self.kept)
        if hidden > 0:
            listed.append(f"{label}: {hidden} more bad lines skipped")
        return tuple(listed)


def read_jsonl_stream(
    stream: BinaryIO,
    *,
    label: str,
    default_session_id: str,
    chunk_bytes: int,
    max_events: int | None = None,
) -> ParsedEvents:
    """:func:`read_jsonl` over a binary stream, ``chunk_bytes`` at a time, with the same result.

    Each chunk is cut after its last newline (the rest carries over), so memory
    holds a few chunks plus the parsed columns. A line longer than
    ``chunk_bytes`` is skipped with a warning. Raises
    :class:`~stormwatch.load.limits.JobLimitError` once more than ``max_events`` events are read.
    """
    frames: list[pd.DataFrame] = []
    problems = _Problems()
    events = 0
    lines_before = 0  # newlines consumed so far: line numbers of later chunks start after them
    carry = b""
    skipping = False  # inside an overlong line, discarding up to its newline
    first = True
    while True:
        chunk = stream.read(chunk_bytes)
        if not chunk:
            break
        if first:
            chunk, first = (chunk[len(BOM) :] if chunk.startswith(BOM) else chunk), False
        if skipping:
            cut = chunk.find(b"\n")
            if cut < 0:
                continue
            chunk, skipping, lines_before = chunk[cut + 1 :], False, lines_before + 1
        buffer = carry + chunk
        cut = buffer.rfind(b"\n")
        if cut < 0:
            if len(buffer) >= chunk_bytes:
                problems.extend([(lines_before + 1, f"line longer than {chunk_bytes} bytes")])
                carry, skipping = b"", True
            else:
                carry = buffer
            continue
        carry = buffer[cut + 1 :]
        aligned = buffer[: cut + 1]
        del buffer
        frame, found = _parse_buffer(aligned, default_session_id=default_session_id, line_offset=lines_before)
        lines_before += aligned.count(b"\n")
        del aligned
        problems.extend(found)
        frames.append(frame)
        events += len(frame)
        if max_events is not None and events > max_events:
            raise JobLimitError(f"{label} holds more than max_events={max_events} events")
    torn = None
    if carry:
        kept = _drop_torn_tail(carry)
        torn = _torn_bytes(carry, kept)
        frame, found = _parse_buffer(kept, default_session_id=default_session_id, line_offset=lines_before)
        problems.extend(found)
        frames.append(frame)
    frame = concat_frames(frames) if frames else frame_from_rows([])
    return ParsedEvents(frame, problems.warnings(label), torn)
