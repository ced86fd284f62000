"""Anonymous mappings lent to read files into (stormwatch.load.file_mappings), and LocalTree.loan."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from stormwatch.load.file_mappings import MappingPool, lend_contents
from stormwatch.load.tree import LocalTree


def _write(path: Path, size: int, seed: int) -> bytes:
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    return data


def test_pool_reuses_one_mapping_as_files_grow_and_shrink(tmp_path: Path) -> None:
    """Growing a lent mapping must give real pages (a shared anonymous mapping would fail with EFAULT)."""
    sizes = [3_000, 5_000_000, 40_000, 9_000_000, 1]
    files = [(tmp_path / f"f{i}", _write(tmp_path / f"f{i}", size, i)) for i, size in enumerate(sizes)]
    seen = set()
    with MappingPool() as pool:
        for path, expected in files:
            with path.open("rb", buffering=0) as stream, lend_contents(stream, len(expected), pool) as data:
                assert len(data) == len(expected)
                assert data[:] == expected
                seen.add(id(data))
    assert len(seen) == 1, "the pool should lend the same mapping, resized, file after file"


@pytest.mark.parametrize("claimed", [0, 10, 4_999, 5_001, 20_000])
def test_contents_follow_the_stream_when_its_size_changed(claimed: int) -> None:
    actual = bytes(range(256)) * 20  # 5,120 bytes
    with MappingPool() as pool, lend_contents(io.BytesIO(actual), claimed, pool) as data:
        assert bytes(data[:]) == actual


def test_a_mapping_still_viewed_is_replaced_not_resized() -> None:
    with MappingPool() as pool:
        first = pool.lend(4096)
        view = np.frombuffer(first, dtype=np.uint8)  # an export: resize would raise BufferError
        pool.give_back(first)
        second = pool.lend(8192)
        assert second is not first and len(second) == 8192
        assert view.size == 4096  # the old mapping stays valid while viewed
        pool.give_back(second)
    assert second.closed


def test_mappings_given_back_after_close_are_unmapped() -> None:
    pool = MappingPool()
    lent = pool.lend(10_000)
    pool.close()
    pool.give_back(lent)
    assert lent.closed


@pytest.mark.parametrize("size", [0, 1, 65_537])
def test_local_tree_loan_equals_read(tmp_path: Path, size: int) -> None:
    expected = _write(tmp_path / "a.jsonl", size, size)
    tree = LocalTree(tmp_path)
    with MappingPool() as pool, tree.loan("a.jsonl", pool) as data:
        assert bytes(data[:]) == expected == tree.read("a.jsonl")
    with tree.loan("a.jsonl") as data:  # without a pool: a mapping of its own
        assert bytes(data[:]) == expected


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of this process's mapping that holds ``address`` (from /proc/self/smaps)."""
    flags: list[str] = []
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            low, high = (int(part, 16) for part in head.split("-"))
            inside = low <= address < high
        elif inside and head == "VmFlags:":
            flags = line.split()[1:]
    return flags


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize(("size", "huge"), [(64 << 20, True), (100_000, False)])
def test_large_mappings_ask_for_huge_pages(tmp_path: Path, size: int, huge: bool) -> None:
    """The file's pages are a request for huge pages (VmFlags ``hg``) when large, never when small."""
    import ctypes

    path = tmp_path / "big"
    path.write_bytes(b"x" * size)
    with MappingPool() as pool, path.open("rb", buffering=0) as stream, lend_contents(stream, size, pool) as data:
        address = ctypes.addressof(ctypes.c_char.from_buffer(data))
        flags = _vm_flags(address)
        assert flags, "the lent mapping is listed in /proc/self/smaps"
        assert ("hg" in flags) is huge
