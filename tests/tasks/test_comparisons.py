"""The fleet comparisons an audit takes from the last fleet.json: only when every input is the same."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import orjson
import pytest

from stormwatch.history.capacity_trend import CapacityThresholds
from stormwatch.history.regressions import RegressionThresholds
from stormwatch.history.suspects import SuspectThresholds
from stormwatch.load.tree import Entry
from stormwatch.tasks.comparisons import (
    REUSED_SECTIONS,
    comparison_basis,
    published_comparisons,
    window_entries,
)
from stormwatch.tasks.history import append_history
from tests.stormwatch.history.synthetic import synthetic_fleet
from tests.tasks.storage.backends import Backend

FLEET = synthetic_fleet(nights=3, jobs_per_night=2, world_sizes=(2,), seed=0)
AS_OF = FLEET.audit_times[-1]
SINCE = AS_OF - timedelta(days=90)
FILES = (Entry("history/date=2026-11-01/a.parquet", 10, "1"), Entry("history/date=2026-11-02/b.parquet", 20, "2"))


def basis(files: tuple[Entry, ...] = FILES, **changes: object) -> str:
    arguments: dict[str, object] = {"as_of": AS_OF, "history_days": 90, "regression": RegressionThresholds(),
                                    "suspects": SuspectThresholds(), **changes}
    return comparison_basis(files, **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(("what", "other"), [
    ("a file added", lambda: basis((*FILES, Entry("history/date=2026-11-03/c.parquet", 5, "3")))),
    ("a file removed", lambda: basis(FILES[:1])),
    ("a file rewritten (size)", lambda: basis((FILES[0], dataclasses.replace(FILES[1], size_bytes=21)))),
    ("a file rewritten (version)", lambda: basis((FILES[0], dataclasses.replace(FILES[1], version="9")))),
    ("another audit time", lambda: basis(as_of=AS_OF + timedelta(seconds=1))),
    ("another window", lambda: basis(history_days=30)),
    ("other regression thresholds", lambda: basis(regression=RegressionThresholds(min_change=0.2))),
    ("other suspect thresholds", lambda: basis(suspects=SuspectThresholds(nights=7))),
    ("other capacity thresholds", lambda: basis(capacity=CapacityThresholds(horizon_runs=3))),
])
def test_the_basis_changes_with_every_input_of_the_comparisons(what: str, other: object) -> None:
    assert callable(other)
    assert other() != basis(), what


def test_the_basis_does_not_depend_on_the_order_files_are_listed() -> None:
    assert basis(tuple(reversed(FILES))) == basis()


def _fleet_json(backend: Backend, document: dict[str, object]) -> None:
    backend.put("reports/fleet.json", orjson.dumps(document))


SECTIONS = {"trends": [{"night": "2026-11-01"}], "regressions": [{"job_name": "llama"}], "suspect_hosts": [],
            "capacity": [{"job_name": "llama", "runs_to_capacity": 3}]}


@pytest.mark.parametrize(("what", "document", "reused"), [
    ("the same basis", {"schema_version": 2, **SECTIONS, "history": {"basis": "B"}}, True),
    ("another basis", {"schema_version": 2, **SECTIONS, "history": {"basis": "other"}}, False),
    ("no basis (written before it was recorded)", {"schema_version": 2, **SECTIONS, "history": {}}, False),
    ("fleet.json version 1", {"schema_version": 1, **SECTIONS, "history": {"basis": "B"}}, False),
    ("a section missing", {"schema_version": 2, "trends": [], "history": {"basis": "B"}}, False),
    ("written before the capacity trend", {"schema_version": 2, **{name: value for name, value in SECTIONS.items()
                                                                   if name != "capacity"},
                                           "history": {"basis": "B"}}, False),
])
def test_a_stored_fleet_json_is_reused_only_for_its_own_basis(backend: Backend, what: str,
                                                              document: dict[str, object], reused: bool) -> None:
    _fleet_json(backend, document)
    found = published_comparisons(backend.storage, "B")
    assert (found is not None) is reused, what
    if found is not None:
        assert found == {name: SECTIONS[name] for name in REUSED_SECTIONS}


def test_a_damaged_or_missing_fleet_json_is_never_reused(backend: Backend) -> None:
    assert published_comparisons(backend.storage, "B") is None
    backend.put("reports/fleet.json", b'{"schema_version": 2, "history": {"basis": "B"')  # cut short
    assert published_comparisons(backend.storage, "B") is None


def test_window_entries_list_the_window_s_history_files_with_their_versions(backend: Backend) -> None:
    keys = [append_history(backend.storage, table, audit_time=when)
            for table, when in zip(FLEET.nights, FLEET.audit_times, strict=True)]
    backend.put("reports/history/date=2026-11-02/notes.txt", b"not history")
    listed = window_entries(backend.storage, since=SINCE, until=AS_OF)
    assert [entry.key for entry in listed] == sorted(key for key in keys if key)
    assert all(entry.version == backend.version(f"reports/{entry.key}") for entry in listed)
    first = window_entries(backend.storage, since=FLEET.audit_times[0], until=FLEET.audit_times[0])
    assert [entry.key for entry in first] == [keys[0]]
    chosen = window_entries(backend.storage, since=SINCE, until=AS_OF, keys=[keys[1]])
    assert [entry.key for entry in chosen] == [keys[1]]
