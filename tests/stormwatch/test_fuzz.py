"""Fuzzing the engine: property-based records, and a short run of the mutation fuzzer.

Property tests: schema-v3 records as stormlog writes them (tests/builders.py), some
with fields dropped, added or given values of any JSON type, written as JSONL, a
JSON array and a CSV export, then loaded. Whatever the values, loading raises
nothing, every record that does not load is named (file and line, record or row)
in a warning, no untouched record is named, every untouched record arrives, and
the model, model.json and the report page are made without raising.

Mutation run: the first cases of tests/fuzz (every mutation on every seed shape,
in worker processes) with all its invariants; failures already reproduced in
test_fuzz_regressions.py (tests/fuzz/known.py) are passed over, anything else fails.
The long run is ``python bench/fuzz.py``.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from functools import cache
from typing import Any

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from stormwatch import LoadResult, MemoryTree, load_artifacts
from stormwatch.diagnose import diagnose
from stormwatch.outputs.document import JobDocument
from stormwatch.reports.render import render_job
from tests import builders as b
from tests.fuzz.harness import total_events
from tests.fuzz.known import known_exception, new_failures
from tests.fuzz.pool import run_cases

ROOT = "/fuzz/props"
SESSION_ID = "s-1"
MAX_RECORDS = 14  # below the loader's cap of 20 warnings listed per file
CI_CASES, CI_SEED = 300, 0
_DELETE = "<delete>"


@cache
def _base_records() -> tuple[dict[str, Any], ...]:
    """Valid v3 records (samples, phases, alerts, lifecycle) with distinct timestamps and contexts,
    so that no two of them, however damaged elsewhere, share stormlog's de-duplication key."""
    records = b.timeline_records(samples=8, phases=b.DEFAULT_PHASES[:2], alerts=b.DEFAULT_ALERTS[:2],
                                 session_id=SESSION_ID)
    for index, record in enumerate(records):
        record["timestamp_ns"] += index
        record["context"] = f"{record['context']} #{index}"
    return tuple(records[:MAX_RECORDS])


_FIELDS = tuple(_base_records()[0])
_scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
            | st.sampled_from(["", " ", "123", "1e3", "-1", "NaN", "sample", SESSION_ID]))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
_EXTRA_FIELDS = ("surprise", "memory_allocated", "timestamp")  # unknown to v3, or legacy names


def _field_edits(names: tuple[str, ...]) -> st.SearchStrategy[list[tuple[str, Any]]]:
    return st.lists(st.tuples(st.sampled_from(names), _values | st.just(_DELETE)), min_size=1, max_size=3)


@st.composite
def _jobs(draw: st.DrawFn, *, replace: bool = True, extra_fields: bool = True) -> list[tuple[Any, bool]]:
    """(record, untouched) pairs in file order. Each record stays valid, has fields dropped or
    set to values of any JSON type, or (``replace``) is some other JSON value altogether.
    A CSV has no ``extra_fields``: a column added for one row would be in every row."""
    count = draw(st.integers(1, len(_base_records())))
    names = (*_FIELDS, *_EXTRA_FIELDS) if extra_fields else _FIELDS
    edits = st.none() | _field_edits(names) | st.tuples(st.just("replace"), _values)
    out = []
    for base in _base_records()[:count]:
        edit = draw(edits)
        if edit is None or (isinstance(edit, tuple) and not replace):
            out.append((copy.deepcopy(base), True))
        elif isinstance(edit, tuple):
            out.append((edit[1], False))
        else:
            record = copy.deepcopy(base)
            for name, value in edit:
                if value == _DELETE:
                    record.pop(name, None)
                else:
                    record[name] = value
            out.append((record, False))
    return out


def _load(key: str, data: bytes, **kwargs: Any) -> LoadResult:
    """Load one file; a crash already reproduced in test_fuzz_regressions.py rejects the example."""
    try:
        return load_artifacts(MemoryTree({key: data}, name=ROOT), **kwargs)
    except Exception as exc:
        if known_exception(exc) is None:
            raise
        reject()


def _diagnosed(key: str, data: bytes) -> LoadResult:
    """:func:`_load`, then the model, model.json and the report page, which must not raise either."""
    loaded = _load(key, data)
    diagnosis = diagnose(MemoryTree({key: data}, name=ROOT), job_id="props", source_name="props")
    read = JobDocument.from_json(diagnosis.model_json(), name="props/model.json")
    assert read.to_json() == diagnosis.model_json() and render_job(read) and render_job(diagnosis.document)
    return loaded


def _named(loaded: LoadResult, key: str) -> tuple[set[int], int | None]:
    """Numbers (line, record or row) named by warnings, and where a CSV stopped being read."""
    pattern = re.compile(rf"^{re.escape(f'{ROOT}/{key}')}:(\d+): ")
    numbers = {int(m.group(1)) for w in loaded.warnings if (m := pattern.match(w))}
    stopped = [int(m.group(1)) for w in loaded.warnings if (m := pattern.match(w)) and "rest of the file" in w]
    assert not any(w.startswith(f"{ROOT}/{key}: ") and "more bad" in w for w in loaded.warnings)
    return numbers, min(stopped, default=None)


_UNKNOWN_FIELDS = re.compile(r": unknown telemetry fields: (?P<names>.+) \(line skipped\)$")


def _nested_key_mistaken(loaded: LoadResult, key: str, number: int, record: dict[str, Any]) -> bool:
    """An untouched line rejected for an unknown field only because its metadata holds a key
    of that name (reproduced by test_fuzz_regressions.py::test_unknown_null_field_rejects_only_its_own_line)."""
    prefix = f"{ROOT}/{key}:{number}: "
    for warning in loaded.warnings:
        match = _UNKNOWN_FIELDS.search(warning) if warning.startswith(prefix) else None
        if match and all(f'"{name}"' in json.dumps(record.get("metadata")) for name in match["names"].split(", ")):
            return True
    return False


def _check(key: str, data: bytes, job: list[tuple[Any, bool]], numbers: list[int]) -> None:
    loaded = _diagnosed(key, data)
    named, stopped = _named(loaded, key)
    untouched = {numbers[i]: record for i, (record, ok) in enumerate(job) if ok}
    if any(_nested_key_mistaken(loaded, key, n, untouched[n]) for n in named & set(untouched)):
        reject()
    assert not named & set(untouched), ("untouched records named", sorted(named & set(untouched)), loaded.warnings)
    unaccounted = [n for i, n in enumerate(numbers) if n not in named and (stopped is None or n < stopped)]
    assert total_events(loaded) == len(unaccounted), (total_events(loaded), len(job), loaded.warnings)
    if untouched:
        arrived = set(_load(key, data, session_id=SESSION_ID).events["timestamp_ns"].tolist())
        assert {record["timestamp_ns"] for record, ok in job if ok} <= arrived


_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])


@_SETTINGS
@given(_jobs(replace=False) | _jobs().filter(lambda job: job[0][0] is not None or job[0][1]))
def test_jsonl_records_of_any_values(job: list[tuple[Any, bool]]) -> None:
    # A first line that is JSON ``null`` kills the process (pyarrow): reproduced in
    # test_fuzz_regressions.py::test_jsonl_whose_first_line_is_null_does_not_kill_the_process.
    data = b"".join(json.dumps(record).encode() + b"\n" for record, _ in job)
    _check("events.jsonl", data, job, list(range(1, len(job) + 1)))


@_SETTINGS
@given(_jobs())
def test_json_array_records_of_any_values(job: list[tuple[Any, bool]]) -> None:
    data = json.dumps([record for record, _ in job], indent=2).encode()
    _check("events.json", data, job, list(range(1, len(job) + 1)))


@_SETTINGS
@given(_jobs(replace=False, extra_fields=False))
def test_csv_records_of_any_values(job: list[tuple[Any, bool]]) -> None:
    header = list(dict.fromkeys(name for record, _ in job for name in record))
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=header)  # str() of every value, as stormlog's export
    writer.writeheader()
    writer.writerows(record for record, _ in job)
    reader = csv.reader(io.StringIO(out.getvalue(), newline=""))
    next(reader)
    numbers = [reader.line_num for _ in reader]
    _check("events.csv", out.getvalue().encode(), job, numbers)


def test_mutation_fuzz_short_run() -> None:
    """Every invariant of tests/fuzz/harness.py on the first cases, in two worker processes."""
    outcomes = list(run_cases(range(CI_CASES), seed=CI_SEED, jobs=2))
    assert len(outcomes) == CI_CASES
    found = [f"{outcome.case}: {outcome.note}: {failure.kind} {failure.where} {failure.detail}"
             for outcome in outcomes for failure in new_failures(outcome)]
    assert not found, "\n".join(found)
