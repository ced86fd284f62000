"""JSON documents on the columnar path give the events and warnings of the record-by-record path.

Every case is a JSON document written by stormlog's own writers (``json.dump(records,
indent=2, default=str)`` as the trackers' ``export_events`` writes, or the CPU tracker's
export itself), intact or damaged in one way. :func:`read_json` (columnar where it can)
must equal :func:`_record_by_record` (every record through ``normalise_record``, as
JSON documents were read before the columnar path): the same frame, dtypes included,
and the same warnings word for word. Only records that are not schema v2/v3 objects,
or that the columnar path cannot hold or rejects, may take the record-by-record path.
"""

from __future__ import annotations

import copy
import functools
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stormwatch.events.frame import frame_from_rows
from stormwatch.events.records import normalise_record
from stormwatch.events.schema import COUNTER_COLUMNS, INT_COLUMNS, STRING_COLUMNS, RecordError
from stormwatch.formats.bad_input import describe_problems
from stormwatch.formats.json_document import read_json, records_of
from stormwatch.formats.json_table import record_table
from stormwatch.formats.json_value import parse_json_value
from tests.builders import (
    DEFAULT_ALERTS,
    DEFAULT_PHASES,
    GIB,
    Alert,
    make_legacy_record,
    make_v4_record,
    timeline_records,
    write_cpu_tracker_export,
    write_json,
)
from tests.model_builders import gap_samples, write_rank

LABEL = "job/rank_1/events.json"
DEFAULT_SESSION = "default-session"
INT_FIELDS = (*INT_COLUMNS, *COUNTER_COLUMNS)
Records = list[Any]
Damage = Callable[[Records], tuple[Records, set[int]]]  # the damaged records, and which were touched


def _record_by_record(data: bytes) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """JSON documents as read before the columnar path: ``normalise_record`` on each record."""
    rows, problems = [], []
    for number, record in enumerate(records_of(parse_json_value(data)), start=1):
        try:
            rows.append(normalise_record(record, default_session_id=DEFAULT_SESSION))
        except RecordError as exc:
            problems.append((number, str(exc)))
        except RecursionError:
            problems.append((number, "metadata nested too deeply"))
    return frame_from_rows(rows), tuple(describe_problems(LABEL, problems, where="record"))


def _assert_same_frames(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, want, check_categorical=False)  # values, and every other dtype
    for name in STRING_COLUMNS:
        assert isinstance(got[name].dtype, pd.CategoricalDtype), name
        assert got[name].cat.categories.dtype == want[name].cat.categories.dtype, name


# --------------------------------------------------------------------------- documents

_ABSENT = object()


@functools.cache
def _base_records() -> tuple[dict[str, Any], ...]:
    """A rank's records (phases, alerts, a collective marker, a metadata session id) written
    by :func:`tests.builders.write_json`, read back."""
    alerts = (*DEFAULT_ALERTS, Alert(2.5, "warning", "NCCL all_reduce slow", {"op": ["allreduce"]}))
    samples = gap_samples([0, GIB, 2 * GIB, GIB, 0, 0, GIB, 0])  # device total 80 GiB
    records = timeline_records(samples=samples, phases=DEFAULT_PHASES, alerts=alerts, rank=1, world_size=2,
                               job_id="job-7", host="node-0")
    records[3]["metadata"] = {**records[3]["metadata"], "session_id": "from-metadata"}
    with tempfile.TemporaryDirectory() as folder:
        return tuple(json.loads(write_json(Path(folder) / "events.json", records).read_text()))


def _records() -> Records:
    return copy.deepcopy(list(_base_records()))


def _set(position: int, field: str, value: Any = _ABSENT) -> Damage:
    """Record ``position``'s ``field`` set to ``value`` (or deleted)."""

    def damage(records: Records) -> tuple[Records, set[int]]:
        if value is _ABSENT:
            del records[position][field]
        else:
            records[position][field] = value
        return records, {position}

    return damage


def _insert(position: int, record: Any) -> Damage:
    return lambda records: ([*records[:position], record, *records[position:]], {position})


def _each(position: int, change: Callable[[dict[str, Any]], Any], *, valid: bool = False) -> Damage:
    """``change`` applied to every record from ``position`` on; ``valid`` changes keep the
    records valid, so they must stay on the columnar path."""

    def damage(records: Records) -> tuple[Records, set[int]]:
        for record in records[position:]:
            change(record)
        return records, set() if valid else set(range(position, len(records)))

    return damage


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"op": "nccl"}
    for _ in range(levels):
        value = {"inner": [value]}
    return value


WRONG_TYPES = (True, 1.5, 2.0, "7", None, [], {}, 2**63, -(2**63) - 1)
DAMAGES: dict[str, Damage] = {
    **{f"{field}={value!r}": _set(4, field, value) for field in (*STRING_COLUMNS, *INT_FIELDS) for value in
       ((False, 1.0, 3, [], "") if field in STRING_COLUMNS else WRONG_TYPES)},
    **{f"{field} absent": _set(4, field) for field in (*STRING_COLUMNS, *INT_FIELDS, "metadata")},
    "context blank": _set(4, "context", "  "),
    "session_id blank, metadata session_id": _each(3, lambda r: r.update(session_id=" "), valid=True),
    "session_id null, metadata session_id": _each(0, lambda r: r.update(session_id=None), valid=True),
    "session_id null, metadata session_id blank": _each(
        0, lambda r: r.update(session_id=None, metadata={**r["metadata"], "session_id": " "}), valid=True),
    "session_id null, metadata session_id a number": _each(
        0, lambda r: r.update(session_id=None, metadata={**r["metadata"], "session_id": 5}), valid=True),
    "schema v2 (no session_id)": _each(0, lambda r: r.update(schema_version=2) or r.pop("session_id"), valid=True),
    "schema_version true": _set(4, "schema_version", True),
    "schema_version 5": _set(4, "schema_version", 5),
    "local_rank and world_size absent": _each(2, lambda r: (r.pop("local_rank"), r.pop("world_size"))),
    "rank absent, local_rank 1": _each(2, lambda r: r.pop("rank"), valid=True),
    "rank >= world_size": _set(4, "rank", 2),
    "local_rank negative": _set(4, "local_rank", -1),
    "world_size 0": _set(4, "world_size", 0),
    "counter negative": _set(4, "allocator_reserved_bytes", -1),
    "change negative": _set(4, "allocator_change_bytes", -5),
    "used above total": _set(4, "device_used_bytes", 81 * GIB),
    "free above total": _set(4, "device_free_bytes", 81 * GIB),
    "timestamp negative": _set(4, "timestamp_ns", -1),
    "pid -2": _set(4, "pid", -2),
    "surrogate in host": _set(4, "host", "node-\udfff"),
    "surrogate in context": _set(4, "context", "phase \ud800"),
    "unknown field": _set(4, "extra", 1),
    "unknown field null": _set(4, "extra", None),
    "unknown field everywhere": _each(0, lambda r: r.update(zz=None)),
    "unknown field named like a metadata key": _set(4, "op", None),
    "metadata a string": _set(4, "metadata", "{}"),
    "metadata a list": _set(4, "metadata", [1]),
    "metadata null": _set(4, "metadata", None),
    "metadata of varying shape": _set(4, "metadata", {"phase_scope": 3}),
    "metadata with a number where others hold text": _set(5, "metadata", {"op": 3}),
    "metadata empty everywhere": _each(0, lambda r: r.update(metadata={}), valid=True),
    "metadata nested with a collective token": _set(4, "metadata", {"a": {"b": [{"c": "All-Reduce"}]}}),
    "metadata nested deeply": _set(4, "metadata", _deep(100)),
    "metadata with a surrogate": _set(4, "metadata", {"note": "\udfff"}),
    "metadata with a huge int": _set(4, "metadata", {"n": 2**70}),
    "legacy record": _insert(3, make_legacy_record(timestamp_s=1.7e9 + 1.5, allocated=GIB, rank=1, world_size=2)),
    "legacy record, broken": _insert(3, {"timestamp": "soon", "memory_allocated": -1}),
    "v4 record": _insert(2, make_v4_record(rank=1, world_size=2, allocated=GIB, reserved=GIB, change=0,
                                           device_used=GIB, device_total=80 * GIB, device_free=79 * GIB)),
    "v4 record, broken": _insert(2, {**make_v4_record(allocated=1, reserved=1, change=0, device_used=1),
                                     "world_size": 0}),
    "not an object": _insert(1, 42),
    "null record": _insert(1, None),
    "a list record": _insert(1, [1, 2]),
    "every record broken": _each(0, lambda r: r.update(event_type="")),
}


def _document(records: Records, shape: str) -> bytes:
    payload: Any = records
    if shape == "events object":
        payload = {"source": "tf-cli", "events": records}
    elif shape == "single record":
        payload = records[4]
    return json.dumps(payload, indent=2, default=str).encode()


def _check(data: bytes, *, may_be_slow: set[int]) -> None:
    got = read_json(data, label=LABEL, default_session_id=DEFAULT_SESSION)
    want_frame, want_warnings = _record_by_record(data)
    _assert_same_frames(got.frame, want_frame)
    assert got.warnings == want_warnings
    records = records_of(parse_json_value(data))
    fast = record_table(records, default_session_id=DEFAULT_SESSION)
    slow = set(range(len(records))) if fast is None else set(fast.rest.tolist())
    assert slow <= may_be_slow, sorted(slow - may_be_slow)


@pytest.mark.parametrize("shape", ["array", "events object", "single record"])  # single: record 4 alone
@pytest.mark.parametrize("name", list(DAMAGES))
def test_damaged_documents_match_the_record_by_record_path(name: str, shape: str) -> None:
    records, touched = DAMAGES[name](_records())
    if shape == "single record":
        touched = {0} if 4 in touched else set()
    _check(_document(records, shape), may_be_slow=set(range(len(records))) if name in _WHOLE_FILE else touched)


#: Damage that sends the whole file the record-by-record way (its metadata form no one Arrow type).
_WHOLE_FILE = {f"metadata {how}" for how in ("of varying shape", "with a number where others hold text",
                                             "nested deeply", "with a surrogate", "with a huge int")}


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda p: write_cpu_tracker_export(p / "cpu_events.json", samples=12, rank=1, world_size=4,
                                                        job_id="j", phases=DEFAULT_PHASES, alerts=DEFAULT_ALERTS),
                     id="cpu tracker export"),
        pytest.param(lambda p: write_cpu_tracker_export(p / "cpu_events.json", samples=3, lifecycle=False),
                     id="cpu tracker export, local"),
        pytest.param(lambda p: write_rank(p, 3, 8, fmt="json", samples=gap_samples([0, GIB, 2 * GIB]),
                                          phases=DEFAULT_PHASES, alerts=DEFAULT_ALERTS), id="rank records"),
        pytest.param(lambda p: write_rank(p, 2, 4, fmt="cpu", samples=gap_samples([0, GIB])), id="rank cpu export"),
        pytest.param(lambda p: write_json(p / "events.json", timeline_records(samples=5, schema_version=2)),
                     id="schema v2 records"),
        pytest.param(lambda p: write_json(p / "events.json", timeline_records(samples=5), wrapper={}),
                     id="events object"),
        pytest.param(lambda p: write_json(p / "events.json", []), id="empty array"),
    ],
)
def test_stormlog_exports_take_the_columnar_path(tmp_path: Path, write: Callable[[Path], Path]) -> None:
    _check(write(tmp_path).read_bytes(), may_be_slow=set())


def test_clean_records_never_take_the_slow_path() -> None:
    records = _records()
    fast = record_table(records, default_session_id=DEFAULT_SESSION)
    assert fast is not None and fast.rest.size == 0
    assert np.array_equal(fast.positions, np.arange(len(records)))


def test_broken_array_is_salvaged_as_before() -> None:
    data = _document(_records(), "array")
    cut = data[: data.rindex(b'"schema_version"')]
    got = read_json(cut, label=LABEL, default_session_id=DEFAULT_SESSION)
    assert got.warnings[0].startswith(f"{LABEL}: malformed JSON at line")
    assert len(got.frame) == len(_base_records()) - 1


# --------------------------------------------------------------------------- property


_scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
            | st.sampled_from(["", " ", "nccl", "sample", "from-metadata", "\udfff", 2**64, -(2**63)]))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(["op", "session_id", "rank", "x"]), inner, max_size=3),
                       max_leaves=6)
_texts = st.text(max_size=8) | st.sampled_from(["", " ", "nccl", "All-Reduce", "from-metadata"])
_NAMES = (*STRING_COLUMNS, *INT_FIELDS, "metadata", "surprise", "timestamp", "memory_allocated")


@st.composite
def _documents(draw: st.DrawFn) -> bytes:
    """A stormlog document with a few records edited: fields set to any JSON value or
    deleted, metadata fields set, or the record replaced by any JSON value."""
    records: Records = _records()
    for position, record in enumerate(records):
        edit = draw(st.sampled_from(["none", "none", "fields", "metadata", "replace"]))
        if edit == "fields":
            for name, value in draw(st.lists(st.tuples(st.sampled_from(_NAMES), _values | st.just(None)), max_size=2)):
                if draw(st.booleans()):
                    record.pop(name, None)
                else:
                    record[name] = value
        elif edit == "metadata":
            record["metadata"] = {**record["metadata"], **draw(st.dictionaries(st.sampled_from(
                ["note", "session_id", "tag"]), _texts | _texts | _texts | _values, max_size=2))}
        elif edit == "replace":
            records[position] = draw(_values)
    return json.dumps(records, indent=2, default=str).encode()


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(_documents())
def test_edited_documents_match_the_record_by_record_path(data: bytes) -> None:
    got = read_json(data, label=LABEL, default_session_id=DEFAULT_SESSION)
    want_frame, want_warnings = _record_by_record(data)
    _assert_same_frames(got.frame, want_frame)
    assert got.warnings == want_warnings
