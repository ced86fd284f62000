"""The artifact tree: relative keys to bytes, so one loader serves a folder and an S3 prefix.

Keys use ``/`` separators, relative to the tree's root. ``identity(key)`` is the
stable absolute name of an artifact (an absolute local path, or an ``s3://``
URI); it appears in warnings and ``sources_loaded`` and seeds the ids of
session-less artifacts, so for local files it equals what stormlog derives.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from stormwatch.load.file_mappings import MappingPool, lend_file


@dataclass(frozen=True)
class Entry:
    """One object of a tree: key, size in bytes, and a version tag (ETag or mtime)."""

    key: str
    size_bytes: int
    version: str


class ArtifactTree(Protocol):
    """What the loader needs of a storage location. Implementations do the IO."""

    @property
    def root_name(self) -> str:
        """The last segment of the root (a folder name, or the prefix's last part)."""
        ...

    def entries(self) -> Sequence[Entry]:
        """Every object below the root, sorted by key."""
        ...

    def read(self, key: str) -> bytes: ...

    def exists(self, key: str) -> bool: ...

    def identity(self, key: str) -> str: ...


@runtime_checkable
class StreamingTree(Protocol):
    """A tree that can also hand out an artifact as a binary stream (for chunked parsing)."""

    def open(self, key: str) -> BinaryIO: ...


@runtime_checkable
class LoaningTree(Protocol):
    """A tree that can lend an artifact's bytes for the length of a ``with`` block."""

    def loan(self, key: str, pool: MappingPool | None = None) -> contextlib.AbstractContextManager[bytes | mmap.mmap]:
        ...


class LocalTree:
    """A local folder. Symbolic links to folders are not followed."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self._entries: list[Entry] | None = None

    @property
    def root_name(self) -> str:
        return self.root.name

    def entries(self) -> Sequence[Entry]:
        if self._entries is None:
            found: list[Entry] = []
            for folder, dirs, files in os.walk(self.root):
                dirs.sort()
                base = Path(folder)
                for name in files:
                    path = base / name
                    try:
                        stat = path.stat()
                    except OSError:
                        continue
                    if not path.is_file():
                        continue
                    key = path.relative_to(self.root).as_posix()
                    found.append(Entry(key, stat.st_size, str(stat.st_mtime_ns)))
            self._entries = sorted(found, key=lambda entry: entry.key)
        return self._entries

    def read(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def open(self, key: str) -> BinaryIO:
        """The file as a buffered binary stream; the caller closes it."""
        return (self.root / key).open("rb")

    def loan(self, key: str, pool: MappingPool | None = None) -> contextlib.AbstractContextManager[bytes | mmap.mmap]:
        """The file's bytes for the length of a ``with`` block, read into an anonymous
        mapping lent by ``pool`` (see :mod:`stormwatch.load.file_mappings`) rather than the C heap."""
        return lend_file(self.root / key, pool)

    def size_bytes(self, key: str) -> int | None:
        """The file's size from ``stat`` (no byte read), ``None`` when it cannot be stat'ed."""
        try:
            return (self.root / key).stat().st_size
        except OSError:
            return None

    def exists(self, key: str) -> bool:
        return (self.root / key).is_file()

    def identity(self, key: str) -> str:
        return str(self.root / key) if key else str(self.root)


class MemoryTree:
    """An in-memory tree (key -> bytes), e.g. objects fetched from S3 by the caller.

    ``withheld`` lists objects that exist but were not fetched (key -> size in
    bytes, e.g. over the artifact cap): they appear in ``entries`` with their
    size, so the loader skips them with a warning naming the size, but cannot be read.
    """

    def __init__(
        self,
        objects: dict[str, bytes],
        *,
        name: str = "memory",
        versions: dict[str, str] | None = None,
        withheld: dict[str, int] | None = None,
    ) -> None:
        self._objects = dict(objects)
        self._name = name
        self._versions = versions or {}
        self._withheld = dict(withheld or {})

    @property
    def root_name(self) -> str:
        return self._name.rstrip("/").rsplit("/", 1)[-1]

    def entries(self) -> Sequence[Entry]:
        sizes = {**self._withheld, **{key: len(data) for key, data in self._objects.items()}}
        return [Entry(key, size, self._versions.get(key, "")) for key, size in sorted(sizes.items())]

    def read(self, key: str) -> bytes:
        return self._objects[key]

    def open(self, key: str) -> BinaryIO:
        return io.BytesIO(self._objects[key])

    def size_bytes(self, key: str) -> int | None:
        if key in self._objects:
            return len(self._objects[key])
        return self._withheld.get(key)

    def exists(self, key: str) -> bool:
        return key in self._objects

    def identity(self, key: str) -> str:
        return f"{self._name.rstrip('/')}/{key}" if key else self._name
