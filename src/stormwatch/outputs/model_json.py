"""``model.json``: a diagnosed job as one JSON document (contract in DESIGN.md).

The ``model`` member is ``dataclasses.asdict`` of :class:`DiagnosticsModel` with
the reference's field names (rank keys as strings, as JSON requires); the
``fleet`` member beside it holds stormwatch's own per-job fleet facts
(:mod:`stormwatch.peers`), so ``model`` stays exactly the reference's; the
``verdict`` member is a :class:`~stormwatch.outputs.verdict.Verdict` (decided in
:mod:`stormwatch.outputs.verdict`); files whose last record was cut short are named in
the top-level ``warnings`` and ``cut_short`` (:mod:`stormwatch.outputs.cut_short`).
Written with orjson: numpy timelines serialise without a Python int per sample.

Telemetry reaches the document unchecked in places (marker metadata, a manifest's
session fields), so the document is made JSON-safe (:func:`json_safe`) before it
is handed out: any artifact that loads also serialises.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson

from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.load.loader import LoadResult
from stormwatch.load.tree import Entry
from stormwatch.outputs.cut_short import cut_short_entries, cut_short_warnings
from stormwatch.outputs.verdict import Verdict

MODEL_SCHEMA_VERSION = 1
#: Telemetry containers nested deeper than this are replaced by :data:`TOO_DEEP` in the document.
MAX_NESTING = 64
TOO_DEEP = "<nested too deeply>"
_INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson writes: int64 and uint64


def input_fingerprint(entries: Iterable[Entry]) -> str:
    """sha256 over every input's (key, size, version), order-independent; changes when any input does."""
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda item: item.key):
        digest.update(orjson.dumps([entry.key, entry.size_bytes, entry.version]))
        digest.update(b"\n")
    return f"sha256:{digest.hexdigest()}"


def model_document(
    loaded: LoadResult,
    model: DiagnosticsModel,
    verdict: Verdict,
    *,
    job_id: str,
    source: str,
    fingerprint: str,
    engine_version: str,
    options: Mapping[str, Any] | None = None,
    generated_at: datetime | None = None,
    fleet: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The model.json content as plain data (numpy arrays left for orjson).

    ``options`` records how the job was diagnosed (rank filter, session, preset):
    an audit re-diagnoses a job whose inputs are unchanged when these differ.
    ``fleet`` is the job's fleet facts (:meth:`stormwatch.peers.FleetFacts.as_dict`: per-rank
    facts, outlier ranks, coverage, regression), written beside ``model`` (``null`` when not given).
    """
    return json_safe({
        "schema_version": MODEL_SCHEMA_VERSION,
        "job_id": job_id,
        "source": source,
        "generated_at": (generated_at or datetime.now(UTC)).isoformat(),
        "engine_version": engine_version,
        "input_fingerprint": fingerprint,
        "options": dict(options or {}),
        "selected_session_id": loaded.selected_session_id,
        "sessions": [_session(summary) for summary in loaded.sessions],
        "sources_loaded": list(loaded.sources_loaded),
        "warnings": [*loaded.warnings,
                     *cut_short_warnings(loaded.cut_short, selected_session_id=loaded.selected_session_id)],
        "cut_short": cut_short_entries(loaded.cut_short),
        "verdict": {"status": verdict.status.value, "exit_code": int(verdict.exit_code), "summary": verdict.summary},
        "model": model,
        "fleet": None if fleet is None else dict(fleet),
    })


def _session(summary: Any) -> dict[str, Any]:
    data = {field.name: getattr(summary, field.name) for field in dataclasses.fields(summary)}
    data["status"] = str(summary.status)
    data["events"] = data.pop("event_count")
    return data


def _scalar(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return value  # floats (NaN is written as null), None, numpy arrays and scalars
    if isinstance(value, int):
        return value if _INT_RANGE[0] <= value <= _INT_RANGE[1] else str(value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, from a JSON "\\ud800" escape
        return value.encode("utf-8", errors="replace").decode("utf-8")
    return value


#: Leaf types orjson always writes as they are (exact types: subclasses take the general path).
_SETTLED_TYPES = frozenset({type(None), bool, float, np.ndarray})


def _settled(value: Any) -> bool:
    """Whether ``value`` is a leaf :func:`json_safe` would leave as it is (a cheap, exact-type test)."""
    kind = type(value)
    return kind in _SETTLED_TYPES or (kind is str and value.isascii())


def json_safe(value: Any, *, max_nesting: int = MAX_NESTING) -> Any:
    """``value`` as data orjson always writes, with the same shape otherwise.

    Dataclasses become dicts (as ``dataclasses.asdict`` makes them, without
    copying numpy arrays); dicts, lists and tuples keep their type and key order;
    integers beyond 64 bits become their decimal text; strings holding lone
    surrogates get ``?`` in their place; containers nested deeper than
    ``max_nesting`` become :data:`TOO_DEEP`. Iterative, so any depth is safe.
    """
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]
    tuples: list[tuple[Any, Any]] = []  # (parent, slot) of lists to turn back into tuples, parents first
    while stack:
        source, parent, slot, depth = stack.pop()
        if dataclasses.is_dataclass(source) and not isinstance(source, type):
            source = {field.name: getattr(source, field.name) for field in dataclasses.fields(source)}
        if not isinstance(source, Mapping | list | tuple):
            parent[slot] = _scalar(source)
        elif depth >= max_nesting:
            parent[slot] = TOO_DEEP
        elif isinstance(source, Mapping):
            out: dict[Any, Any] = {}
            for key, item in source.items():
                safe_key = key if type(key) is str and key.isascii() else (
                    _scalar(key) if isinstance(key, int | str) else str(key))
                if _settled(item):  # a leaf that is already safe: no trip through the stack
                    out[safe_key] = item
                    continue
                out[safe_key] = None
                stack.append((item, out, safe_key, depth + 1))
            parent[slot] = out
        else:
            items: list[Any] = list(source)
            stack.extend((item, items, index, depth + 1) for index, item in enumerate(source) if not _settled(item))
            parent[slot] = items
            if isinstance(source, tuple):
                tuples.append((parent, slot))
    for parent, slot in reversed(tuples):  # children before their parents
        parent[slot] = tuple(parent[slot])
    return root[0]


def dumps_document(document: dict[str, Any]) -> bytes:
    """UTF-8 JSON; rank-keyed maps get string keys; numpy arrays serialise natively.

    A document built elsewhere that orjson refuses is made :func:`json_safe` first.
    """
    option = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    try:
        return orjson.dumps(document, option=option, default=_default)
    except orjson.JSONEncodeError:
        return orjson.dumps(json_safe(document), option=option, default=_default)


def _default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # object arrays (v4 timelines holding None)
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__}")
