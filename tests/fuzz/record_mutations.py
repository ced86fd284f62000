"""Record-level mutations: one record of an artifact edited, written back as raw text.

Fields dropped or given another JSON type, NaN and Infinity literals, integers
beyond 64 bits, metadata nested thousands of levels deep, keys written twice,
strings spelled with escapes of lone surrogates. JSON-ish files are edited
through :mod:`tests.fuzz.edits`; CSV exports cell by cell.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from random import Random
from typing import Any

from tests.fuzz.corpus import Fmt
from tests.fuzz.edits import (
    Slot,
    csv_bytes,
    csv_rows,
    dict_paths,
    edit_cell,
    edit_record,
    slots,
    with_duplicate,
    with_raw,
    without,
)
from tests.fuzz.kinds import JSONISH, Mutated, Target, mutation

HUGE_INTEGERS = (2**63, 2**64, 10**30, -(2**63) - 1, 2**63 - 1, -(2**63), 2**53 + 1)  # beyond, at, near int64
NESTING_DEPTHS = (300, 900, 1_025, 10_000, 10_000, 100_000)  # orjson writes 255 levels, reads 1024


# --- records --------------------------------------------------------------------------------

def _record_mutation(target: Target, rng: Random, edit: Callable[[dict[str, Any], Random], tuple[str, str] | None],
                     ) -> Mutated | None:
    done = edit_record(target.fmt, target.data, rng, edit)
    return None if done is None else Mutated(done[0], done[1])


def edit_cell_mutation(target: Target, rng: Random, new_text: Callable[[str, str, Random], str | None], label: str,
                       *, column: str | None = None) -> Mutated | None:
    done = edit_cell(target.data, rng, new_text, column=column)
    return None if done is None else Mutated(done[0], f"{label}: {done[1]}")


def _type_name(value: Any) -> str:
    for name, kind in (("null", type(None)), ("bool", bool), ("int", int), ("float", float), ("str", str),
                       ("list", list), ("object", dict)):
        if isinstance(value, kind):
            return name
    return "other"


def retyped(value: Any, rng: Random) -> tuple[str, Any]:
    """``value`` as another JSON type (int -> str/float/bool/null/list/object, and so on)."""
    kind = rng.choice(sorted({"str", "float", "bool", "null", "list", "object", "int"} - {_type_name(value)}))
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    options: dict[str, list[Any]] = {
        "str": ["", " ", "abc", str(value)], "bool": [True, False], "null": [None],
        "float": [1.5, -0.0] + ([float(number), number + 0.5] if number is not None else []),
        "int": [0, -1, 1, 7] + ([int(number)] if number is not None and math.isfinite(number) else []),
        "list": [[], [value]], "object": [{}, {"value": value}],
    }
    return kind, rng.choice(options[kind])


def _pick_slot(record: dict[str, Any], rng: Random, *, numeric: bool = False) -> Slot | None:
    found = slots(record)
    if numeric:
        found = [s for s in found if _type_name(s.value(record)) in ("int", "float")] or found
    return rng.choice(found) if found else None


@mutation("drop_field")
def drop_field(target: Target, rng: Random) -> Mutated | None:
    if target.fmt is Fmt.CSV:
        rows = csv_rows(target.data)
        if not rows:
            return None
        column = rng.randrange(len(rows[0]))
        if rng.random() < 0.5:
            return Mutated(csv_bytes([[c for i, c in enumerate(r) if i != column] for r in rows]),
                           f"column {rows[0][column]!r} removed")
        return edit_cell_mutation(target, rng, lambda h, old, r: "", "cell blanked")

    def edit(record: dict[str, Any], r: Random) -> tuple[str, str] | None:
        slot = _pick_slot(record, r)
        return None if slot is None else (without(record, slot), f"dropped {slot}")
    return _record_mutation(target, rng, edit)


@mutation("retype_field")
def retype_field(target: Target, rng: Random) -> Mutated | None:
    if target.fmt is Fmt.CSV:
        texts = ["abc", "1.5", "True", "", "null", "[1, 2]", "{'a': 1}", "1e3", " 7 ", "-0", "0x10"]
        return edit_cell_mutation(target, rng, lambda h, old, r: r.choice(texts), "retyped")

    def edit(record: dict[str, Any], r: Random) -> tuple[str, str] | None:
        slot = _pick_slot(record, r)
        if slot is None:
            return None
        kind, value = retyped(slot.value(record), r)
        return with_raw(record, slot, json.dumps(value)), f"{slot} -> {kind} {value!r:.40}"
    return _record_mutation(target, rng, edit)


@mutation("non_finite")
def non_finite(target: Target, rng: Random) -> Mutated | None:
    literal = rng.choice(["NaN", "Infinity", "-Infinity"])
    if target.fmt is Fmt.CSV:
        return edit_cell_mutation(target, rng, lambda h, old, r: r.choice(["nan", "NaN", "inf", "-inf"]), "non-finite")

    def edit(record: dict[str, Any], r: Random) -> tuple[str, str] | None:
        slot = _pick_slot(record, r, numeric=True)
        return None if slot is None else (with_raw(record, slot, literal), f"{slot} = {literal}")
    return _record_mutation(target, rng, edit)


@mutation("huge_integer")
def huge_integer(target: Target, rng: Random) -> Mutated | None:
    number = rng.choice(HUGE_INTEGERS)
    if target.fmt is Fmt.CSV:
        return edit_cell_mutation(target, rng, lambda h, old, r: str(number), "huge integer")

    def edit(record: dict[str, Any], r: Random) -> tuple[str, str] | None:
        slot = _pick_slot(record, r, numeric=True)
        return None if slot is None else (with_raw(record, slot, str(number)), f"{slot} = {number}")
    return _record_mutation(target, rng, edit)


def deep_text(depth: int, rng: Random, *, python: bool = False) -> str:
    """A value nested ``depth`` levels (arrays or objects) as JSON or Python-literal text."""
    if rng.random() < 0.5:
        return "[" * depth + "]" * depth
    key = "'a'" if python else '"a"'
    return f"{{{key}: " * depth + "1" + "}" * depth


@mutation("deep_nesting")
def deep_nesting(target: Target, rng: Random) -> Mutated | None:
    depth = rng.choice(NESTING_DEPTHS)
    if target.fmt is Fmt.CSV:
        text = deep_text(depth, rng, python=rng.random() < 0.5)
        return edit_cell_mutation(target, rng, lambda h, old, r: text, f"depth {depth}", column="metadata")

    def edit(record: dict[str, Any], r: Random) -> tuple[str, str] | None:
        text = deep_text(depth, r)
        if isinstance(record.get("metadata"), dict) and r.random() < 0.7:
            slot = Slot(("metadata",), "deep")
        else:
            slot = _pick_slot(record, r) or Slot((), "deep")
        return with_raw(record, slot, text), f"{slot} nested {depth} deep"
    return _record_mutation(target, rng, edit)


@mutation("duplicate_key")
def duplicate_key(target: Target, rng: Random) -> Mutated | None:
    if target.fmt is Fmt.CSV:
        rows = csv_rows(target.data)
        if len(rows[0]) < 2:
            return None
        src, dst = rng.sample(range(len(rows[0])), 2)
        rows[0][dst] = rows[0][src]
        return Mutated(csv_bytes(rows), f"header column {dst + 1} renamed to duplicate {rows[0][src]!r}")

    def edit(record: dict[str, Any], r: Random) -> tuple[str, str] | None:
        path = r.choice(dict_paths(record))
        node = record
        for part in path:
            node = node[part]
        if not node:
            return None
        key = r.choice(list(node))
        kind, value = retyped(node[key], r) if r.random() < 0.7 else ("same", node[key])
        first = r.random() < 0.5
        text = with_duplicate(record, path, key, json.dumps(value), first=first)
        where = ".".join(map(str, (*path, key)))
        return text, f"{where} repeated ({kind} {value!r:.30}, {'before' if first else 'after'})"
    return _record_mutation(target, rng, edit)


@mutation("escaped_codepoints", JSONISH)
def escaped_codepoints(target: Target, rng: Random) -> Mutated | None:
    """A string spelled with escapes that decode to lone surrogates, NUL or line separators;
    half the time with a NaN elsewhere in the record, which sends it to the stdlib parser."""
    text = rng.choice(['"\\ud800"', '"x\\udfff"', '"\\udc80\\ud800"', '"\\u0000"', '"a\\u2028b"'])
    with_nan = rng.random() < 0.5

    def edit(record: dict[str, Any], r: Random) -> tuple[str, str] | None:
        strings = [s for s in slots(record) if isinstance(s.value(record), str)]
        if not strings:
            return None
        slot = r.choice(strings)
        changed = json.loads(with_raw(record, slot, text))
        numbers = [s for s in slots(changed) if _type_name(s.value(changed)) in ("int", "float")]
        if with_nan and numbers:
            spot = r.choice(numbers)
            return with_raw(changed, spot, "NaN"), f"{slot} = {text}, {spot} = NaN"
        return json.dumps(changed), f"{slot} = {text}"
    return _record_mutation(target, rng, edit)


@mutation("long_line")
def long_line(target: Target, rng: Random) -> Mutated | None:
    size = rng.choice([1 << 16, 1 << 20, 1 << 20, 5 << 20])
    if target.fmt is Fmt.CSV:
        return edit_cell_mutation(target, rng, lambda h, old, r: "x" * size, f"{size}-char cell", column="context")
    if target.fmt is Fmt.JSONL and rng.random() < 0.5:
        lines = target.data.split(b"\n")
        index = rng.randrange(len(lines))
        lines.insert(index, b"x" * size)
        return Mutated(b"\n".join(lines), f"{size}-byte garbage line inserted at line {index + 1}", must_warn=True)

    def long_string(record: dict[str, Any], r: Random) -> tuple[str, str] | None:
        key = "context" if "context" in record else "padding"
        return with_raw(record, Slot((), key), json.dumps("y" * size)), f"{key} is {size} chars"
    return _record_mutation(target, rng, long_string)
