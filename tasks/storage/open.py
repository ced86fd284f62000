"""Opening a storage root: the backend for a settings object, one per settings per process."""

from __future__ import annotations

import functools

from stormwatch.tasks.storage.protocol import Storage, StorageSettings


def open_storage(settings: StorageSettings) -> Storage:
    """A new backend for ``settings.uri``: :class:`S3Storage` for ``s3://``, else :class:`LocalStorage`."""
    if settings.scheme == "s3":
        # boto3 is slow to import and local runs never need it (see bench/README.md, cli_bench.py)
        from stormwatch.tasks.storage.s3 import S3Storage

        return S3Storage(settings)
    from stormwatch.tasks.storage.local import LocalStorage

    return LocalStorage(settings)


@functools.lru_cache(maxsize=16)
def storage_for(settings: StorageSettings) -> Storage:
    """One storage (and S3 client, thread-safe) per settings per process."""
    return open_storage(settings)
