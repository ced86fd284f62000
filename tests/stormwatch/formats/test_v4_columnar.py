"""Schema v4 JSON Lines on the columnar path give what the line-by-line path gives.

Every case writes v4 records (``make_v4_record``, checked by ``check_v4_record``)
as JSON Lines, damaged or not, and reads the buffer twice: as the loader does
(columnar, with the lines Arrow or the fast rules cannot take left to
``normalise_record``) and line by line only. Frames (values, dtypes, metadata
dicts, collective flags) and problems (line and reason) must be the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from stormwatch.events.frame import frame_from_rows
from stormwatch.formats.columnar import columnar_events
from stormwatch.formats.jsonl import _parse_buffer, _parse_rows
from stormwatch.formats.lines import index_lines
from tests import builders as b

Records = list[dict[str, Any]]
SAMPLE_META = {"collector_health_status": "healthy", "telemetry_partial": False, "collector_last_error": None,
               "collector_partial_fields": [], "backend": "cuda", "sampling_source": "torch.cuda"}
CPU_COUNTERS = {"allocated": b.GIB, "reserved": b.GIB, "device_used": b.GIB, "change": 0}
CUDA_COUNTERS = {**CPU_COUNTERS, "active": b.GIB, "inactive": 0, "device_free": b.GIB, "device_total": 4 * b.GIB}


def _job(n: int = 12, *, capabilities: dict[str, Any] = b.CUDA_CAPABILITIES,
         counters: dict[str, Any] | None = None, **kwargs: Any) -> Records:
    """Start, ``n`` samples with one shared metadata, a phase, a warning and stop (v4 records)."""
    counters = dict(CUDA_COUNTERS if counters is None else counters)
    events: list[tuple[str, dict[str, Any], str | None]] = [("start", {"reason": "begin"}, "started")]
    events += [("sample", SAMPLE_META, None)] * n
    events[4:4] = [("phase_enter", {"phase_scope": {"name": "train", "depth": 1}}, "Phase entered: train")]
    events[9:9] = [("warning", {"usage": 0.91}, "Memory usage above 90%")]
    events.append(("stop", {}, "stopped"))
    return [b.make_v4_record(capabilities=capabilities, timestamp_ns=b.START_NS + i * 1_000_000, event_type=kind,
                             metadata=meta, context=context, **counters, **kwargs)
            for i, (kind, meta, context) in enumerate(events)]


def _lines(records: Records, **dumps: Any) -> bytes:
    return b"".join(json.dumps(record, **dumps).encode() + b"\n" for record in records)


def _edit(edit: Callable[[Records], object], records: Callable[[], Records] = _job,
          **dumps: Any) -> Callable[[], bytes]:
    def build() -> bytes:
        job = records()
        edit(job)
        return _lines(job, **dumps)
    return build


def _set(index: int, **fields: Any) -> Callable[[Records], None]:
    return lambda job: job[index].update(fields)


def _caps(index: int, **fields: Any) -> Callable[[Records], None]:
    """Set (or, with ``...``, drop) capability fields of record ``index``."""
    def edit(job: Records) -> None:
        caps = job[index]["metadata"]["memory_capabilities"] = dict(job[index]["metadata"]["memory_capabilities"])
        for name, value in fields.items():
            if value is ...:
                caps.pop(name)
            else:
                caps[name] = value
    return edit


def _meta(index: int, **fields: Any) -> Callable[[Records], None]:
    return lambda job: job[index]["metadata"].update(fields)


def _all(*edits: Callable[[Records], object]) -> Callable[[Records], None]:
    def edit(job: Records) -> None:
        for one in edits:
            one(job)
    return edit


def _no_caps(job: Records) -> None:
    for record in job:
        record["metadata"] = {k: v for k, v in record["metadata"].items() if k != "memory_capabilities"}


def _drop(index: int, *names: str) -> Callable[[Records], None]:
    return lambda job: [job[index].pop(name) for name in names]


def _v3_and_legacy(job: Records) -> None:
    job[2:2] = [b.make_record(session_id="s-0", timestamp_ns=b.START_NS + 1, metadata={"x": 1})]
    job[6:6] = [b.make_legacy_record(timestamp_s=1_700_000_000.5, allocated=b.GIB)]
    job[8:8] = [b.make_record(schema_version=2, event_type="warning", metadata={"y": "nccl"})]


def _mixed_layouts() -> bytes:
    job = _job()
    return b"".join(json.dumps(record, **dumps).encode() + b"\n"
                    for record, dumps in zip(job, [{}, {"sort_keys": True}, {"separators": (",", ":")}] * 9,
                                             strict=False))


CPU = {"capabilities": b.CPU_CAPABILITIES, "counters": CPU_COUNTERS}
CASES: dict[str, Callable[[], bytes]] = {
    "clean cuda": lambda: _lines(_job()),
    "clean cuda, sorted keys (sink)": lambda: _lines(_job(), sort_keys=True),
    "clean cuda, compact": lambda: _lines(_job(), separators=(",", ":")),
    "clean cpu, null counters": lambda: _lines(_job(**CPU)),
    "layouts mixed line by line": _mixed_layouts,
    "metadata differs per sample": _edit(lambda job: [r["metadata"].update(step=i) for i, r in enumerate(job)]),
    "metadata key order differs": _edit(lambda job: job[3].update(metadata=dict(reversed(job[3]["metadata"].items())))),
    "nested metadata key": _edit(_set(5, metadata={**SAMPLE_META, "inner": {"metadata": {"a": 1}},
                                                   "memory_capabilities": b.CUDA_CAPABILITIES})),
    "v3, v2 and legacy lines among v4": _edit(_v3_and_legacy),
    "core counter null (allowed)": _edit(_set(3, allocator_allocated_bytes=None, allocator_change_bytes=None)),
    "core counter absent": _edit(_drop(3, "device_used_bytes")),
    "nullable counter absent": _edit(_drop(4, "allocator_active_bytes")),
    "session id null, from metadata": _edit(_all(_set(2, session_id=None),
                                                 lambda job: job[2]["metadata"].update(session_id="meta-s"))),
    "unknown top-level field": _edit(_set(6, surprise=1)),
    "rank null": _edit(_set(6, rank=None)),
    "world size absent": _edit(_drop(6, "world_size")),
    "metadata null": _edit(_set(7, metadata=None)),
    "capabilities null": _edit(lambda job: job[5]["metadata"].update(memory_capabilities=None)),
    "capabilities a string": _edit(lambda job: job[5]["metadata"].update(memory_capabilities="cuda")),
    "capabilities a string everywhere": _edit(lambda job: [r["metadata"].update(memory_capabilities="x") for r in job]),
    "capability field missing": _edit(_caps(5, backend=...)),
    "two capability fields missing": _edit(_all(_caps(5, backend=..., supports_bounded_profiling=...),
                                                _caps(7, sampling_source=...))),
    "capability field null": _edit(_caps(5, backend=None)),
    "capability field null and another absent": _edit(_all(_caps(5, supports_device_used=None),
                                                            _caps(6, supports_device_used=...))),
    "unknown capability fields": _edit(_all(_caps(5, zeta=1, alpha=None), _caps(6, alpha=True))),
    "capability string not a string": _edit(lambda job: [_caps(i, sampling_source=3)(job) for i in range(len(job))]),
    "capability string blank": _edit(_caps(5, telemetry_collector=" \t")),
    "capability string looks like a timestamp": _edit(
        lambda job: [_caps(i, sampling_source="2024-01-01T00:00:00")(job) for i in range(len(job))]),
    "capability bool not a bool": _edit(lambda job: [_caps(i, supports_device_free=1)(job) for i in range(len(job))]),
    "capability bool null": _edit(_caps(5, supports_fragmentation_analysis=None)),
    "counter with capability false": _edit(_all(*[_caps(5 + i, **{cap: False})
                                                  for i, cap in enumerate(b.V4_COUNTER_CAPABILITY.values())])),
    "change with allocated unsupported": _edit(_all(_caps(5, supports_allocator_allocated=False),
                                                    _set(5, allocator_allocated_bytes=None))),
    "capabilities absent: inferred": _edit(_no_caps),
    "capabilities absent, cpu counters": _edit(_no_caps, lambda: _job(**CPU)),
    "capabilities absent on some lines": _edit(lambda job: job[3].update(metadata=dict(SAMPLE_META))),
    "inferred, backend from collector": _edit(_all(_no_caps, lambda job: [r["metadata"].pop("backend", None)
                                                                          for r in job])),
    "inferred, collective collector": _edit(_all(_no_caps, _set(3, collector="stormlog.nccl_tracker"))),
    "inferred, sampling source blank": _edit(_all(_no_caps, _meta(3, sampling_source=""))),
    "inferred, sampling source null": _edit(_all(_no_caps, _meta(3, sampling_source=None))),
    "inferred, sampling source an object": _edit(_all(_no_caps, *[_meta(i, sampling_source={"nccl": 1})
                                                                  for i in range(16)])),
    "inferred, collector blank": _edit(_all(_no_caps, _set(3, collector=" "))),
    "inferred, change without allocated": _edit(_all(_no_caps, _set(3, allocator_allocated_bytes=None))),
    "v4 rank out of range": _edit(_set(3, rank=2, world_size=2, local_rank=2)),
    "v4 used above total": _edit(_set(3, device_used_bytes=5 * b.GIB)),
    "non-ASCII and escapes in metadata": _edit(lambda job: [r["metadata"].update(note="ünï \\ \"q\" 🚀")
                                                            for r in job]),
    "non-ASCII kept as is": _edit(lambda job: [r["metadata"].update(note="ünï 🚀") for r in job], ensure_ascii=False),
    "metadata key text inside strings": _edit(_all(_set(3, context=', "metadata": {}}'),
                                                   _meta(4, note='{"metadata": 1}'))),
    "CRLF line endings": lambda: _lines(_job()).replace(b"\n", b"\r\n"),
    "a malformed line": lambda: _lines(_job()) + b'{"schema_version": 4, "timestamp_ns": \n' + _lines(_job(2)),
}
#: Cases whose bad rows break several rules at once, where the first one named may be worded differently.
LINES_ONLY: set[str] = set()


def _plain(frame: pd.DataFrame) -> dict[str, list[Any]]:
    return {name: [None if value is None or (isinstance(value, float) and value != value) or value is pd.NA
                   else value for value in frame[name].tolist()] for name in frame.columns}


def _kinds(frame: pd.DataFrame) -> list[str]:
    return [f"category[{frame[name].cat.categories.dtype}]" if isinstance(frame[name].dtype, pd.CategoricalDtype)
            else str(frame[name].dtype) for name in frame.columns]


@pytest.mark.parametrize("name", list(CASES))
def test_v4_columnar_equals_line_by_line(name: str) -> None:
    data = CASES[name]()
    lines = index_lines(data)
    fast, fast_problems = _parse_buffer(data, default_session_id="default")
    rows, _, slow_problems = _parse_rows(data, lines, np.arange(lines.count), default_session_id="default")
    slow = frame_from_rows(rows)
    assert _kinds(fast) == _kinds(slow)
    assert _plain(fast) == _plain(slow)
    if name in LINES_ONLY:
        assert [line for line, _ in fast_problems] == [line for line, _ in sorted(slow_problems)]
    else:
        assert fast_problems == sorted(slow_problems)


@pytest.mark.parametrize("name", [name for name in CASES if name != "a malformed line"])
def test_v4_lines_take_the_columnar_path(name: str) -> None:
    data = CASES[name]()
    lines = index_lines(data)
    result = columnar_events(data, lines, default_session_id="default")
    records = [json.loads(data[start:end]) for start, end in zip(lines.starts, lines.ends, strict=True)]
    if result is None:  # Arrow refuses a value whose type changes from line to line
        assert name in {"capabilities a string", "metadata null"}
        return
    slow = [i for i, record in enumerate(records) if record.get("schema_version") not in (2, 3, 4)]
    assert result.rest_positions.tolist() == slow


@pytest.mark.parametrize("dumps", [{}, {"sort_keys": True}, {"separators": (",", ":")}], ids=["v4", "sink", "compact"])
def test_samples_with_the_same_metadata_share_one_dict(dumps: dict[str, Any]) -> None:
    data = _lines(_job(50), **dumps)
    frame, _ = _parse_buffer(data, default_session_id="default")
    samples = frame["metadata"][frame["event_type"] == "sample"].tolist()
    assert len(samples) == 50 and len({id(meta) for meta in samples}) == 1
    assert samples[0]["memory_capabilities"] == b.CUDA_CAPABILITIES
    assert frame["schema_version"].eq(4).all()
