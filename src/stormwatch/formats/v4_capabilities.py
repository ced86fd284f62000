"""Schema v4's ``metadata.memory_capabilities``, checked column by column (stormlog 0.4.3's rules).

The per-record rules are ``inferred_capabilities`` and ``_check_capabilities``
in :mod:`stormwatch.events.records`; here they run over the ``memory_capabilities``
struct column of a whole table: each rule is one mask, a row that breaks it is
reported (the first rule it breaks, in the per-record order) and dropped.

Arrow writes ``null`` for a key a row lacks as for a key it holds with ``null``.
Where the rules tell the two apart (an absent capability object is inferred, a
``null`` one is an error; an absent field is "missing", a ``null`` one of the wrong
type), the few null rows are looked up in their metadata ``dict``, which every
v4 row brings anyway. Inferred capabilities are built once per distinct
(metadata dict, collector, counters present), by the per-record function itself.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from stormwatch.events.collective_tokens import has_collective_token_in_values
from stormwatch.events.frame import blank_positions
from stormwatch.events.records import inferred_capabilities
from stormwatch.events.schema import CAPABILITY_BOOLEAN_FIELDS, CAPABILITY_STRING_FIELDS, COUNTER_CAPABILITY
from stormwatch.formats.column_checks import Column, Errors, blank_rows, null_rows, rows_mask

_CAPABILITIES = "memory_capabilities"
_EXPECTED = CAPABILITY_STRING_FIELDS + CAPABILITY_BOOLEAN_FIELDS
_FIELD = f"metadata.{_CAPABILITIES}."
#: Counters whose presence the inferred capabilities record (``allocator_change_bytes`` aside).
_INFERRED_COUNTERS = tuple(COUNTER_CAPABILITY)
_CHANGE_RULE = "allocator_change_bytes must be null without allocated memory support"


def _child(column: Column, name: str) -> Column | None:
    """The struct field ``name`` of ``column`` (null where the parent is), or None without one."""
    if not pa.types.is_struct(column.type) or column.type.get_field_index(name) < 0:
        return None
    return pc.struct_field(column, name)


def _holds(dicts: np.ndarray, rows: np.ndarray, *path: str) -> np.ndarray:
    """For the given rows, whether their metadata ``dict`` holds the key ``path`` (nested)."""
    found = np.zeros(rows.size, dtype=bool)
    for index, row in enumerate(rows.tolist()):
        value = dicts[row]
        for key in path:
            if not isinstance(value, dict) or key not in value:
                break
            value = value[key]
        else:
            found[index] = True
    return found


def _add_by_fields(errors: Errors, fields: list[tuple[str, np.ndarray]], rule: str) -> None:
    """One rule per distinct set of flagged fields: ``rule: a, b`` for the rows flagging just ``a`` and ``b``."""
    if not fields:
        return
    flags = np.stack([mask for _, mask in fields], axis=1)
    rows = np.flatnonzero(flags.any(axis=1))
    if rows.size == 0:
        return
    patterns, group = np.unique(flags[rows], axis=0, return_inverse=True)
    for index, pattern in enumerate(patterns):
        names = ", ".join(name for (name, _), flagged in zip(fields, pattern, strict=True) if flagged)
        errors.add(rows[group.reshape(-1) == index], f"{rule}: {names}")


def _false_rows(column: Column | None, size: int) -> np.ndarray:
    """Rows holding ``false`` in a boolean column (none for another type)."""
    if column is None or not pa.types.is_boolean(column.type):
        return np.zeros(size, dtype=bool)
    return np.asarray(pc.fill_null(pc.invert(column), False), dtype=bool)


def _check_stated(table: pa.Table, capabilities: Column, stated: np.ndarray, dicts: np.ndarray, errors: Errors) -> None:
    """``_check_capabilities`` over the rows (``stated``, a mask) whose capabilities are an object."""
    size = table.num_rows
    children: dict[str, Column] = {}
    present: dict[str, np.ndarray] = {}
    for field in capabilities.type:
        child = pc.struct_field(capabilities, field.name)
        nulls = np.flatnonzero(rows_mask(null_rows(child), size) & stated)
        held = stated & ~rows_mask(nulls, size)
        held[nulls[_holds(dicts, nulls, _CAPABILITIES, field.name)]] = True
        children[field.name], present[field.name] = child, held
    absent = np.zeros(size, dtype=bool)
    _add_by_fields(errors, [(name, stated & ~present.get(name, absent)) for name in _EXPECTED],
                   "missing memory capability fields")
    _add_by_fields(errors, [(name, present[name]) for name in sorted(present) if name not in _EXPECTED],
                   "unknown memory capability fields")
    for name in CAPABILITY_STRING_FIELDS:
        child, held = children[name], present[name]
        nulls = held & rows_mask(null_rows(child), size)
        kind = child.type
        textual = pa.types.is_string(kind) or pa.types.is_large_string(kind)
        blank = held & rows_mask(blank_rows(child), size) if textual else nulls
        errors.add(nulls | blank, f"{_FIELD}{name} must be a non-empty string")
        if not textual and not pa.types.is_temporal(kind):  # a string Arrow read as a timestamp is one
            errors.add(held & ~nulls, f"{_FIELD}{name} must be a string")
    for name in CAPABILITY_BOOLEAN_FIELDS:
        child, held = children[name], present[name]
        wrong = held & rows_mask(null_rows(child), size) if pa.types.is_boolean(child.type) else held
        errors.add(wrong, f"{_FIELD}{name} must be a boolean")
    for counter, capability in (*COUNTER_CAPABILITY.items(), ("allocator_change_bytes", None)):
        switched_off = _false_rows(children.get(capability or "supports_allocator_allocated"), size) & stated
        counted = ~rows_mask(null_rows(table.column(counter)), size)
        message = f"{counter} must be null when {capability} is false" if capability else _CHANGE_RULE
        errors.add(switched_off & counted, message)


def check_capabilities(
    table: pa.Table, v4: np.ndarray, collector: pd.Categorical, dicts: np.ndarray, errors: Errors, *,
    unread: np.ndarray,
) -> np.ndarray:
    """The capability rules over the ``v4`` rows (a mask) whose metadata is an object;
    ``dicts`` holds every v4 row's metadata ``dict``. Returns the rows whose capabilities
    are absent, to be inferred (see :func:`infer_capabilities`), and the ``unread`` rows
    (metadata stormlog reads as ``{}``), whose stated capabilities it never sees."""
    size = table.num_rows
    metadata = table.column("metadata") if "metadata" in table.column_names else None
    if metadata is None or not pa.types.is_struct(metadata.type):
        return np.zeros(size, dtype=bool)  # every row breaks "metadata must be an object"
    blind = v4 & unread
    objects = v4 & ~rows_mask(null_rows(metadata), size) & ~blind
    capabilities = _child(metadata, _CAPABILITIES)
    if capabilities is None:
        inferred = objects
    else:
        nulls = np.flatnonzero(rows_mask(null_rows(capabilities), size) & objects)
        stated_null = _holds(dicts, nulls, _CAPABILITIES)
        inferred = rows_mask(nulls[~stated_null], size)
        errors.add(nulls[stated_null], f"metadata.{_CAPABILITIES} must be an object")
        stated = objects & ~rows_mask(nulls, size)
        if not pa.types.is_struct(capabilities.type):
            errors.add(stated, f"metadata.{_CAPABILITIES} must be an object")
        elif stated.any():
            _check_stated(table, capabilities, stated, dicts, errors)
    if inferred.any():
        _check_inferred(table, inferred, collector, metadata, errors)
    if blind.any():  # 0.4.3 sees {}: its inferred sampling source is "legacy", never blank
        _check_inferred(table, blind, collector, None, errors)
    return inferred | blind


def _check_inferred(
    table: pa.Table, inferred: np.ndarray, collector: pd.Categorical, metadata: Column | None, errors: Errors
) -> None:
    """What inferred capabilities can break: ``str(collector)`` or the metadata's
    ``sampling_source`` blank, a change counted without an allocated counter."""
    size = table.num_rows
    blank = rows_mask(blank_positions(collector), size)
    errors.add(inferred & blank, f"{_FIELD}telemetry_collector must be a non-empty string")
    source = None if metadata is None else _child(metadata, "sampling_source")
    if source is not None and (pa.types.is_string(source.type) or pa.types.is_large_string(source.type)):
        blank = rows_mask(blank_rows(source), size)
        errors.add(inferred & blank, f"{_FIELD}sampling_source must be a non-empty string")
    counted = ~rows_mask(null_rows(table.column("allocator_change_bytes")), size)
    errors.add(inferred & counted & rows_mask(null_rows(table.column("allocator_allocated_bytes")), size), _CHANGE_RULE)


def infer_capabilities(
    table: pa.Table, rows: np.ndarray, collector: pd.Categorical, dicts: np.ndarray, *, unread: np.ndarray
) -> np.ndarray:
    """Puts into ``dicts`` the metadata of ``rows`` (positions, valid rows lacking capabilities)
    with the capabilities ``inferred_capabilities`` gives; returns the rows whose inferred
    capabilities hold a collective token (a boolean mask of the table's size). An ``unread`` row
    (metadata stormlog reads as ``{}``) keeps its metadata but for the capabilities, inferred
    from ``{}`` as 0.4.3 infers them.

    One ``dict`` per distinct (metadata dict, collector, counters present, unread), shared by its rows.
    """
    collective = np.zeros(table.num_rows, dtype=bool)
    if rows.size == 0:
        return collective
    sources, _ = pd.factorize(np.fromiter((id(dicts[row]) for row in rows.tolist()), dtype=np.int64, count=rows.size))
    counted = np.zeros(rows.size, dtype=np.int64)
    for bit, name in enumerate(_INFERRED_COUNTERS):
        counted |= (~rows_mask(null_rows(table.column(name)), table.num_rows)[rows]).astype(np.int64) << bit
    codes = collector.codes[rows].astype(np.int64) + 1
    blind = unread[rows].astype(np.int64)
    keys = ((sources.astype(np.int64) * (len(collector.categories) + 1) + codes) << len(_INFERRED_COUNTERS) | counted
            ) << 1 | blind
    order = np.argsort(keys, kind="stable")
    starts = np.flatnonzero(np.diff(keys[order], prepend=-1))
    for first, members in zip(order[starts].tolist(), np.split(rows[order], starts[1:]), strict=True):
        value = collector[rows[first]]
        record: dict[str, object] = {"collector": None if pd.isna(value) else value}
        record.update({name: 0 if counted[first] >> bit & 1 else None for bit, name in enumerate(_INFERRED_COUNTERS)})
        found = dicts[rows[first]]
        if unread[rows[first]]:
            kept = {key: value for key, value in found.items() if key != _CAPABILITIES}
            metadata = {**kept, _CAPABILITIES: inferred_capabilities({}, record)[_CAPABILITIES]}
        else:
            metadata = inferred_capabilities(found, record)
        dicts[members] = metadata
        if has_collective_token_in_values(metadata[_CAPABILITIES]):
            collective[members] = True
    return collective
