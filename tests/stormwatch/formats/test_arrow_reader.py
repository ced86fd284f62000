"""Arrow's thread pool is the loader's business: a parse inside ``side_by_side`` runs on the calling
thread alone, gives the same events, and leaves other threads and later parses on the pool."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import orjson
import pandas as pd

from stormwatch.formats.arrow_reader import arrow_threads, side_by_side
from stormwatch.formats.csv_export import read_csv
from stormwatch.formats.jsonl import read_jsonl
from tests.builders import START_NS, make_record

RECORDS = [make_record(rank=rank, world_size=2, timestamp_ns=START_NS + step * 10**8, allocated=(step + 1) << 20,
                       metadata={"step": step})
           for rank in range(2) for step in range(50)]


def test_side_by_side_turns_the_pool_off_for_its_block_and_thread_only() -> None:
    assert arrow_threads()
    with side_by_side():
        assert not arrow_threads()
        with ThreadPoolExecutor(max_workers=1) as pool:
            assert pool.submit(arrow_threads).result()  # another thread keeps the pool
        with side_by_side(False):
            assert arrow_threads()
        assert not arrow_threads()
    assert arrow_threads()


def test_a_jsonl_parse_on_one_core_gives_the_same_events() -> None:
    data = b"".join(orjson.dumps(record) + b"\n" for record in RECORDS)
    on_the_pool = read_jsonl(data, label="t.jsonl", default_session_id="d")
    with side_by_side():
        on_one_core = read_jsonl(data, label="t.jsonl", default_session_id="d")
    assert len(on_the_pool.frame) == len(RECORDS)
    pd.testing.assert_frame_equal(on_one_core.frame, on_the_pool.frame)
    assert on_one_core.warnings == on_the_pool.warnings


def test_a_csv_parse_on_one_core_gives_the_same_events() -> None:
    text = io.StringIO()
    pd.DataFrame(RECORDS).to_csv(text, index=False)  # what a tracker's export_events(..., "csv") writes
    data = text.getvalue().encode()
    on_the_pool = read_csv(data, label="t.csv", default_session_id="d")
    with side_by_side():
        on_one_core = read_csv(data, label="t.csv", default_session_id="d")
    assert len(on_the_pool.frame) == len(RECORDS)
    pd.testing.assert_frame_equal(on_one_core.frame, on_the_pool.frame)
    assert on_one_core.warnings == on_the_pool.warnings
