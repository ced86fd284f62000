"""table_events reads dictionary-encoded metadata exactly as the same metadata in plain form."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from stormwatch.formats.arrow_reader import SCHEMA
from stormwatch.formats.table_events import table_events
from tests.builders import make_record


class DictSource:
    """Rows from plain record dicts (the JSON-document reader's answers)."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records

    def has_key(self, rows: np.ndarray, key: str) -> np.ndarray:
        return np.array([key in self.records[row] for row in rows.tolist()], dtype=bool)

    def metadata(self, rows: np.ndarray, size: int) -> tuple[np.ndarray, list[tuple[int, str]]]:
        out = np.full(size, None, dtype=object)
        for row in rows.tolist():
            out[row] = self.records[row]["metadata"]
        return out, []


def table_of(records: list[dict[str, Any]], *, encoded: bool) -> pa.Table:
    columns = {field.name: pa.array([r.get(field.name) for r in records], field.type) for field in SCHEMA}
    metadata = pa.array([r["metadata"] for r in records])
    if encoded:  # one struct per distinct metadata text, rows by index
        texts = [repr(sorted(r["metadata"].items())) if r["metadata"] is not None else None for r in records]
        distinct = list(dict.fromkeys(t for t in texts if t is not None))
        indices = pa.array([None if t is None else distinct.index(t) for t in texts], pa.int32())
        firsts = [next(r["metadata"] for r, t in zip(records, texts, strict=True) if t == d) for d in distinct]
        metadata = pa.DictionaryArray.from_arrays(indices, pa.array(firsts, metadata.type))
    return pa.table({**columns, "metadata": metadata})


def records_with(metadata: list[dict[str, Any] | None], **changes: Any) -> list[dict[str, Any]]:
    records = []
    for index, meta in enumerate(metadata):
        record = make_record(timestamp_ns=1_700_000_000_000_000_000 + index, allocated=index * 1024)
        record.update(metadata=meta, **changes)
        records.append(record)
    return records


NCCL = {"backend": "nccl", "op": "all_reduce"}
PLAIN = {"backend": "cuda", "op": "matmul"}
CASES = [
    ("collective tokens in repeated metadata", records_with([NCCL, PLAIN, NCCL, PLAIN, PLAIN])),
    ("a row whose metadata is no object", records_with([PLAIN, None, NCCL])),
    ("session ids stated in metadata", records_with([{"session_id": "from-meta"}, {"session_id": "from-meta"}, PLAIN],
                                                    session_id=None)),
    ("one distinct metadata", records_with([PLAIN] * 6)),
]


@pytest.mark.parametrize(("name", "records"), CASES, ids=[case[0] for case in CASES])
def test_dictionary_metadata_reads_as_plain(name: str, records: list[dict[str, Any]]) -> None:
    plain = table_events(table_of(records, encoded=False), DictSource(records), default_session_id="default")
    encoded = table_events(table_of(records, encoded=True), DictSource(records), default_session_id="default")
    pd.testing.assert_frame_equal(encoded.frame, plain.frame)
    assert encoded.problems == plain.problems
    assert np.array_equal(encoded.kept, plain.kept)
