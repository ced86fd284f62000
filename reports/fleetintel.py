"""Fleet comparisons on the index (issue 16): per-night trends, regressions against earlier runs,
suspect hosts and devices, and the fleet's telemetry coverage, from fleet.json's optional
``trends``, ``regressions``, ``suspect_hosts`` and ``coverage`` members.

Each member may be absent (an older fleet.json) or malformed: the view is then empty and the
page says "no history yet". Values: counts are ints, memory in bytes (shown in GiB/MiB),
``change_pct`` and coverage ``percent`` in percent (0–100), ``rate`` / ``fleet_rate`` as
fractions (0–1). Also read: the engine's current spellings (a night's counts under ``verdicts``,
``peak_reserved_p95_bytes``, coverage ``ranks_present_percent``). Hosts, job ids and names are
hostile telemetry: plain text here, escaped by the template. Tables are capped at
:data:`MAX_TABLE_ROWS` rows (the rest stays in fleet.json).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stormwatch.analysis.rank_filter import format_ranks
from stormwatch.outputs.verdict import VerdictStatus
from stormwatch.reports.fields import as_int, as_list, as_mapping
from stormwatch.reports.formatting import NOT_AVAILABLE, format_bytes, format_count
from stormwatch.reports.minicharts import MiniChart, bytes_line, stacked_bars

MAX_NIGHTS = 90  # nights charted: the latest ones
MIN_TREND_NIGHTS = 2  # one night is no trend: the page says trends start after a second night
MAX_TABLE_ROWS = 50  # the rest stays in fleet.json; the job list stays near the top
#: Verdicts worst first: the stacking order of the verdict bars (bottom first) and of their legend.
VERDICT_STACK = tuple(status.value for status in sorted(VerdictStatus, key=lambda status: -status.rank))
METRIC_LABELS = {"peak_reserved_bytes": "Peak reserved", "hidden_gap_peak_bytes": "Hidden gap peak",
                 "peak_allocated_bytes": "Peak allocated", "peak_device_used_bytes": "Peak device used"}


@dataclass(frozen=True)
class Trends:
    nights: int  # nights charted
    omitted: int  # older nights not charted
    latest: str  # one line on the latest night
    jobs: MiniChart
    verdicts: MiniChart
    p95_reserved: MiniChart
    legend: tuple[str, ...] = VERDICT_STACK  # the verdict bars' keys, bottom first
    last_night: str = ""  # the latest night charted (YYYY-MM-DD)

    @property
    def charted(self) -> bool:
        """Whether there is a trend to draw: :data:`MIN_TREND_NIGHTS` nights or more."""
        return self.nights >= MIN_TREND_NIGHTS


@dataclass(frozen=True)
class RegressionRow:
    job_id: str
    job_name: str
    href: str | None  # the job's report, relative and percent-encoded (from its fleet row), or None
    metric: str
    value: str
    baseline: str
    change: str
    baseline_runs: str
    owner: str = ""  # "explained by suspect device node-bad/2", "rank 3 (node-01, GPU 2)" or "" (not known)
    explained: bool = False  # a suspect device explains it: the device's problem, not the job's


@dataclass(frozen=True)
class SuspectRow:
    host: str
    device: str
    jobs: str
    anomalous_jobs: str
    rate: str
    fleet_rate: str
    ratio: str  # how many times the fleet's rate


@dataclass(frozen=True)
class Coverage:
    facts: tuple[tuple[str, str], ...]  # (label, value), in display order
    schema_versions: str  # "v3: 120 · v4: 5"
    collectors: str


@dataclass(frozen=True)
class FleetIntel:
    trends: Trends | None
    regressions: tuple[RegressionRow, ...] | None  # None: no regression data at all (older fleet.json)
    regressions_omitted: int
    suspects: tuple[SuspectRow, ...] | None
    suspects_omitted: int
    coverage: Coverage | None

    @property
    def mentions_hidden_gap(self) -> bool:
        """Whether the regressions table speaks of the hidden gap (a metric of it regressed)."""
        return any("hidden gap" in row.metric.lower() for row in self.regressions or ())


def _text(value: Any) -> str:
    return NOT_AVAILABLE if value is None or value == "" else str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _bytes(value: Any) -> str:
    number = _number(value)
    return format_bytes(number if number is None or not float(number).is_integer() else int(number))


def format_percent(value: Any, *, signed: bool = False, fraction: bool = False) -> str:
    """``17.7 %`` (``+17.7 %`` when ``signed``); ``fraction`` values are 0–1 and scaled to percent."""
    number = _number(value)
    if number is None:
        return NOT_AVAILABLE
    number = number * 100 if fraction else number
    return f"{number:+.1f} %" if signed else f"{number:.1f} %"


def _count(value: Any) -> str:
    return format_count(as_int(value))


def tally(value: Any, *, prefix: str = "") -> str:
    """``{"3": 120, "4": 5}`` as ``v3: 120 · v4: 5`` (``prefix`` "v"), largest first; "—" when empty."""
    items = [(str(key), count) for key, count in as_mapping(value).items() if as_int(count) is not None]
    items.sort(key=lambda item: (-int(item[1]), item[0]))
    return " · ".join(f"{prefix}{key}: {format_count(int(count))}" for key, count in items) or NOT_AVAILABLE


def coverage_view(value: Any) -> Coverage | None:
    """A fleet's or a job's coverage block (the job's has no ``jobs``); None when absent."""
    if not isinstance(value, Mapping) or not value:
        return None
    present, expected = as_int(value.get("present_ranks")), as_int(value.get("expected_ranks"))
    ranks = f"{format_count(present)} of {format_count(expected)}" if present is not None and expected is not None \
        else NOT_AVAILABLE
    facts = [("Jobs", _count(value.get("jobs")))] if "jobs" in value else []
    percent = _number(value.get("percent"))
    percent = _number(value.get("ranks_present_percent")) if percent is None else percent
    if percent is None and present is not None and expected:
        percent = 100 * present / expected
    facts += [
        ("Ranks present", f"{format_percent(percent)} ({ranks})"),
        ("Sessions", _count(value.get("sessions"))),
        ("Sessions without stop", _count(value.get("sessions_without_stop"))),
        ("Load warnings", _count(value.get("load_warnings"))),
    ]
    if "ended_abruptly" in value:  # coverage written before the count existed leaves the row out
        abrupt = [rank for rank in as_list(value.get("ended_abruptly_ranks")) if as_int(rank) is not None]
        named = f" (rank{'s' if len(abrupt) > 1 else ''} {format_ranks(abrupt)})" if abrupt else ""
        facts.append(("Ranks ended abruptly", _count(value.get("ended_abruptly")) + named))
    return Coverage(tuple(facts), tally(value.get("schema_versions"), prefix="v"), tally(value.get("collectors")))


def _first_int(item: Mapping[str, Any], *keys: str) -> int | None:
    return next((as_int(item[key]) for key in keys if as_int(item.get(key)) is not None), None)


def _night_count(item: Mapping[str, Any], key: str) -> int | None:
    """A night's count: flat (``"critical": 2``) or under ``verdicts`` (``"verdicts": {"critical": 2}``)."""
    count = as_int(item.get(key))
    return count if count is not None else as_int(as_mapping(item.get("verdicts")).get(key))


def _trends(value: Any) -> Trends | None:
    items = [item for item in as_list(value) if isinstance(item, Mapping) and isinstance(item.get("night"), str)]
    if not items:
        return None
    shown = items[-MAX_NIGHTS:]
    nights = [str(item["night"]) for item in shown]
    counts = [{key: max(_night_count(item, key) or 0, 0) for key in ("jobs", *VERDICT_STACK)} for item in shown]
    p95 = [_first_int(item, "p95_peak_reserved_bytes", "peak_reserved_p95_bytes") for item in shown]
    last = counts[-1]
    latest = (f"Latest night {nights[-1]}: {format_count(last['jobs'])} jobs, "
              + ", ".join(f"{format_count(last[key])} {key}" for key in VERDICT_STACK)
              + f"; p95 peak reserved {format_bytes(p95[-1])}")
    return Trends(
        nights=len(shown),
        omitted=len(items) - len(shown),
        latest=latest,
        jobs=stacked_bars(nights, [[("jobs", c["jobs"])] for c in counts], label="jobs per night"),
        verdicts=stacked_bars(nights, [[(f"v-{key}", c[key]) for key in VERDICT_STACK] for c in counts],
                              label="jobs per night by verdict"),
        p95_reserved=bytes_line(nights, p95, label="p95 of the jobs' peak reserved memory per night"),
        last_night=nights[-1],
    )


def _regression(item: Mapping[str, Any], hrefs: Mapping[str, str | None]) -> RegressionRow:
    job_id = _text(item.get("job_id"))
    metric = item.get("metric")
    return RegressionRow(
        job_id=job_id,
        job_name=_text(item.get("job_name")),
        href=hrefs.get(job_id),
        metric=METRIC_LABELS.get(metric, _text(metric)) if isinstance(metric, str) else NOT_AVAILABLE,
        value=_bytes(item.get("value_bytes")),
        baseline=_bytes(item.get("baseline_bytes")),
        change=format_percent(item.get("change_pct"), signed=True),
        baseline_runs=_count(item.get("baseline_runs")),
        owner=regression_owner(item),
        explained=item.get("explained_by_suspect") is True or item.get("explained_by_leak") is True,
    )


def regression_owner(item: Mapping[str, Any]) -> str:
    """What carried a regression's value: ``explained by suspect device node-bad/2`` when a suspect device
    did, else ``rank 3 (node-01, GPU 2)``; "" when fleet.json does not say (written before issue 30)."""
    host = item.get("host") if isinstance(item.get("host"), str) and item.get("host") else None
    device, rank = as_int(item.get("device_id")), as_int(item.get("rank"))
    if item.get("explained_by_suspect") is True:
        return f"explained by suspect device {host or 'unknown'}/{'?' if device is None else device}"
    place = ", ".join(part for part in (host, None if device is None else "CPU" if device < 0 else f"GPU {device}")
                      if part)
    if rank is None:
        return f"on {place}" if place else ""
    if item.get("explained_by_leak") is True:
        return f"explained by the leak on rank {rank}"
    return f"rank {rank}" + (f" ({place})" if place else "")


def _suspect(item: Mapping[str, Any]) -> SuspectRow:
    rate, fleet_rate = _number(item.get("rate")), _number(item.get("fleet_rate"))
    device = item.get("device_id")
    return SuspectRow(
        host=_text(item.get("host")),
        device=_text(device),
        jobs=_count(item.get("jobs")),
        anomalous_jobs=_count(item.get("anomalous_jobs")),
        rate=format_percent(rate, fraction=True),
        fleet_rate=format_percent(fleet_rate, fraction=True),
        ratio=f"{rate / fleet_rate:.1f}×" if rate is not None and fleet_rate else NOT_AVAILABLE,
    )


def _listed(fleet: Mapping[str, Any], key: str) -> list[Mapping[str, Any]] | None:
    if not isinstance(fleet.get(key), list | tuple):
        return None
    return [item for item in fleet[key] if isinstance(item, Mapping)]


def fleet_intel(fleet: Mapping[str, Any], hrefs: Mapping[str, str | None]) -> FleetIntel:
    """The index's fleet sections; ``hrefs`` maps job ids to their report links (regressions link to them)."""
    regressions = _listed(fleet, "regressions")
    suspects = _listed(fleet, "suspect_hosts")
    return FleetIntel(
        trends=_trends(fleet.get("trends")),
        regressions=None if regressions is None else tuple(_regression(item, hrefs)
                                                             for item in regressions[:MAX_TABLE_ROWS]),
        regressions_omitted=max(len(regressions or ()) - MAX_TABLE_ROWS, 0),
        suspects=None if suspects is None else tuple(_suspect(item) for item in suspects[:MAX_TABLE_ROWS]),
        suspects_omitted=max(len(suspects or ()) - MAX_TABLE_ROWS, 0),
        coverage=coverage_view(fleet.get("coverage")),
    )
