"""The columnar CSV path against today's row-by-row reader, case by case.

Every case is a CSV export written by stormlog's own writers (``CPUMemoryTracker``'s
``csv.DictWriter``, the CUDA tracker's ``pd.DataFrame(records).to_csv``), as it is or
damaged. :func:`read_csv` (columnar, with its fallbacks) must give the same frame,
dtypes included, and the same warnings as :func:`read_csv_rows` (today's reader),
and must have taken the path the case names: ``columnar`` (no row left over),
``rows`` (only the damaged rows left to the row-by-row path) or ``file`` (the whole
file read row by row).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import pandas as pd
import pytest

from stormwatch.formats.csv_export import read_csv, read_csv_rows
from stormwatch.formats.csv_table import columnar_csv
from stormwatch.formats.jsonl import BOM
from tests import builders as b
from tests import model_builders as mb

LABEL = "job/events.csv"
DEFAULT_SESSION = "default-session"
Rows = list[list[str]]


# --- the exports -------------------------------------------------------------------------------


@cache
def cpu_export() -> bytes:
    """``CPUMemoryTracker.export_events(path, "csv")``: csv.DictWriter, CRLF, ``repr`` metadata."""
    with TemporaryDirectory() as folder:
        path = b.write_cpu_tracker_export(
            Path(folder) / "cpu_events.csv", fmt="csv", samples=8, phases=b.DEFAULT_PHASES,
            alerts=b.DEFAULT_ALERTS, rank=1, world_size=2, job_id="job-7", host="node-0", pid=77)
        return path.read_bytes()


def _to_csv(records: list[dict[str, Any]]) -> bytes:
    """The CUDA tracker's ``export_events(path, "csv")``: ``pd.DataFrame(records).to_csv``."""
    out = io.StringIO()
    pd.DataFrame(records).to_csv(out, index=False)
    return out.getvalue().encode()


@cache
def cuda_export() -> bytes:
    """Nullable int columns holding None somewhere (written as floats: ``85899345920.0``)."""
    samples = [b.Sample(t_s=0.5 * i, allocated=b.GIB + i * b.MIB, device_total=80 * b.GIB) for i in range(10)]
    records = b.timeline_records(samples=samples, phases=b.DEFAULT_PHASES, alerts=b.DEFAULT_ALERTS,
                                 session_id="cuda-0", job_id="job-7", world_size=2, rank=1)
    for index, record in enumerate(records):
        if index % 2:
            record["allocator_active_bytes"] = record["allocator_allocated_bytes"]
            record["allocator_inactive_bytes"] = 3 * b.MIB
        else:
            record["device_free_bytes"] = None
    return _to_csv(records)


@cache
def collective_export() -> bytes:
    """Rank 0 of the model suite's synchronised collective job, as the CUDA tracker writes it."""
    with TemporaryDirectory() as folder:
        paths = mb.build_collective_synchronized(Path(folder), world_size=2)
        records = [json.loads(line) for line in paths[0].read_text().splitlines() if line.strip()]
    return _to_csv(records)


BASES: dict[str, Callable[[], bytes]] = {"cpu": cpu_export, "cuda": cuda_export, "collective": collective_export}


# --- edits -------------------------------------------------------------------------------------


def _rows(data: bytes) -> Rows:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def _bytes(rows: Rows, ending: str = "\n") -> bytes:
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator=ending).writerows(rows)
    return out.getvalue().encode()


def cells(*edits: tuple[int, str, str]) -> Callable[[bytes], bytes]:
    """Set cells: (data row, from 0; column name; text)."""
    def edit(data: bytes) -> bytes:
        rows = _rows(data)
        for row, name, text in edits:
            rows[row + 1][rows[0].index(name)] = text
        return _bytes(rows)
    return edit


def column(name: str, fill: Callable[[int, str], str]) -> Callable[[bytes], bytes]:
    """Every cell of a column rewritten by ``fill(data row, text)``."""
    def edit(data: bytes) -> bytes:
        rows = _rows(data)
        at = rows[0].index(name)
        for index, row in enumerate(rows[1:]):
            row[at] = fill(index, row[at])
        return _bytes(rows)
    return edit


def floats(*names: str) -> Callable[[bytes], bytes]:
    """The columns' non-blank cells as pandas writes floats (``123.0``)."""
    edits = [column(name, lambda _i, text: f"{text}.0" if text else text) for name in names]
    return lambda data: functools.reduce(lambda done, edit: edit(done), edits, data)


def drop(*names: str) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        rows = _rows(data)
        keep = [i for i, name in enumerate(rows[0]) if name not in names]
        return _bytes([[row[i] for i in keep] for row in rows])
    return edit


def add(name: str, value: str) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        rows = _rows(data)
        return _bytes([rows[0] + [name]] + [row + [value] for row in rows[1:]])
    return edit


def lines(fn: Callable[[list[bytes]], list[bytes]]) -> Callable[[bytes], bytes]:
    """Edit the physical lines (LF endings)."""
    def edit(data: bytes) -> bytes:
        return b"\n".join(fn(_bytes(_rows(data)).split(b"\n")))
    return edit


def _insert(index: int, *new: bytes) -> Callable[[list[bytes]], list[bytes]]:
    return lambda found: found[:index] + list(new) + found[index:]


def _replace(index: int, line: Callable[[bytes], bytes]) -> Callable[[list[bytes]], list[bytes]]:
    return lambda found: found[:index] + [line(found[index])] + found[index + 1 :]


_MANY_STRINGS = "{'path': [" + ", ".join([f"'s{i}'" for i in range(300)] + ["'communİcation'"]) + "]}"

# (name, base, edit, path taken, at most this many rows left to the row-by-row path)
CASES: list[tuple[str, str, Callable[[bytes], bytes], str, int]] = [
    ("cpu as written", "cpu", lambda d: d, "columnar", 0),
    ("cuda as written", "cuda", lambda d: d, "columnar", 0),
    ("collective as written", "collective", lambda d: d, "columnar", 0),
    ("lf line endings", "cpu", cells(), "columnar", 0),
    ("byte order mark", "cpu", lambda data: BOM + data, "columnar", 0),
    ("every integer float-formatted", "cpu", floats("pid", "device_id", "rank", "local_rank", "world_size",
                                                    "sampling_interval_ms", "allocator_allocated_bytes",
                                                    "allocator_reserved_bytes", "allocator_change_bytes",
                                                    "device_used_bytes"), "columnar", 0),
    ("integer spellings", "cuda", cells((0, "pid", "+77"), (1, "device_id", " 0 "), (2, "rank", "0_1"),
                                        (3, "timestamp_ns", "1.7e18"), (4, "allocator_change_bytes", "-5.9"),
                                        (5, "device_total_bytes", "８５８９９３４５９２０"),
                                        (6, "sampling_interval_ms", "1e2")), "columnar", 0),
    ("schema_version 3.0", "cpu", column("schema_version", lambda _i, text: f"{text}.0"), "columnar", 0),
    ("beyond 2**53", "cuda", cells((0, "allocator_active_bytes", "9007199254740993"),
                                   (1, "allocator_active_bytes", "9007199254740993.0"),
                                   (2, "allocator_allocated_bytes", "18014398509481985"),
                                   (3, "timestamp_ns", "1700000000000000001.0")), "columnar", 0),
    ("not numbers", "cpu", cells((0, "pid", "0x10"), (2, "timestamp_ns", "soon"), (3, "device_id", "nan"),
                                 (4, "rank", "inf"), (5, "pid", "9223372036854775808"),
                                 (6, "allocator_change_bytes", "-9.3e18")), "rows", 6),
    ("hexadecimal only", "cpu", column("pid", lambda _i, _t: "0x1F"), "rows", 10**6),
    ("blank cells", "cuda", cells((0, "timestamp_ns", ""), (1, "event_type", " "), (2, "host", ""),
                                  (3, "metadata", ""), (4, "rank", ""), (5, "schema_version", ""),
                                  (6, "device_free_bytes", ""), (7, "context", "  "), (8, "job_id", ""),
                                  (9, "session_id", "")), "rows", 6),
    ("whitespace around texts", "cpu", cells((0, "host", "\u00a0node-0\t"), (1, "context", " spaced "),
                                             (2, "event_type", "sample "), (3, "metadata", "  {'a': 1} ")),
     "columnar", 0),
    ("rule breakers", "cuda", cells((0, "rank", "5"), (1, "device_used_bytes", str(81 * b.GIB)),
                                    (2, "allocator_reserved_bytes", "-1"), (3, "world_size", "0"),
                                    (4, "pid", "-2"), (5, "collector", " "), (6, "local_rank", "9")), "rows", 7),
    ("many bad rows", "cuda", column("timestamp_ns", lambda _i, _t: "-1"), "rows", 10**6),
    ("no identity columns", "cpu", drop("job_id", "rank", "local_rank", "world_size"), "columnar", 0),
    ("no session_id column (v2)", "cuda", lambda d: drop("session_id")(column("schema_version",
                                                                              lambda _i, _t: "2")(d)),
     "columnar", 0),
    ("no session_id column (v3)", "cpu", drop("session_id"), "columnar", 0),
    ("no metadata column", "cpu", drop("metadata"), "file", 0),
    ("no device_total_bytes column", "cuda", drop("device_total_bytes"), "file", 0),
    ("an extra column", "cpu", add("surprise", "1"), "file", 0),
    ("two extra columns", "cpu", lambda d: add("b_extra", "")(add("a_extra", "x")(d)), "file", 0),
    ("a legacy column", "cpu", add("timestamp", "1700000000.5"), "file", 0),
    ("duplicate header", "cpu", lines(_replace(0, lambda line: line.replace(b"host", b"pid"))), "file", 0),
    ("header only", "cpu", lines(lambda found: found[:1] + [b""]), "columnar", 0),
    ("header only, no newline", "cpu", lines(lambda found: found[:1]), "file", 0),
    ("empty file", "cpu", lambda _data: b"", "file", 0),
    ("quoted commas and newlines", "cpu", cells((0, "context", "a, b"), (2, "context", "two\nlines"),
                                                (3, "context", 'say "hi"\r\nthere'), (5, "timestamp_ns", "bad")),
     "rows", 1),
    ("blank lines", "cpu", lines(lambda found: _insert(3, b"", b"")(_replace(4, lambda line: line.replace(
        b"stormlog.cpu_tracker", b""))(found))), "rows", 1),
    ("lone cr line endings", "cpu", lambda data: data.replace(b"\r\n", b"\r"), "columnar", 0),
    ("bad metadata literals", "cpu", cells((0, "metadata", "{'a': 1"), (1, "metadata", "[1, 2]"),
                                           (2, "metadata", "{'a': {1, 2}, 'b': (3, 4)}"),
                                           (3, "metadata", '{"json": true, "op": "all_reduce"}'),
                                           (4, "metadata", "{'a': 2 ** 70}"), (5, "metadata", "None")),
     "columnar", 0),
    ("metadata beyond int64", "cpu", cells((0, "metadata", "{'a': 99999999999999999999}")), "file", 0),
    ("metadata of two shapes", "cpu", cells((0, "metadata", "{'a': 1}"), (1, "metadata", "{'a': 'x'}")),
     "file", 0),
    ("metadata a complex number", "cpu", cells((0, "metadata", "{'a': 1j}")), "file", 0),
    ("metadata session ids", "cpu", cells((0, "session_id", ""), (0, "metadata", "{'session_id': 'meta-s'}"),
                                          (1, "session_id", " "), (1, "metadata", "{'session_id': None}"),
                                          (2, "session_id", ""), (2, "metadata", "{'session_id': ' '}"),
                                          (3, "session_id", "")), "columnar", 0),
    ("metadata session id no string", "cpu", cells((0, "session_id", ""), (0, "metadata", "{'session_id': 3}")),
     "columnar", 0),
    ("metadata session ids of two types", "cpu", cells((0, "metadata", "{'session_id': 3}"),
                                                       (1, "metadata", "{'session_id': 's'}")), "file", 0),
    ("collective tokens in samples", "cpu", column("metadata", lambda i, t: "{'op': 'NCCL AllReduce'}"
                                                   if i % 3 == 0 else t), "columnar", 0),
    ("non-ascii metadata", "cpu", cells((0, "metadata", "{'op': 'communİcation', 'k': 'ＮＣＣＬ'}"),
                                        (1, "metadata", "{'op': 'NCC\\u004c'}"),
                                        (2, "metadata", '{"op": "all\\u005freduce"}')), "columnar", 0),
    ("non-ascii metadata, many strings", "cpu", cells((1, "metadata", _MANY_STRINGS)), "file", 0),
    ("nested metadata", "cpu", cells((0, "metadata", "{'a': " * 30 + "'nccl'" + "}" * 30)), "columnar", 0),
    ("more nested metadata", "cpu", cells((0, "metadata", "{'a': " * 60 + "'nccl'" + "}" * 60)), "file", 0),
    ("deeply nested metadata", "cpu", cells((1, "metadata", '{"a": ' * 900 + "[1]" + "}" * 900)), "file", 0),
    ("legacy rows", "cpu", drop("schema_version"), "file", 0),
    ("legacy and v4 rows among v3", "cpu", cells((0, "schema_version", ""), (2, "schema_version", "4"),
                                                 (3, "schema_version", "1")), "rows", 3),
    ("bytes that are not utf-8", "cpu", lines(_replace(3, lambda line: line.replace(b"node-0", b"node-\xff"))),
     "file", 0),
    ("a short row", "cpu", lines(_replace(4, lambda line: b",".join(line.split(b",")[:5]))), "file", 0),
    ("a long row", "cpu", lines(_replace(4, lambda line: line + b",extra")), "file", 0),
    ("first line blank", "cpu", lambda data: b"\r\n" + data, "file", 0),
    ("unterminated quote", "cpu", lambda data: data + b'3,"open', "file", 0),
    ("nul in a cell", "cpu", cells((1, "context", "nul\x00here")), "columnar", 0),
    ("cell over the csv field limit", "cpu", cells((1, "context", "x" * (csv.field_size_limit() + 1))), "file", 0),
]


def _same_frames(ours: pd.DataFrame, today: pd.DataFrame) -> None:
    assert list(ours.columns) == list(today.columns)
    assert ours.dtypes.equals(today.dtypes), (ours.dtypes, today.dtypes)
    pd.testing.assert_frame_equal(ours, today, check_categorical=False)
    for name in ours.columns:
        if isinstance(ours[name].dtype, pd.CategoricalDtype):
            assert ours[name].astype(object).equals(today[name].astype(object)), name
            assert set(ours[name].cat.categories) == set(today[name].cat.categories), name
    assert [type(m) for m in ours["metadata"]] == [type(m) for m in today["metadata"]]


@pytest.mark.parametrize(("name", "base", "edit", "path", "most_slow"), CASES, ids=[case[0] for case in CASES])
def test_columnar_equals_rows(name: str, base: str, edit: Callable[[bytes], bytes], path: str,
                              most_slow: int) -> None:
    data = edit(BASES[base]())
    ours = read_csv(data, label=LABEL, default_session_id=DEFAULT_SESSION)
    today = read_csv_rows(data, label=LABEL, default_session_id=DEFAULT_SESSION)
    assert ours.warnings == today.warnings
    _same_frames(ours.frame, today.frame)
    fast = columnar_csv(data.removeprefix(BOM), default_session_id=DEFAULT_SESSION)
    if path == "file":
        assert fast is None
        return
    assert fast is not None
    if path == "columnar":
        assert fast.slow.size == 0 and not today.warnings
    else:
        assert 0 < fast.slow.size <= most_slow and today.warnings


def test_damaged_rows_are_named_at_their_line() -> None:
    data = cells((0, "context", "two\nlines"), (2, "timestamp_ns", "soon"))(cpu_export())
    data = data.replace(b"\n3,", b"\n\n3,", 3)  # blank lines before the first three records
    ours = read_csv(data, label=LABEL, default_session_id=DEFAULT_SESSION)
    assert ours.warnings == read_csv_rows(data, label=LABEL, default_session_id=DEFAULT_SESSION).warnings
    assert ours.warnings == (f"{LABEL}:8: timestamp_ns is not a number: 'soon' (row skipped)",)


def test_metadata_dicts_are_not_shared() -> None:
    data = column("event_type", lambda _i, _t: "phase_enter")(column("metadata", lambda _i, _t: "{'a': [1]}")(
        cpu_export()))
    metadata = read_csv(data, label=LABEL, default_session_id=DEFAULT_SESSION).frame["metadata"].tolist()
    assert len(metadata) > 2 and all(m == {"a": [1]} for m in metadata)
    assert len({id(m) for m in metadata}) == len(metadata)
    assert len({id(m["a"]) for m in metadata}) == len(metadata)


_NASTY = ("", " ", "0", "-1", "7", "1.5", "-2.5", "1e3", "+3", "0x1F", "nan", "-inf", "2", "4", "3.0",
          "9223372036854775807", "9223372036854775808", "-9223372036854775809", "9007199254740993", "２",
          "1_0", "True", "None", "sample", "phase_enter", "{}", "{'a': 1}", "[1]", "{'session_id': 's'}",
          "{'op': 'all_gather'}", "{'a': [None, 'nccl']}", "a,b", "x\ny", '"q"', "\u00a0", " node-0 ")


@pytest.mark.parametrize("seed", range(60))
def test_random_cells_equal_rows(seed: int) -> None:
    rnd = random.Random(seed)
    base = BASES[rnd.choice(sorted(BASES))]()
    rows = _rows(base)
    for _ in range(rnd.randint(1, 6)):
        row = rnd.randrange(1, len(rows))
        rows[row][rnd.randrange(len(rows[0]))] = rnd.choice(_NASTY)
    data = _bytes(rows, rnd.choice(["\n", "\r\n"]))
    ours = read_csv(data, label=LABEL, default_session_id=DEFAULT_SESSION)
    today = read_csv_rows(data, label=LABEL, default_session_id=DEFAULT_SESSION)
    assert ours.warnings == today.warnings
    _same_frames(ours.frame, today.frame)
