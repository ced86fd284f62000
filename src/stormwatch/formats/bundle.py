"""Diagnose bundles: ``telemetry_timeline.json`` (+ ``manifest.json``) as sample events.

The bundle holds parallel lists (``timestamps`` in seconds, ``allocated``,
optional ``reserved`` in bytes). Its rank comes from the payload, else from a
``rank_N`` path segment at or below the input root, else the next rank no other
artifact of the job uses. Differences from stormlog 0.3.5, on purpose: the
path is searched only from the input root down (stormlog looks at every parent
folder), and a sample that is not a number drops only itself (stormlog raises).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import pandas as pd

from stormwatch.events.session_ids import stable_legacy_session_id
from stormwatch.events.sessions import SessionStatus, SessionSummary, parse_status, summary_from_mapping
from stormwatch.formats.bad_input import describe_problems
from stormwatch.formats.bundle_samples import sample_events
from stormwatch.formats.json_value import parse_json_object, parse_json_value

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])(?<!local[_-])rank[_-]?(?P<rank>\d+)(?:[^0-9]|$)", re.IGNORECASE)


@dataclass
class RankAllocator:
    """Ranks already used by the job's artifacts, and the largest world size seen."""

    used: set[int] = field(default_factory=set)
    max_world_size: int = 1

    def register(self, rank: int, world_size: int) -> None:
        self.used.add(rank)
        self.max_world_size = max(self.max_world_size, world_size)

    def next_free(self) -> int:
        rank = 0
        while rank in self.used:
            rank += 1
        return rank


@dataclass(frozen=True)
class RankContext:
    rank: int
    local_rank: int
    world_size: int
    source: str


@dataclass(frozen=True)
class TimelineResult:
    summary: SessionSummary
    events: pd.DataFrame
    warnings: tuple[str, ...]


def rank_from_segments(segments: Sequence[str]) -> int | None:
    """The first ``rank_N`` among path segments, nearest the file first."""
    for segment in segments:
        match = _RANK_IN_NAME.search(segment)
        if match:
            return int(match.group("rank"))
    return None


def _hint(value: Any, *, minimum: int) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if number > _LARGEST_RANK:
        return None  # no real rank; taken as absent, so the path or the allocator decides
    return number if number >= minimum else None


_LARGEST_RANK = 2**62  # rank + 1 and world sizes derived from it must stay within int64


def _first_hint(payload: Mapping[str, Any], name: str, *, minimum: int) -> int | None:
    metadata = payload.get("metadata")
    identity = payload.get("distributed_identity")
    for holder in (payload, metadata, identity):
        if isinstance(holder, Mapping):
            found = _hint(holder.get(name), minimum=minimum)
            if found is not None:
                return found
    return None


def resolve_rank(payload: Mapping[str, Any], segments: Sequence[str], allocator: RankAllocator) -> RankContext:
    hinted = _first_hint(payload, "rank", minimum=0)
    from_path = rank_from_segments(segments)
    if hinted is not None:
        rank, source = hinted, "payload"
    elif from_path is not None:
        rank, source = from_path, "path"
    else:
        rank, source = allocator.next_free(), "allocator"
    local_hint = _first_hint(payload, "local_rank", minimum=0)
    local_rank = local_hint if local_hint is not None else rank
    floor = max(rank + 1, local_rank + 1, allocator.max_world_size, len(allocator.used | {rank}))
    world_hint = _first_hint(payload, "world_size", minimum=1)
    world_size = max(world_hint if world_hint is not None else floor, floor)
    allocator.register(rank, world_size)
    return RankContext(rank=rank, local_rank=local_rank, world_size=world_size, source=source)


def _iso_to_ns(value: Any) -> int | None:
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    text = f"{text[:-1]}+00:00" if text.endswith("Z") else text
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1_000_000_000)
    except ValueError:
        return None


def summary_from_bundle_manifest(
    data: bytes | None, context: RankContext, *, first_sample_ns: int
) -> SessionSummary | None:
    """The session a bundle's manifest states (new ``session`` object or old flat keys).

    An old-layout manifest without ``created_iso`` starts at the first sample
    (stormlog stamps the time of loading, which would change on every run).
    """
    payload = None if data is None else parse_json_object(data)
    if payload is None:
        return None
    nested = payload.get("session")
    if isinstance(nested, Mapping):
        try:
            summary = summary_from_mapping(nested)
        except ValueError:
            pass
        else:
            return replace(summary, rank=context.rank, local_rank=context.local_rank, world_size=context.world_size)
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id.strip():
        return None
    try:
        status = parse_status(payload.get("session_status", SessionStatus.INCOMPLETE.value))
    except ValueError:
        status = SessionStatus.INCOMPLETE
    started = _iso_to_ns(payload.get("created_iso"))
    if started is None:
        started = first_sample_ns
    return SessionSummary(
        session_id=session_id,
        status=status,
        started_at_ns=started,
        ended_at_ns=started if status != SessionStatus.RUNNING else None,
        host="unknown",
        pid=-1,
        rank=context.rank,
        local_rank=context.local_rank,
        world_size=context.world_size,
        source="stormlog.diagnose.bundle",
    )


def _valid_unicode(*texts: str | None) -> bool:
    try:
        for text in texts:
            if text is not None and not text.isascii():
                text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_timeline(
    data: bytes,
    *,
    label: str,
    identity: str,
    segments: Sequence[str],
    manifest: bytes | None,
    allocator: RankAllocator,
) -> TimelineResult | str:
    """Sample rows of a bundle, or the reason it has none (a warning text)."""
    try:
        payload = parse_json_value(data.removeprefix(b"\xef\xbb\xbf"))  # a BOM, as JSON exports allow
    except (ValueError, UnicodeDecodeError) as exc:
        return f"Failed to read timeline payload {label}: {exc}"
    if not isinstance(payload, Mapping):
        return f"Timeline payload is not a JSON object: {label}"
    stamps, allocated, reserved = payload.get("timestamps"), payload.get("allocated"), payload.get("reserved")
    if not isinstance(stamps, list) or not isinstance(allocated, list):
        return f"Invalid timeline payload shape in {label}"
    if not stamps or not allocated:
        return f"Timeline payload has no samples in {label}"
    reserved = reserved if isinstance(reserved, list) else allocated
    count = min(len(stamps), len(allocated), len(reserved))
    if count == 0:
        return f"Timeline payload has no aligned samples in {label}"
    try:
        started = int(float(stamps[0]) * 1_000_000_000)
    except (TypeError, ValueError, OverflowError):
        return f"Timeline payload has no usable first timestamp in {label}"
    context = resolve_rank(payload, segments, allocator)
    summary = summary_from_bundle_manifest(manifest, context, first_sample_ns=started)
    if summary is not None and not _valid_unicode(summary.session_id, summary.host, summary.job_id):
        summary = None  # a lone surrogate would refuse every sample stamped with it
    if summary is None:
        summary = SessionSummary(
            session_id=stable_legacy_session_id(identity, "diagnose.timeline"),
            status=SessionStatus.INCOMPLETE,
            started_at_ns=started,
            ended_at_ns=None,
            host="unknown",
            pid=-1,
            rank=context.rank,
            local_rank=context.local_rank,
            world_size=context.world_size,
            source="stormlog.diagnose.timeline",
        )
    events, problems = sample_events(stamps, allocated, reserved, count=count, summary=summary)
    lengths = (len(stamps), len(allocated), len(reserved))
    uneven = [] if len(set(lengths)) == 1 else [
        f"{label}: timeline lists of unequal length (timestamps {lengths[0]}, allocated {lengths[1]}, "
        f"reserved {lengths[2]}); samples past the shortest ({count}) are ignored"
    ]
    note = (
        "Synthesized telemetry events from telemetry_timeline.json; "
        f"assigned rank={context.rank} world_size={context.world_size} "
        f"(source={context.source}, session_id={summary.session_id}, status={summary.status})."
    )
    return TimelineResult(summary, events, (*uneven, *describe_problems(label, problems, where="sample"), note))
