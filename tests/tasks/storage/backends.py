"""A storage under test plus direct access to its root (a folder, or an S3 prefix through a
plain client), so tests check what really landed where, not what the storage says."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stormwatch.tasks.storage.open import open_storage
from stormwatch.tasks.storage.protocol import Storage, StorageSettings
from stormwatch.tasks.storage.s3 import S3Storage


@dataclass
class Backend:
    """A storage under test plus direct access to its root, bypassing the storage code.

    Root-relative keys (``"jobs/j/a.json"``) name inputs and reports on both backends.
    """

    name: str
    settings: StorageSettings
    storage: Storage
    put: Callable[[str, bytes], None]
    get: Callable[[str], bytes | None]
    stored_keys: Callable[[], set[str]]
    version: Callable[[str], str]  # what an Entry's version must be for a root-relative key

    def upload(self, folder: Path, under: str) -> None:
        """Copy every file below ``folder`` to root-relative ``under/<relative path>``."""
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                self.put(f"{under}/{path.relative_to(folder).as_posix()}", path.read_bytes())

    def reopen(self, **changes: Any) -> Storage:
        """The same root with other settings."""
        return open_storage(dataclasses.replace(self.settings, **changes))


def local_backend(root: Path) -> Backend:
    root.mkdir(parents=True, exist_ok=True)

    def put(key: str, data: bytes) -> None:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def get(key: str) -> bytes | None:
        path = root / key
        return path.read_bytes() if path.is_file() else None

    def keys() -> set[str]:
        return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}

    settings = StorageSettings(uri=str(root))
    return Backend(
        name="local", settings=settings, storage=open_storage(settings), put=put, get=get, stored_keys=keys,
        version=lambda key: str((root / key).stat().st_mtime_ns),
    )


def s3_backend(client: Any, bucket: str, prefix: str = "fleet/nightly") -> Backend:
    """An S3 backend whose storage shares ``client``: ``reopen`` builds a storage with its own."""
    endpoint = client.meta.endpoint_url

    def put(key: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=data)

    def get(key: str) -> bytes | None:
        try:
            return client.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read()
        except client.exceptions.NoSuchKey:
            return None

    def keys() -> set[str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return {item["Key"][len(prefix) + 1 :] for page in pages for item in page.get("Contents", ())}

    def version(key: str) -> str:
        data = get(key)
        assert data is not None
        return hashlib.md5(data).hexdigest()  # moto's ETag of a single-part PUT, as S3's

    settings = StorageSettings(uri=f"s3://{bucket}/{prefix}", endpoint_url=endpoint)
    return Backend(name="s3", settings=settings, storage=S3Storage(settings, client=client), put=put, get=get,
                   stored_keys=keys, version=version)
