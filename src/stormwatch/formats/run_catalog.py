"""stormlog's run catalogs (``stormlog_run.json``, the run envelope v1): the identity they give sessions.

stormlog 0.4.3 writes a run envelope beside an inference artifact
(``stormlog.infer.correlation_capture.append_inference_capture``) and reads it only in its query
catalog; its diagnostics never read it, so it is no telemetry (:mod:`stormwatch.load.non_telemetry`
leaves it out of discovery). One thing in it is of use to diagnostics: each listed session's
identity (job id, rank, local rank, world size). A session whose own telemetry states none takes it
(:func:`with_catalog_identity`), so that its events count as that rank of that job.

Read leniently, as sink manifests are: a file that is not a v1 envelope is as good as none, and a
session entry without a whole identity (a non-empty job id, a rank and a world size, with
``0 <= rank < world_size`` and ``0 <= local_rank < world_size``) gives none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from stormwatch.events.frame import repeated_string
from stormwatch.events.sessions import SessionPart
from stormwatch.formats.json_value import parse_json_object

RUN_CATALOG_NAME = "stormlog_run.json"
RUN_CATALOG_FORMAT = "stormlog.run_envelope"
RUN_CATALOG_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class CatalogIdentity:
    """A session's identity as a run catalog states it.

    Invariants: ``job_id`` is non-empty; ``0 <= rank < world_size``; ``0 <= local_rank < world_size``
    (``local_rank`` is ``rank`` when the catalog leaves it out, as stormlog's identity rules have it).
    """

    session_id: str
    job_id: str
    rank: int
    local_rank: int
    world_size: int


def is_run_catalog(payload: Mapping[str, Any]) -> bool:
    """Whether a JSON object advertises the run envelope v1 format (stormlog's ``is_run_envelope``)."""
    version = payload.get("schema_version")
    return (type(version) is int and version == RUN_CATALOG_SCHEMA_VERSION
            and payload.get("format") == RUN_CATALOG_FORMAT)


def _count(value: object, *, minimum: int) -> int | None:
    """An integer of at least ``minimum`` (bools are not integers here, as in stormlog), else None."""
    return value if type(value) is int and value >= minimum else None


def _identity(entry: object) -> CatalogIdentity | None:
    if not isinstance(entry, Mapping):
        return None
    session_id, job_id = entry.get("session_id"), entry.get("job_id")
    if not isinstance(session_id, str) or not session_id.strip():
        return None
    if not isinstance(job_id, str) or not job_id.strip():
        return None
    rank = _count(entry.get("rank"), minimum=0)
    world_size = _count(entry.get("world_size"), minimum=1)
    raw_local = entry.get("local_rank")
    local_rank = rank if raw_local is None else _count(raw_local, minimum=0)
    if rank is None or world_size is None or local_rank is None:
        return None
    if rank >= world_size or local_rank >= world_size:
        return None
    return CatalogIdentity(session_id=session_id, job_id=job_id, rank=rank, local_rank=local_rank,
                           world_size=world_size)


def parse_run_catalog(raw: bytes) -> tuple[CatalogIdentity, ...]:
    """The whole identities a run catalog's ``sessions`` list (an entry without a whole identity
    states none); raises ``ValueError`` saying why when ``raw`` is no v1 envelope."""
    payload = parse_json_object(raw)
    if payload is None:
        raise ValueError("not a JSON object")
    if not is_run_catalog(payload):
        raise ValueError("not a version-1 run catalog")
    sessions = payload.get("sessions", [])
    if not isinstance(sessions, list):
        raise ValueError("its sessions member is not a list")
    return tuple(identity for identity in map(_identity, sessions) if identity is not None)


def _by_session(identities: Iterable[CatalogIdentity]) -> dict[str, CatalogIdentity]:
    """One identity per session id; a session two catalogs give different identities takes neither
    (which of them holds is not ours to guess)."""
    found: dict[str, CatalogIdentity | None] = {}
    for identity in identities:
        known = found.get(identity.session_id, identity)
        found[identity.session_id] = identity if known == identity else None
    return {session_id: identity for session_id, identity in found.items() if identity is not None}


def lacks_identity(part: SessionPart) -> bool:
    """Whether a session states no identity: no job id and a world of one, in its summary and in
    every event (what a record without ``job_id``/``rank``/``world_size`` loads as)."""
    summary, events = part.summary, part.events
    if summary.job_id is not None or summary.world_size != 1 or summary.rank != 0:
        return False
    return bool(events["job_id"].isna().all() and (events["world_size"].to_numpy() == 1).all()
                and (events["rank"].to_numpy() == 0).all())


def _with_identity(part: SessionPart, identity: CatalogIdentity) -> SessionPart:
    events = part.events
    size = len(events)
    stamped = events.assign(
        job_id=repeated_string(identity.job_id, size),
        rank=np.full(size, identity.rank, dtype=np.int64),
        local_rank=np.full(size, identity.local_rank, dtype=np.int64),
        world_size=np.full(size, identity.world_size, dtype=np.int64),
    )
    summary = replace(part.summary, job_id=identity.job_id, rank=identity.rank, local_rank=identity.local_rank,
                      world_size=identity.world_size)
    return replace(part, summary=summary, events=stamped)


def with_catalog_identity(parts: Sequence[SessionPart], identities: Iterable[CatalogIdentity]) -> list[SessionPart]:
    """``parts`` in the same order, each session that :func:`lacks_identity` and that a run catalog
    names (by session id) stamped with the catalog's identity, summary and events alike. Sessions
    that state an identity of their own keep it: a catalog fills a gap, never overrides."""
    named = _by_session(identities)
    if not named:
        return list(parts)
    return [_with_identity(part, named[part.summary.session_id])
            if part.summary.session_id in named and lacks_identity(part) else part
            for part in parts]
