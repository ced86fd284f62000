"""The fleet index's headroom line (issue 30): how much GPU memory the fleet's jobs left unused, in
GiB·hours, and which jobs used under half of their GPUs, from fleet.json's ``headroom`` member
(:func:`stormwatch.outputs.fleet_summary.headroom`).

The member is bounded (it lists at most 100 jobs under half, least used first, and counts the rest),
and the page shows at most :data:`MAX_LISTED` of them, folded under a ``<details>``, so a 10,000-job
fleet costs the index a few lines. An older fleet.json without the member gives no line. Job ids
and report links are telemetry: plain text here (links made safe by
:func:`~stormwatch.reports.fleetview.report_href`), escaped by the template.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.reports.fields import as_int, as_list, as_mapping
from stormwatch.reports.fleetview import report_href
from stormwatch.reports.formatting import format_count
from stormwatch.reports.jobgrowth import format_gib_hours, format_used_percent

MAX_LISTED = 20  # jobs under half linked on the page; the rest are in fleet.json


@dataclass(frozen=True, kw_only=True)
class UnderHalf:
    job_id: str
    used_percent: str
    href: str | None


@dataclass(frozen=True, kw_only=True)
class FleetHeadroomView:
    """``unused``: ``1,234.5 GiB·h``; ``counted``: jobs with a used percent; ``under_count``: jobs under
    ``under_percent``; ``listed``: the first of them, least used first; ``more``: the rest."""

    unused: str
    counted: int
    under_percent: str
    under_count: int
    listed: tuple[UnderHalf, ...]

    @property
    def more(self) -> int:
        return self.under_count - len(self.listed)

    @property
    def counted_text(self) -> str:
        return counted_jobs(self.counted)

    @property
    def under_text(self) -> str:
        return counted_jobs(self.under_count)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def fleet_headroom_view(fleet: Mapping[str, Any]) -> FleetHeadroomView | None:
    """The line of fleet.json's ``headroom``; None when fleet.json has none (or no job measured)."""
    member = as_mapping(fleet.get("headroom"))
    counted = as_int(member.get("jobs_counted")) or 0
    if not member or counted <= 0:
        return None
    items = [item for item in as_list(member.get("jobs_under_half")) if isinstance(item, Mapping)]
    listed = tuple(UnderHalf(job_id=str(item.get("job_id") or ""),
                             used_percent=format_used_percent(_number(item.get("used_percent"))),
                             href=report_href(item.get("report"))) for item in items[:MAX_LISTED])
    under = max(as_int(member.get("jobs_under_half_count")) or 0, len(items))
    threshold = _number(member.get("under_percent"))
    return FleetHeadroomView(unused=format_gib_hours(_number(member.get("unused_gib_hours"))), counted=counted,
                             under_percent=f"{threshold if threshold is not None else 50:.0f} %",
                             under_count=under, listed=listed)


def counted_jobs(count: int) -> str:
    """``1 job``, ``1,204 jobs``."""
    return f"{format_count(count)} job{'s' if count != 1 else ''}"
