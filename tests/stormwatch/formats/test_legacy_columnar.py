"""Legacy records (no ``schema_version``) on the columnar path give the events and warnings of the
record-by-record path.

The records are written by stormlog's own code: the ``events.json`` of an OOM flight-recorder dump
written by stormlog 0.4.3's ``MemoryTracker`` (:mod:`tests.stormlog43_oom`), and ``asdict`` of 0.3.5's
``TrackingEvent`` (:func:`tests.builders.make_legacy_record`). Each is read intact or damaged in one
way; :func:`read_json` must equal every record through ``normalise_record``: the same frame, dtypes
included, and the same warnings word for word. Only damaged records may take the record-by-record path.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stormwatch.formats.json_document import read_json, records_of
from stormwatch.formats.json_table import record_table
from stormwatch.formats.json_value import parse_json_value
from stormwatch.formats.legacy_table import LEGACY_KEYS, legacy_table
from tests.builders import GIB, make_legacy_record
from tests.stormlog43_oom import RankSpec, write_oom_job
from tests.stormwatch.formats.test_json_columnar import DEFAULT_SESSION, LABEL, _assert_same_frames, _record_by_record

Records = list[Any]
_ABSENT = object()


@pytest.fixture(scope="module")
def dump_records(tmp_path_factory: pytest.TempPathFactory) -> Records:
    """The records of a dump 0.4.3's flight recorder wrote (rank 1 of 2 runs out of memory)."""
    job = write_oom_job(tmp_path_factory.mktemp("legacy") / "job", [RankSpec(0, sink=False),
                                                                     RankSpec(1, sink=False, oom=True, buffer=40)],
                        seconds=0.4)
    (events,) = job.glob("rank_1/oom_dumps/oom_dump_*/events.json")
    records = json.loads(events.read_text())
    assert records and all(record.keys() <= LEGACY_KEYS for record in records)
    # the recorder's first records are the tracker's start, whose counters are null: kept as written
    return [record for record in records if record["memory_allocated"] is not None]


def _tracking_events() -> Records:
    """``asdict`` of stormlog 0.3.5's ``TrackingEvent``: session id and metadata null, no backend."""
    return [make_legacy_record(timestamp_s=1.7e9 + step * 0.25, allocated=(step % 5) * GIB, reserved=6 * GIB,
                               event_type="peak" if step == 7 else "sample", change=GIB if step % 5 else -4 * GIB,
                               context="train" if step == 7 else None, job_id="job-7", rank=1, world_size=2)
            for step in range(12)]


def _check(records: Records, *, may_be_slow: set[int]) -> None:
    data = json.dumps(records, indent=2, default=str).encode()
    got = read_json(data, label=LABEL, default_session_id=DEFAULT_SESSION)
    want_frame, want_warnings = _record_by_record(data)
    _assert_same_frames(got.frame, want_frame)
    assert got.warnings == want_warnings
    parsed = records_of(parse_json_value(data))
    fast = record_table(parsed, default_session_id=DEFAULT_SESSION)
    rest = np.arange(len(parsed)) if fast is None else fast.rest
    legacy = legacy_table(parsed, rest, default_session_id=DEFAULT_SESSION)
    slow = set(rest.tolist()) if legacy is None else set(legacy.rest.tolist())
    assert slow <= may_be_slow, sorted(slow - may_be_slow)


Damage = Callable[[Records], set[int]]  # changes the records in place; returns those that may be slow


def _set(field: str, value: Any = _ABSENT, *, valid: bool = False) -> Damage:
    """Record 4's ``field`` set to ``value`` (or deleted); ``valid``: it stays on the columnar path."""

    def damage(records: Records) -> set[int]:
        if value is _ABSENT:
            records[4].pop(field, None)
        else:
            records[4][field] = value
        return set() if valid else {4}

    return damage


def _meta(**values: Any) -> Damage:
    """Record 4's metadata given ``values``: read as stormlog reads them, still columnar."""

    def damage(records: Records) -> set[int]:
        records[4]["metadata"] = {**(records[4].get("metadata") or {}), **values}
        return set()

    return damage


def _meta_slow(**values: Any) -> Damage:
    def damage(records: Records) -> set[int]:
        _meta(**values)(records)
        return {4}

    return damage


def _all(change: Callable[[dict[str, Any]], Any], *, valid: bool = True) -> Damage:
    def damage(records: Records) -> set[int]:
        for record in records:
            change(record)
        return set() if valid else set(range(len(records)))

    return damage


WRONG = (True, 1.5, "7", [], {}, 2**63)
DAMAGES: dict[str, Damage] = {
    "intact": lambda records: set(),
    **{f"{field}={value!r}": _set(field, value) for field in
       ("memory_allocated", "memory_reserved", "memory_change", "device_id", "rank", "local_rank", "world_size")
       for value in (*WRONG, None) if not (value is None and field in ("rank", "local_rank", "world_size"))},
    **{f"{field} null (the record's default)": _set(field, None, valid=True)
       for field in ("rank", "local_rank", "job_id", "session_id", "context", "device_total", "backend", "metadata")},
    "world_size null (1, below rank 1)": _set("world_size", None),
    **{f"{field} absent": _set(field, valid=True) for field in sorted(LEGACY_KEYS - {"timestamp", "world_size"})},
    "world_size absent (1, below rank 1)": _set("world_size"),
    "timestamp absent": _set("timestamp"),
    **{f"timestamp={value!r}": _set("timestamp", value) for value in ("soon", None, True, [], 1e300, -1.5, 10**400)},
    "timestamp an int": _set("timestamp", 1_700_000_001, valid=True),
    "timestamp_ns too": _set("timestamp_ns", 1_700_000_001_000_000_001, valid=True),
    "timestamp_ns a float": _set("timestamp_ns", 1.5e18),
    "timestamp beyond 64 bits of ns": _set("timestamp", 9.3e9),
    **{f"{field}={value!r}": _set(field, value) for field in ("event_type", "job_id", "context", "session_id")
       for value in (3, [], "", " ", "x\udfff") if not (field == "context" and value in ("", " "))},
    "event_type null": _set("event_type", None),
    "context blank": _set("context", " ", valid=True),
    "session_id blank, default used": _set("session_id", " ", valid=True),
    "device_total below allocated": _set("device_total", GIB // 2),
    "device_total a string": _set("device_total", "80 GiB"),
    "counter negative": _set("memory_reserved", -1),
    "rank >= world_size": _set("rank", 9),
    "backend rocm": _set("backend", " ROCm ", valid=True),
    "backend unknown, device -1": _all(lambda r: r.update(backend="tpu", device_id=-1)),
    "backend a number": _set("backend", 3, valid=True),
    "unknown key": _set("extra", 1),
    "a schema_version key": _set("schema_version", 9),
    "metadata_ prefixed key": _set("metadata_host", "node-9"),
    "metadata a list": _set("metadata", [1]),
    "metadata a string": _set("metadata", "{}"),
    "metadata identity": _meta(job_id="j-meta", rank=1, local_rank=0, world_size=2),
    "metadata identity only (record's null)": _all(
        lambda r: r.update(job_id=None, rank=None, local_rank=None, world_size=None,
                           metadata={**(r.get("metadata") or {}), "job_id": "j-meta", "rank": 1, "world_size": 3})),
    "metadata session id (record's null)": _all(
        lambda r: r.update(session_id=None, metadata={**(r.get("metadata") or {}), "session_id": "from-meta"})),
    "metadata session id a number": _all(
        lambda r: r.update(session_id=None, metadata={**(r.get("metadata") or {}), "session_id": 5})),
    "metadata host and pid": _all(lambda r: r.update(metadata={**(r.get("metadata") or {}), "host": "gpu-7",
                                                               "pid": 4242})),
    "metadata host blank": _meta_slow(host=""),
    "metadata host null": _meta_slow(host=None),
    "metadata pid a string": _meta_slow(pid="4242"),
    "metadata backend mps": _all(lambda r: (r.pop("backend", None),
                                            r.update(metadata={**(r.get("metadata") or {}), "backend": "mps"}))),
    **{f"metadata {name}": _all(lambda r, n=name: (r.pop("device_total", None), r.update(
        metadata={**(r.get("metadata") or {}), n: 80 * GIB}))) for name in ("total_memory", "device_total",
                                                                          "total_bytes")},
    "metadata total null": _all(lambda r: (r.pop("device_total", None),
                                           r.update(metadata={**(r.get("metadata") or {}), "total_bytes": None}))),
    "metadata collective token": _meta(op="NCCL all_reduce"),
    "metadata with a surrogate (Arrow holds no such metadata)": lambda records: (
        _meta(note="\udfff")(records), set(range(len(records))))[1],
    "metadata of varying shape": lambda records: (
        records[4].update(metadata={"collector_health_status": 3}), set(range(len(records))))[1],
    "not an object": lambda records: (records.insert(2, 42), {2})[1],
}


@pytest.mark.parametrize("base", ["dump", "tracking events"])
@pytest.mark.parametrize("name", list(DAMAGES))
def test_damaged_legacy_records_match_the_record_by_record_path(name: str, base: str, dump_records: Records
                                                                ) -> None:
    records = copy.deepcopy(dump_records) if base == "dump" else _tracking_events()
    may_be_slow = DAMAGES[name](records)
    _check(records, may_be_slow=may_be_slow)


def test_a_real_dump_reads_every_event_on_the_columnar_path(dump_records: Records) -> None:
    _check(copy.deepcopy(dump_records), may_be_slow=set())
    frame = read_json(json.dumps(dump_records).encode(), label=LABEL, default_session_id=DEFAULT_SESSION).frame
    assert len(frame) == len(dump_records)
    assert set(frame["collector"]) == {"stormlog.cuda_tracker"}
    assert frame["device_total_bytes"].notna().all()


def test_legacy_and_schema_records_mixed_keep_their_order(dump_records: Records) -> None:
    from tests.builders import make_v4_record

    records = copy.deepcopy(dump_records[:6])
    records.insert(3, make_v4_record(rank=1, world_size=2, allocated=GIB, reserved=GIB, change=0,
                                     device_used=GIB, device_total=80 * GIB, device_free=79 * GIB))
    _check(records, may_be_slow=set())


# --------------------------------------------------------------------------- property

_scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6)
            | st.sampled_from(["", " ", "cuda", "cpu", "sample", "nccl", "\udfff", 2**64, -(2**63), 1.7e9]))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=2)
                       | st.dictionaries(st.sampled_from(["op", "session_id", "rank", "host", "pid"]), inner,
                                         max_size=2), max_leaves=4)
_META_NAMES = ["job_id", "rank", "local_rank", "world_size", "session_id", "pid", "host", "backend",
               "total_memory", "device_total", "total_bytes", "note"]


@st.composite
def _edited(draw: st.DrawFn, base: Records) -> Records:
    records = copy.deepcopy(base[:8])
    for record in records:
        edit = draw(st.sampled_from(["none", "none", "fields", "metadata"]))
        if edit == "fields":
            for name, value in draw(st.lists(st.tuples(st.sampled_from(sorted(LEGACY_KEYS)), _values), max_size=2)):
                if draw(st.booleans()):
                    record.pop(name, None)
                else:
                    record[name] = value
        elif edit == "metadata":
            record["metadata"] = {**(record.get("metadata") or {}),
                                  **draw(st.dictionaries(st.sampled_from(_META_NAMES), _values, max_size=3))}
    return records


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_edited_legacy_records_match_the_record_by_record_path(data: st.DataObject, dump_records: Records) -> None:
    base = data.draw(st.sampled_from(["dump", "tracking"]))
    records = data.draw(_edited(dump_records if base == "dump" else _tracking_events()))
    _check(records, may_be_slow=set(range(len(records))))
