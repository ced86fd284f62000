"""Differential adapter: the reference loader's and stormwatch's results as one plain shape.

Both :func:`reference` and :func:`ours` return::

    {"sessions": [dict(session_id, status, started_at_ns, ended_at_ns, host, pid, job_id,
                       rank, local_rank, world_size, source, event_count)],
     "selected_session_id": str | None,
     "events": [tuple(EVENT_FIELDS values)],       # (+ metadata dict if asked)
     "warnings": [str], "sources_loaded": [str],
     "markers": [dataclasses.asdict(TimelineMarker)]}

with only Python scalars (int, float, str, bool, None), lists and dicts inside, so
``==`` compares them number for number. :func:`canonical` renames the path-derived
``legacy-…`` session ids, which DESIGN.md allows to differ, before comparing.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

SESSION_FIELDS = ("session_id", "status", "started_at_ns", "ended_at_ns", "host", "pid",
                  "job_id", "rank", "local_rank", "world_size", "source")
EVENT_FIELDS = (
    "session_id", "timestamp_ns", "event_type", "collector", "sampling_interval_ms", "pid",
    "host", "device_id", "allocator_allocated_bytes", "allocator_reserved_bytes",
    "allocator_active_bytes", "allocator_inactive_bytes", "allocator_change_bytes",
    "device_used_bytes", "device_free_bytes", "device_total_bytes", "context", "job_id",
    "rank", "local_rank", "world_size")
STRING_EVENT_FIELDS = frozenset({"session_id", "event_type", "collector", "host", "context",
                                 "job_id"})
INT_EVENT_FIELDS = frozenset(EVENT_FIELDS) - STRING_EVENT_FIELDS
INT_SESSION_FIELDS = frozenset({"started_at_ns", "ended_at_ns", "pid", "rank", "local_rank",
                                "world_size", "event_count"})
RESULT_KEYS = ("sessions", "selected_session_id", "events", "warnings", "sources_loaded",
               "markers")


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))  # None, NaN, pandas.NA, NaT
    except (TypeError, ValueError):
        return False


def plain(value: Any) -> Any:
    """Recursively turn numpy/pandas scalars, NA/NaN, tuples, arrays and dataclasses
    into JSON-like Python values (NA/NaN -> None, tuples/arrays -> lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(item) for item in value]
    if getattr(value, "ndim", 0):
        return [plain(item) for item in value.tolist()]
    if _missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def _as_int(value: Any, name: str) -> int | None:
    value = plain(value)
    if value is None:
        return None
    if isinstance(value, float):
        if not value.is_integer():
            raise AssertionError(f"{name}: non-integral value {value!r}")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise AssertionError(f"{name}: expected an int, got {value!r}")
    return value


def _event_tuple(get: Any, metadata: Any = None, *, include_metadata: bool) -> tuple:
    cells = tuple(_as_int(get(name), name) if name in INT_EVENT_FIELDS else plain(get(name))
                  for name in EVENT_FIELDS)
    return (*cells, plain(metadata) or {}) if include_metadata else cells


def _session_dict(summary: Any, event_count: int) -> dict[str, Any]:
    out = {name: plain(getattr(summary, name)) for name in SESSION_FIELDS}
    out["event_count"] = event_count
    for name in INT_SESSION_FIELDS:
        out[name] = _as_int(out[name], name)
    return out


def reference(paths: Iterable[str | Path], session_id: str | None = None, *,
              include_metadata: bool = False) -> dict[str, Any]:
    """Run stormlog 0.3.5's ``load_distributed_artifacts(paths, session_id)``."""
    from stormlog.tui.distributed_diagnostics import load_distributed_artifacts

    result = load_distributed_artifacts([Path(p) for p in paths], session_id)
    return {
        "sessions": [_session_dict(s.summary, len(s.events)) for s in result.sessions],
        "selected_session_id": result.selected_session_id,
        "events": [_event_tuple(lambda n, e=e: getattr(e, n), e.metadata,
                                include_metadata=include_metadata) for e in result.events],
        "warnings": [str(w) for w in result.warnings],
        "sources_loaded": [str(s) for s in result.sources_loaded],
        "markers": [plain(dataclasses.asdict(m)) for m in result.markers],
    }


def ours(loaded: Any, *, include_metadata: bool = False) -> dict[str, Any]:
    """Convert ``stormwatch.load_artifacts(...)``'s result (events DataFrame with the
    EVENT_FIELDS columns + "metadata"; tuples of frozen dataclasses) to the same shape."""
    frame = loaded.events
    wanted = [*EVENT_FIELDS, *(["metadata"] if include_metadata else [])]
    absent = [name for name in wanted if name not in frame.columns]
    if absent:
        raise AssertionError(f"stormwatch events lack columns: {absent}")
    events = []
    for row in frame[wanted].itertuples(index=False, name=None):
        values = dict(zip(wanted, row, strict=True))
        events.append(_event_tuple(values.__getitem__, values.get("metadata"),
                                   include_metadata=include_metadata))
    sessions = [_session_dict(s, _as_int(s.event_count, "event_count"))
                for s in loaded.sessions]
    markers = [plain(m) if dataclasses.is_dataclass(m) else plain(dict(m))
               for m in loaded.markers]
    selected = plain(loaded.selected_session_id)
    return {"sessions": sessions, "selected_session_id": selected, "events": events,
            "warnings": [str(w) for w in loaded.warnings],
            "sources_loaded": [str(s) for s in loaded.sources_loaded], "markers": markers}


def load_ours(paths: Iterable[str | Path], session_id: str | None = None, *,
              include_metadata: bool = False) -> dict[str, Any]:
    """``ours(stormwatch.load_artifacts(paths, session_id=session_id))``."""
    from stormwatch import load_artifacts

    loaded = load_artifacts([Path(p) for p in paths], session_id=session_id)
    return ours(loaded, include_metadata=include_metadata)


def canonical(result: Mapping[str, Any]) -> dict[str, Any]:
    """Rename ``legacy-…`` session ids to ``legacy#0``, ``legacy#1``… in order of first
    appearance (sessions, then selected id, events, markers), everywhere they occur,
    including inside warning texts."""
    names: dict[str, str] = {}

    def rename(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("legacy-"):
            return names.setdefault(value, f"legacy#{len(names)}")
        return value

    sessions = [{**s, "session_id": rename(s["session_id"])} for s in result["sessions"]]
    selected = rename(result["selected_session_id"])
    events = [(rename(e[0]), *e[1:]) for e in result["events"]]
    markers = [{**m, "session_id": rename(m["session_id"])} for m in result["markers"]]
    warnings = []
    for text in result["warnings"]:
        for old, new in names.items():
            text = text.replace(old, new)
        warnings.append(text)
    return {**result, "sessions": sessions, "selected_session_id": selected,
            "events": events, "markers": markers, "warnings": warnings}


def differences(expected: Mapping[str, Any], actual: Mapping[str, Any], *,
                compare_warnings: str = "count", limit: int = 10) -> list[str]:
    """Human-readable differences between two results (empty list: equal).

    ``compare_warnings``: "exact", "count" (free text may be worded differently) or
    "ignore". Events report the first differing fields of up to ``limit`` rows."""
    out: list[str] = []
    for key in RESULT_KEYS:
        want, got = expected[key], actual[key]
        if key == "warnings":
            if compare_warnings == "count" and len(want) != len(got):
                out.append(f"warnings: {len(want)} expected, {len(got)} got: {got!r}")
            elif compare_warnings == "exact" and want != got:
                out.append(f"warnings: expected {want!r}, got {got!r}")
            continue
        if want == got:
            continue
        if not isinstance(want, Sequence) or isinstance(want, str) or len(want) != len(got):
            out.append(f"{key}: expected {_short(want)}, got {_short(got)}")
            continue
        shown = 0
        for index, (a, b) in enumerate(zip(want, got, strict=True)):
            if a == b or shown >= limit:
                continue
            shown += 1
            if key == "events":
                fields = [f"{name}={x!r}->{y!r}"
                          for name, x, y in zip(EVENT_FIELDS, a, b, strict=False) if x != y]
                out.append(f"events[{index}]: {', '.join(fields) or 'metadata differs'}")
            else:
                out.append(f"{key}[{index}]: expected {a!r}, got {b!r}")
    return out


def _short(value: Any, width: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width] + "…"
