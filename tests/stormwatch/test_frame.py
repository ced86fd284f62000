"""String columns as categoricals: the one-value shortcut gives what dictionary encoding gives."""

from __future__ import annotations

import pyarrow as pa
import pytest

from stormwatch.frame import categorical, sole_string

CASES: dict[str, tuple[pa.Array | pa.ChunkedArray, str | None]] = {
    "one value": (pa.array(["gpu-0"] * 5, pa.large_string()), "gpu-0"),
    "one value over chunks": (pa.chunked_array([["a", "a"], ["a"], ["a", "a", "a"]], pa.large_string()), "a"),
    "blank value": (pa.array(["  "] * 3), "  "),
    "two values": (pa.array(["a", "a", "b"]), None),
    "second chunk differs": (pa.chunked_array([["a", "a"], ["b"]]), None),
    "a null": (pa.array(["a", None, "a"]), None),
    "all null": (pa.array([None, None], pa.string()), None),
    "empty": (pa.array([], pa.string()), None),
    "not strings": (pa.array([1, 1, 1]), None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sole_string(name: str) -> None:
    column, expected = CASES[name]
    assert sole_string(column) == expected


@pytest.mark.parametrize("name", [name for name, (column, _) in CASES.items() if name != "not strings"])
def test_categorical_keeps_every_value(name: str) -> None:
    column, _ = CASES[name]
    result = categorical(column)
    assert [None if value != value else value for value in result.tolist()] == column.to_pylist()
    assert all(isinstance(value, str) for value in result.categories)
