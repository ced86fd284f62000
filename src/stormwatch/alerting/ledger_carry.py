"""What a ledger fold carries forward: the decisions a notify step can still need, nothing older.

A notify step reads a ledger line for four things, and each needs only the newest line of an alert:
the previous decision of a finding it decides again (an alert's record names its newest finding),
the claims an audit left (its sends are its alerts' newest lines), the alerts to recall when the alert
state is lost (the newest line of each alert says whether it fires), and a run decided once (its
lines, or a newer run's line for the same alert: the alert state knows the run). So a fold keeps
the newest line of each alert (``alert`` fingerprint; a line from before fingerprints, by its key)
and the newest note of each configuration file, and moves everything it read to an archive file
that no step reads. ``notifications.jsonl`` then grows with alerts (job names times kinds), not
with runs; the archive files keep every decision for people.

A carried ledger starts with a :data:`CARRIED` line naming the last archive folded into it: its own
lines are all in archives already, and an archive named after it is one a fold wrote before it was
killed, still to be read (:mod:`stormwatch.tasks.notify.ledger_store`).
"""

from __future__ import annotations

import orjson

from stormwatch.alerting.ledger import ConfigNote, Decision, LedgerState, newest_per_alert
from stormwatch.alerting.push_notes import PushNote

#: The ``type`` of a carried ledger's first line: ``{"type": "carried", "decided_at": ..., "archive": ...}``.
CARRIED = "carried"


def carried_header(data: bytes | None) -> bytes:
    """The first line of ``data`` when it is a :data:`CARRIED` line (with its newline), else ``b""``."""
    head, newline, _ = (data or b"").partition(b"\n")
    if not newline or b'"type"' not in head:
        return b""
    try:
        document = orjson.loads(head)
    except orjson.JSONDecodeError:
        return b""
    return head + newline if isinstance(document, dict) and document.get("type") == CARRIED else b""


def newest_lines(state: LedgerState) -> list[Decision | ConfigNote | PushNote]:
    """The newest decision of each alert (by ``decided_at``; a line without a fingerprint counts as
    its own alert), the newest note of each file and the newest push line of each Pushgateway, oldest
    first, so that reading them back gives ``state``'s newest decisions again."""
    kept: list[Decision | ConfigNote | PushNote] = [*newest_per_alert(state).values(), *state.config.values(),
                                                    *state.pushes.values()]
    return sorted(kept, key=lambda line: line.decided_at)


def carried_archive(data: bytes | None) -> str | None:
    """The archive key a carried ledger's first line names (the last archive folded into it), else None."""
    header = carried_header(data)
    if not header:
        return None
    archive = orjson.loads(header).get("archive")
    return archive if isinstance(archive, str) else None


def carried_ledger(state: LedgerState, *, stamp: str, archive_key: str) -> bytes:
    """A carried ledger: the :data:`CARRIED` line (``stamp``, ``archive_key``: the archive holding the
    lines this fold moved out) and :func:`newest_lines` of ``state``."""
    header = orjson.dumps({"type": CARRIED, "decided_at": stamp, "archive": archive_key}) + b"\n"
    return header + b"".join(line.to_line() for line in newest_lines(state))
