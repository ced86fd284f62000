"""Lending a file's bytes (stormwatch.load.file_mappings) and LocalTree.loan: what a borrower sees.

Only observable behaviour: the bytes lent are exactly the file's (whatever was lent
before from the same pool, larger or smaller), a view taken of a lent buffer stays valid
and unchanged, concurrent loans never share bytes, a closed pool releases what it lent.
How the buffers are obtained (mapping flags, huge pages, reuse of one mapping) is not tested.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormwatch.load.file_mappings import MappingPool, lend_contents, lend_file
from stormwatch.load.tree import LocalTree

MIB = 1 << 20


def _payload(size: int, seed: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def _write(path: Path, size: int, seed: int) -> bytes:
    data = _payload(size, seed)
    path.write_bytes(data)
    return data


def test_one_pool_lends_each_file_exactly_as_files_grow_and_shrink(tmp_path: Path) -> None:
    """Small, large (past 2 MiB, where large-buffer handling starts) and tiny files in turn:
    each loan holds that file's bytes, nothing of a larger file lent before."""
    sizes = [3_000, 5_000_000, 40_000, 9_000_000, 2 * MIB - 1, 2 * MIB, 2 * MIB + 1, 1]
    files = [(tmp_path / f"f{i}", _write(tmp_path / f"f{i}", size, i)) for i, size in enumerate(sizes)]
    with MappingPool() as pool:
        for path, expected in files:
            with lend_file(path, pool) as data:
                assert len(data) == len(expected)
                assert data[:] == expected


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(min_value=0, max_value=200_000), min_size=1, max_size=6), seed=st.integers(0, 99))
def test_loans_from_a_reused_pool_never_show_stale_bytes(sizes: list[int], seed: int) -> None:
    with MappingPool() as pool:
        for n, size in enumerate(sizes):
            expected = _payload(size, seed + n)
            with lend_contents(io.BytesIO(expected), size, pool) as data:
                assert bytes(data[:]) == expected


@pytest.mark.parametrize("claimed", [0, 10, 4_999, 5_001, 20_000])
def test_contents_follow_the_stream_when_its_size_changed(claimed: int) -> None:
    actual = bytes(range(256)) * 20  # 5,120 bytes
    with MappingPool() as pool, lend_contents(io.BytesIO(actual), claimed, pool) as data:
        assert bytes(data[:]) == actual


def test_a_buffer_given_back_is_lent_again_at_the_size_asked_and_writable() -> None:
    with MappingPool() as pool:
        for size in (10_000, 3 * MIB, 1, 4096):
            buffer = pool.lend(size)
            assert len(buffer) == size
            buffer[:] = b"\xab" * size
            assert buffer[-1:] == b"\xab"
            pool.give_back(buffer)


def test_a_view_of_a_buffer_given_back_stays_valid_and_unchanged() -> None:
    """numpy or Arrow may still view a buffer when it is given back: lending again must not
    change (or unmap) what the view sees."""
    with MappingPool() as pool:
        first = pool.lend(4096)
        first[:] = b"\x01" * 4096
        view = np.frombuffer(first, dtype=np.uint8)
        pool.give_back(first)
        for size in (8192, 2048, 4096):
            again = pool.lend(size)
            assert len(again) == size
            again[:] = b"\x02" * size
            pool.give_back(again)
        assert view.size == 4096 and bool((view == 1).all())
    assert bool((view == 1).all())  # even once the pool is closed
    del view


def test_concurrent_loans_never_share_bytes(tmp_path: Path) -> None:
    files = [(tmp_path / f"r{i}", _write(tmp_path / f"r{i}", 50_000 * (i + 1), i)) for i in range(6)]
    all_lent = threading.Barrier(len(files))
    mismatches: list[str] = []

    def read(path: Path, expected: bytes) -> None:
        with lend_file(path, pool) as data:
            all_lent.wait(timeout=30)  # every loan is out at once before any is checked
            if data[:] != expected:
                mismatches.append(path.name)
            all_lent.wait(timeout=30)

    with MappingPool() as pool:
        for _ in range(3):  # the second and third rounds borrow buffers given back by the first
            threads = [threading.Thread(target=read, args=item) for item in files]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    assert mismatches == []


def test_closing_the_pool_releases_every_buffer_now_or_when_given_back() -> None:
    pool = MappingPool()
    returned, still_out = pool.lend(10_000), pool.lend(20_000)
    pool.give_back(returned)
    pool.close()
    assert returned.closed
    pool.give_back(still_out)
    assert still_out.closed


@pytest.mark.parametrize("size", [0, 1, 65_537, 2 * MIB + 3])
def test_local_tree_loan_equals_read(tmp_path: Path, size: int) -> None:
    expected = _write(tmp_path / "a.jsonl", size, size)
    tree = LocalTree(tmp_path)
    with MappingPool() as pool, tree.loan("a.jsonl", pool) as data:
        assert bytes(data[:]) == expected == tree.read("a.jsonl")
    with tree.loan("a.jsonl") as data:  # without a pool: a buffer of its own
        assert bytes(data[:]) == expected


def test_a_loan_without_a_pool_ends_with_its_block(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl", 10_000, 7)
    with LocalTree(tmp_path).loan("a.jsonl") as data:
        assert len(data) == 10_000
    with pytest.raises(ValueError):
        data[:1]
