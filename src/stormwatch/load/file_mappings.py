"""Lending a file's bytes in anonymous memory mappings, reused from file to file.

``bytes`` read from a big file live in the C heap, and once freed they stay in
the heap arena of the thread that read them: after a load, the worker threads'
arenas keep tens of MB that the model, built on the calling thread, cannot
reuse. A :class:`MappingPool` lends anonymous mappings instead. A file is read
into one, parsed, and the mapping goes back to the pool, to be resized for the
next file (pages are only added or dropped at the end); closing the pool unmaps
them all, so the memory goes back to the system when the load ends.

The files themselves are never mapped, so a writer truncating one while it is
read cannot fault the reader.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections.abc import Iterator
from io import RawIOBase
from pathlib import Path
from types import TracebackType

#: Private (copy-on-write) anonymous memory: a shared anonymous mapping cannot grow
#: by ``resize`` (the pages past its first size have no backing, and reading a file
#: into them fails with EFAULT).
_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS


def _new_mapping(size_bytes: int) -> mmap.mmap:
    return mmap.mmap(-1, size_bytes, flags=_FLAGS)


class MappingPool:
    """Anonymous mappings to read files into; thread-safe, closed once the load is done.

    Invariant: a mapping is either lent (one borrower) or in the free list.
    """

    def __init__(self) -> None:
        self._free: list[mmap.mmap] = []
        self._lock = threading.Lock()
        self._closed = False

    def lend(self, size_bytes: int) -> mmap.mmap:
        """A mapping of exactly ``size_bytes`` (> 0) bytes; its content is undefined."""
        with self._lock:
            buffer = self._free.pop() if self._free else None
        if buffer is not None:
            try:
                buffer.resize(size_bytes)
                return buffer
            except (BufferError, OSError, ValueError, SystemError):  # still viewed, or not resizable here
                _unmap(buffer)
        return _new_mapping(size_bytes)

    def give_back(self, buffer: mmap.mmap) -> None:
        with self._lock:
            if not self._closed:
                self._free.append(buffer)
                return
        _unmap(buffer)

    def close(self) -> None:
        """Unmap every mapping given back (later ones are unmapped as they come back)."""
        with self._lock:
            self._closed, free, self._free = True, self._free, []
        for buffer in free:
            _unmap(buffer)

    def __enter__(self) -> MappingPool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def _unmap(buffer: mmap.mmap) -> None:
    """Unmap now, or (while a numpy or Arrow view still holds it) when the last view goes."""
    with contextlib.suppress(BufferError):
        buffer.close()


@contextlib.contextmanager
def lend_contents(stream: RawIOBase, size_bytes: int, pool: MappingPool | None) -> Iterator[bytes | mmap.mmap]:
    """The rest of ``stream`` (expected ``size_bytes`` long) in a mapping lent by ``pool``
    (a fresh one, unmapped on exit, without a pool), given back on exit.

    A stream that turns out shorter or longer (the file changed meanwhile) is
    returned as ``bytes`` of what was read.
    """
    if size_bytes <= 0:
        yield stream.read()
        return
    buffer = pool.lend(size_bytes) if pool is not None else _new_mapping(size_bytes)
    try:
        view = memoryview(buffer)
        filled = 0
        try:
            while filled < size_bytes:
                more = stream.readinto(view[filled:])
                if not more:
                    break
                filled += more
        finally:
            view.release()
        rest = stream.read()
        yield buffer if filled == size_bytes and not rest else bytes(buffer[:filled]) + rest
    finally:
        if pool is not None:
            pool.give_back(buffer)
        else:
            _unmap(buffer)


@contextlib.contextmanager
def lend_file(path: Path, pool: MappingPool | None) -> Iterator[bytes | mmap.mmap]:
    """The file at ``path``, read whole into a mapping as :func:`lend_contents` does."""
    with path.open("rb", buffering=0) as stream, lend_contents(stream, os.fstat(stream.fileno()).st_size, pool) as data:
        yield data
