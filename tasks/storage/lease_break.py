"""``stormwatch audit --break-lease``: end a lease whose holder is gone, never a live one.

A holder is gone when its lease has expired, when it ran on this host and its process is no
longer running, or when it does not renew the lease while we watch for longer than its
renewal interval (a live holder renews every third of the lease's time to live, see
:mod:`stormwatch.tasks.storage.lease`). A lease that is renewed while we watch belongs to a
running audit and is left alone. The lease is deleted only if it is still the version read, so
a holder that renews at the last moment keeps it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from stormwatch.tasks.storage.lease import (
    AUDIT_LEASE,
    DEFAULT_TTL_S,
    LeaseRecord,
    holder_gone,
    lease_key,
    utc_now,
)
from stormwatch.tasks.storage.protocol import Storage

#: How long to watch a lease for a renewal: a live holder renews every ttl/3 seconds; the margin
#: covers one slow renewal round trip.
WATCH_S = DEFAULT_TTL_S / 3 + 10.0
_POLL_S = 1.0


class BreakOutcome(StrEnum):
    NO_LEASE = "no lease"
    BROKEN = "broken"
    ALIVE = "alive"  # renewed while watched, or changed hands: left alone
    LOST_RACE = "changed"  # replaced or released between our read and our delete


@dataclass(frozen=True)
class BreakResult:
    outcome: BreakOutcome
    message: str
    record: LeaseRecord | None = None


def break_lease(storage: Storage, *, name: str = AUDIT_LEASE, watch_s: float = WATCH_S,
                sleep: Callable[[float], None] = time.sleep) -> BreakResult:
    """End the lease ``name`` if its holder is gone (see the module's docstring); one line says what
    was done. ``watch_s``: the longest wait for a renewal before the holder counts as gone."""
    key = lease_key(name)
    current = storage.read_report_versioned(key)
    if current is None:
        return BreakResult(BreakOutcome.NO_LEASE, f"no lease held: {storage.report_uri(key)} does not exist")
    body, version = current
    record = LeaseRecord.from_bytes(body)
    why = _gone_at_once(record)
    deadline = time.monotonic() + watch_s
    while why is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            assert record is not None  # an unreadable record is gone at once
            why = f"its holder {record.owner} did not renew it in {watch_s:g} s"
            break
        sleep(min(_POLL_S, remaining))
        now = storage.read_report_versioned(key)
        if now is None:
            return BreakResult(BreakOutcome.LOST_RACE, "the lease was released while we watched", record)
        if now[1] != version:
            renewed = LeaseRecord.from_bytes(now[0])
            holder = renewed.owner if renewed is not None else "its holder"
            return BreakResult(BreakOutcome.ALIVE, f"lease left alone: {holder} renewed it, so that audit is "
                                                   "running", renewed)
    if not storage.delete_report_if(key, version=version):
        return BreakResult(BreakOutcome.LOST_RACE, "lease left alone: it changed hands as we broke it", record)
    return BreakResult(BreakOutcome.BROKEN, f"lease {storage.report_uri(key)} broken: {why}", record)


def _gone_at_once(record: LeaseRecord | None) -> str | None:
    """Why the holder is gone without watching, or None when only watching can tell."""
    if record is None:
        return "it is not a lease document"
    if record.expired(utc_now()):
        return f"it expired ({record.describe()})"
    if holder_gone(record):
        return f"its holder {record.owner} is no longer running on this host"
    return None
