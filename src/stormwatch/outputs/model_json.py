"""What model.json is made of besides its members (:mod:`stormwatch.outputs.document`): the
fingerprint of a job's inputs, and :func:`json_safe`.

Telemetry reaches the document unchecked in places (marker metadata, a manifest's
session fields), so a document is made JSON-safe (:func:`json_safe`) when it is built
(:mod:`stormwatch.outputs.job_document`): any artifact that loads also serialises.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import orjson

from stormwatch.load.tree import Entry

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
