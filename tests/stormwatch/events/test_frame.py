"""String columns as categoricals: the one-value shortcut gives what dictionary encoding gives."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from stormwatch.events.frame import blank_positions, categorical, concat_strings, sole_string

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


CONCAT_CASES: dict[str, list[list[str | None]]] = {
    "one value each, the same": [["h0"] * 3, ["h0"] * 2],
    "one value each, different": [["h0"] * 3, ["h1"] * 2, ["h2"]],
    "categories in another order": [["a", "b", "a"], ["b", "a"], ["c", "b"]],
    "missing values": [[None, "a"], ["a", None, "b"], [None]],
    "a part that is all missing": [["a", "a"], [None, None]],
    "many distinct": [[f"v{i}" for i in range(200)], [f"v{i}" for i in range(150, 300)]],
}


@pytest.mark.parametrize("name", list(CONCAT_CASES))
@pytest.mark.parametrize("reverse", [False, True])
def test_concat_strings_keeps_values_and_order(name: str, reverse: bool) -> None:
    parts = CONCAT_CASES[name]
    flat = [value for part in parts for value in part]
    order = np.arange(len(flat))[::-1].copy() if reverse else None
    result = concat_strings([pa.array(part, pa.large_string()) for part in parts], order)
    expected = flat[::-1] if reverse else flat
    assert [None if value != value else value for value in result.tolist()] == expected
    assert len(set(result.categories)) == len(result.categories) == len({v for v in flat if v is not None})


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["a", "a", "a"], []),
        (["", "a", " \t", None, "b"], [0, 2]),
        (["  "] * 3, [0, 1, 2]),
        ([None, None], []),
    ],
)
def test_blank_positions(values: list[str | None], expected: list[int]) -> None:
    assert blank_positions(categorical(pa.array(values, pa.large_string()))).tolist() == expected
