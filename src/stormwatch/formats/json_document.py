"""JSON telemetry files (an array of records, or an object holding them) to events.

A record that breaks the rules drops only itself. A file that is not valid JSON
keeps the records before the point where it breaks (a truncated export keeps its
complete records), with a warning naming the line and column; when the array breaks
off at the end of the file (it is never closed, or its last record stops partway), the
file was cut short, and :attr:`~stormwatch.formats.jsonl.ParsedEvents.cut_short_bytes`
says how many bytes followed its last complete record.

The schema v2/v3/v4 records of a valid document take the columnar path
(:mod:`stormwatch.formats.json_table`); every other record (legacy, not an
object, a value the columnar path cannot hold or a rule it finds broken), and
every record of a salvaged array, is read on its own by ``normalise_record``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from stormwatch.events.frame import concat_frames, frame_from_rows
from stormwatch.events.records import normalise_record
from stormwatch.events.schema import RecordError
from stormwatch.events.sessions import SessionSummary, summary_from_mapping
from stormwatch.formats.bad_input import describe_problems
from stormwatch.formats.json_table import RecordTable, record_table
from stormwatch.formats.json_value import TooDeepError, parse_json_value
from stormwatch.formats.jsonl import BOM, ParsedEvents
from stormwatch.formats.legacy_table import legacy_table

_EVENT_HINT_KEYS = (
    "schema_version",
    "event_type",
    "type",
    "memory_allocated",
    "memory_mb",
    "timestamp",
    "timestamp_ns",
)

#: The key of a tracker result's events (stormlog's ``TrackingResult.to_dict()``), read
#: only when the object has no ``events`` list, as stormlog reads it.
TRACKED_EVENTS_KEY = "telemetry_events"


class NotTelemetryError(ValueError):
    """The JSON is valid but holds no telemetry events."""


#: What a value that the end of the text interrupted cannot hold: whitespace, a structural
#: character or a quote. A decoding error followed only by other characters (``nul``, ``-12.``,
#: ``\u00e``) is a token cut off by the end of the file.
_STRUCTURE = re.compile(r'[\s,:\[\]{}"]')


@dataclass(frozen=True)
class _Salvage:
    """The complete elements of a broken top-level array (line number, value), why it broke,
    where the last complete element ends (a character offset into the text) and whether the
    break is the end of the text (the file was cut short) rather than bad JSON inside it."""

    found: list[tuple[int, Any]]
    reason: str
    kept_chars: int
    cut_short: bool


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _ends_the_text(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether decoding failed only because the text ran out (a value cut off at the end)."""
    return exc.msg.startswith("Unterminated string") or _STRUCTURE.search(text, exc.pos) is None


def _salvage_array(text: str) -> _Salvage:
    """Complete elements of a broken top-level array, with their line numbers."""
    decoder = json.JSONDecoder()
    position = kept = text.index("[") + 1
    found: list[tuple[int, Any]] = []
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text) or text[position] == "]":
            reason = f"the array is not closed (the file ends at line {_line_of(text, len(text))})"
            return _Salvage(found=found, reason=reason, kept_chars=kept, cut_short=position >= len(text))
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            reason = f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            return _Salvage(found=found, reason=reason, kept_chars=kept, cut_short=_ends_the_text(text, exc))
        except RecursionError:
            reason = f"a record nested too deeply at line {_line_of(text, position)}"
            return _Salvage(found=found, reason=reason, kept_chars=kept, cut_short=False)
        found.append((_line_of(text, position), value))
        position = kept = end


def records_of(payload: Any) -> list[Any]:
    """The records of a parsed JSON payload, by stormlog's rules: an array; an object's
    ``events``; a tracker result's ``telemetry_events`` (see :func:`_tracked_records`);
    an object that looks like one record."""
    if isinstance(payload, list):
        return payload
    if isinstance(payload, Mapping):
        if isinstance(payload.get("events"), list):
            return list(payload["events"])
        if isinstance(payload.get(TRACKED_EVENTS_KEY), list):
            return _tracked_records(payload)
        if any(key in payload for key in _EVENT_HINT_KEYS):
            return [payload]
        raise NotTelemetryError("JSON payload does not contain telemetry events")
    raise NotTelemetryError("telemetry payload must be a JSON object or array")


def _tracked_records(payload: Mapping[str, Any]) -> list[Any]:
    """``telemetry_events`` of a tracker result (stormlog 0.4.3's MLX ``tracking.json``,
    ``TrackingResult.to_dict()``). As stormlog, when its ``session_summary`` is an object
    the whole file stands or falls with it: the summary must be valid and every record
    (every object: other records are refused one by one) must carry its session id, else
    :class:`NotTelemetryError` names the first record that does not."""
    records: list[Any] = payload[TRACKED_EVENTS_KEY]
    stated = payload.get("session_summary")
    if not isinstance(stated, Mapping):
        return records
    try:
        session_id = summary_from_mapping(stated).session_id
    except ValueError as exc:
        raise NotTelemetryError(f"invalid tracker session_summary: {exc}") from exc
    # A plain scan of the parsed dicts (nothing made per record): stormlog refuses the file
    # on the first mismatch, so no table is worth building first.
    stray = next((number for number, record in enumerate(records, start=1)
                  if type(record) is dict and record.get("session_id") != session_id), None)
    if stray is not None:
        raise NotTelemetryError(
            f"tracker session summary does not match telemetry event identity: record {stray}'s "
            f"session_id is {records[stray - 1].get('session_id')!r}, the summary's {session_id!r}"
        )
    return records


def stated_summary(payload: Any) -> SessionSummary | None:
    """A tracker result's own ``session_summary`` (checked by :func:`_tracked_records` when its
    records were read), which stormlog 0.4.3 takes as that session's summary; None for any other payload."""
    if not isinstance(payload, Mapping) or isinstance(payload.get("events"), list):
        return None
    stated = payload.get("session_summary")
    if not isinstance(payload.get(TRACKED_EVENTS_KEY), list) or not isinstance(stated, Mapping):
        return None
    return summary_from_mapping(stated)


def read_json(data: bytes, *, label: str, default_session_id: str) -> ParsedEvents:
    """Events of one JSON artifact; raises :class:`NotTelemetryError` when it has none.

    Records are numbered from 1 in warnings; a salvaged array reports lines.
    """
    warnings: list[str] = []
    numbers: Sequence[int]
    where = "record"
    cut_short_bytes = None
    summary = None
    try:
        payload = parse_json_value(data[len(BOM) :] if data.startswith(BOM) else data)
        records = records_of(payload)
        numbers = range(1, len(records) + 1)
        summary = stated_summary(payload)
    except UnicodeDecodeError as exc:
        raise NotTelemetryError(f"not valid UTF-8 at byte {exc.start}") from exc
    except TooDeepError as exc:
        raise NotTelemetryError(str(exc)) from exc
    except json.JSONDecodeError as exc:
        text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
        if not text.lstrip().startswith("["):
            raise NotTelemetryError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
        salvage = _salvage_array(text)
        numbered = salvage.found
        numbers, records = [number for number, _ in numbered], [record for _, record in numbered]
        where = "line"
        warnings.append(f"{label}: {salvage.reason}; kept the {len(numbered)} complete records before it")
        if salvage.cut_short:  # counted as UTF-8: exact unless the dropped tail held invalid bytes
            cut_short_bytes = len(text[salvage.kept_chars :].encode("utf-8", errors="replace"))
    frame, problems = _events(records, numbers, columnar=where == "record", default_session_id=default_session_id)
    warnings.extend(describe_problems(label, problems, where=where))
    return ParsedEvents(frame, tuple(warnings), cut_short_bytes, summaries=() if summary is None else (summary,))


def _events(
    records: list[Any], numbers: Sequence[int], *, columnar: bool, default_session_id: str
) -> tuple[pd.DataFrame, list[tuple[int, str]]]:
    """Events of the records in order, and (number, reason) problems (``numbers``: each record's
    number in warnings); when ``columnar``, schema v2/v3/v4 records (:mod:`stormwatch.formats.json_table`)
    and legacy-shaped ones (:mod:`stormwatch.formats.legacy_table`) as columns, every other record
    one by one."""
    tables: list[RecordTable] = []
    rest = np.arange(len(records))
    if columnar:
        fast = record_table(records, default_session_id=default_session_id)
        if fast is not None:
            tables.append(fast)
            rest = fast.rest
        legacy = legacy_table(records, rest, default_session_id=default_session_id)
        if legacy is not None:
            tables.append(legacy)
            rest = legacy.rest
    rows, kept = [], []
    problems: list[tuple[int, str]] = []
    for position in rest.tolist():
        try:
            rows.append(normalise_record(records[position], default_session_id=default_session_id))
        except RecordError as exc:
            problems.append((numbers[position], str(exc)))
            continue
        except RecursionError:  # metadata scanned for tokens, nested near the parser's limit
            problems.append((numbers[position], "metadata nested too deeply"))
            continue
        kept.append(position)
    frames = [table.frame for table in tables if len(table.frame)]
    if rows or not frames:
        frames.append(frame_from_rows(rows))
        tables.append(RecordTable(frame=frames[-1], positions=np.asarray(kept, dtype=np.int64), rest=rest))
    if len(frames) == 1:
        return frames[0], problems
    order = np.argsort(np.concatenate([table.positions for table in tables if len(table.frame)]), kind="stable")
    return concat_frames(frames).take(order).reset_index(drop=True), problems
