"""Leaks as findings: one fact of kind ``leak`` per leaking rank of a job, from its growth figures.

The figures are model.json's ``fleet.growth`` (one :class:`~stormwatch.growth.figures.RankGrowth`
per present rank, what :class:`~stormwatch.peers.job_facts.FleetFacts` ``.growth`` holds). A rank
is a finding when its figure says ``leak`` (significant and above the leak threshold; a rank
without a figure, whatever the reason, never is). The fact says how fast it grows and when, at
that rate, it would run out of its device::

    rank 3 on node-07 GPU 3 grows 1.2 GiB/h; at this rate it would run out of the 80 GiB device 3.4 h after start

Kind ``leak``, signal ``leak:rank-<rank>`` (so each leaking rank is its own alert of the job name,
routable by ``kind = "leak"`` and silenceable by ``kind=leak``), severity warning, sent whatever
``notify_on`` (:data:`~.kinds.ALWAYS_SENT`). Its ledger key is the run's (job id, ``leak``, rank):
the ledger's normal dedup sends it once per run, the alert state once while the job name leaks.
:mod:`.findings` makes the facts (``JobFinding.leaks``) with the texts made here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stormwatch.alerting.kinds import AlertKind
from stormwatch.growth.figures import RankGrowth
from stormwatch.outputs.document_fleet import rank_growth_from_json
from stormwatch.outputs.json_members import Members, child_path

GIB = float(1 << 30)
_UNREADABLE = (ValueError, TypeError, KeyError)


def _number(value: float) -> str:
    """``80``, ``1.2``, ``0.25``: short, without a trailing ``.0``."""
    text = f"{value:.2f}" if value < 1 else f"{value:.1f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def leak_text(growth: RankGrowth, *, host: str | None = None, device_id: int | None = None) -> str:
    """``rank 3 on node-07 GPU 3 grows 1.2 GiB/h; at this rate it would run out of the 80 GiB device
    3.4 h after start`` (the place when known; the projection when the figure has one)."""
    rate = growth.judged_bytes_per_hour or 0.0
    place = "" if host is None else f" on {host} GPU {'?' if device_id is None else device_id}"
    text = f"rank {growth.rank}{place} grows {_number(rate / GIB)} GiB/h"
    if growth.capacity_after_start_s is not None and growth.device_total_bytes:
        hours = growth.capacity_after_start_s / 3600
        text += (f"; at this rate it would run out of the {_number(growth.device_total_bytes / GIB)} GiB device "
                 f"{_number(hours)} h after start")
    return text


def leak_signal(rank: int) -> str:
    """``leak:rank-3``: one alert per leaking rank of a job name."""
    return f"{AlertKind.LEAK.value}:rank-{rank}"


def growth_of_document(document: Mapping[str, Any]) -> tuple[RankGrowth, ...]:
    """model.json's ``fleet.growth`` figures; none when the document has no fleet member or no growth
    (written before growth was measured). An unreadable figure is left out: it never becomes a finding."""
    fleet = document.get("fleet")
    items = fleet.get("growth") if isinstance(fleet, Mapping) else None
    if not isinstance(items, list):
        return ()
    found = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        try:
            found.append(rank_growth_from_json(Members(item, child_path("fleet.growth", index))))
        except _UNREADABLE:
            continue
    return tuple(found)
