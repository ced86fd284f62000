"""Schema-v4 CSV exports written by stormlog 0.4.3's own exporters take the columnar path, and it
gives what the row-by-row path gives: the same events, metadata (capabilities inferred as 0.4.3
infers them from a Python-literal cell) and warnings, word for word."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from stormwatch.formats.csv_export import read_csv, read_csv_rows
from stormwatch.formats.csv_table import columnar_csv
from tests.stormwatch.formats.test_csv_v4_rejects import CASES, jobs  # noqa: F401  (the fixture)

CSV_CASES = sorted(name for name, case in CASES.items() if case.fmt.startswith("csv"))


@pytest.mark.parametrize("name", CSV_CASES)
def test_v4_csv_rows_take_the_columnar_path_and_read_as_row_by_row(
        name: str, jobs: Callable[[str], dict[str, list[Path]]]) -> None:  # noqa: F811
    case = CASES[name]
    for path in jobs(case.tracker)[case.fmt]:
        data = path.read_bytes()
        columnar = columnar_csv(data, default_session_id="legacy-x")
        assert columnar is not None
        fast = read_csv(data, label=str(path), default_session_id="legacy-x")
        slow = read_csv_rows(data, label=str(path), default_session_id="legacy-x")
        assert fast.warnings == slow.warnings
        assert fast.frame.drop(columns="metadata").equals(slow.frame.drop(columns="metadata"))
        assert list(fast.frame["metadata"]) == list(slow.frame["metadata"])
        # every row the reader keeps came through the columnar path; only refused rows are re-read
        assert len(columnar.kept) == len(slow.frame)
        assert len(columnar.slow) == len(case.rejected_lines)


@pytest.mark.parametrize("name", CSV_CASES)
def test_inferred_capabilities_are_made_once_per_cell_and_shared(
        name: str, jobs: Callable[[str], dict[str, list[Path]]]) -> None:  # noqa: F811
    """Rows whose capabilities were inferred from one metadata cell share the dict made for them
    (as rows of one metadata share it on the JSON Lines path); no two rows share a parsed cell's dict."""
    case = CASES[name]
    for path in jobs(case.tracker)[case.fmt]:
        frame = read_csv(path.read_bytes(), label=str(path), default_session_id="legacy-x").frame
        v4 = frame[frame["schema_version"] == 4]
        dicts = [item for item in v4["metadata"] if item is not None]
        assert dicts and all("memory_capabilities" in item for item in dicts)
        distinct = {id(item) for item in dicts}
        if case.fmt == "csv_json_metadata":  # capabilities stated in a JSON cell: checked, kept, each row its own
            assert len(distinct) == len(dicts)
        else:  # a Python-literal cell, which 0.4.3 reads as {}: inferred once per cell and counters present
            groups = {repr(sorted(item.items(), key=str)) for item in dicts}
            assert len(distinct) == len(groups) < len(dicts)
