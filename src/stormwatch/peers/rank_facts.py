"""What each present rank of a job held: identity (host, device) and memory peaks.

One :class:`RankFacts` per rank of the model's ``present_ranks`` (so a rank filter
applies: ranks it left out get no facts), in rank order. Computed columnar from
the loader's events frame (one ``groupby`` per fact, never a Python loop per
event) plus the model's own rank rows for the hidden gap.

Units: bytes throughout. Invariants:

* ``samples`` and the peaks count only the rank's *sample* events, with the
  model's rule for what a sample is (``event_type`` stripped and lower-cased is
  ``"sample"``); ``samples`` therefore equals the model row's ``samples``.
* a peak is ``None`` when none of the rank's samples carries that counter
  (schema v4 makes counters nullable, a CPU tracker has no reserved pool ...).
* ``device_total_bytes`` is the largest total seen on *any* of the rank's events
  (lifecycle events carry it too), ``None`` when no event carries one.
* ``host`` and ``device_id`` are the rank's most frequent value over all its
  events (ties: the smallest value), ``None`` when no event carries one. The
  loader's placeholder host ``"unknown"`` (legacy records without a host) and
  empty host names count as absent. ``device_id`` ``-1`` is stormlog's CPU
  tracker and is kept as is.
* ``hidden_gap_peak_bytes`` is the model row's ``hidden_gap_peak_abs_bytes``
  (largest ``|device_used - allocator_reserved|`` over samples holding both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stormwatch.analysis.columns import Coded
from stormwatch.analysis.model import DiagnosticsModel
from stormwatch.events.schema import UNKNOWN_HOST

#: Sample counters whose per-rank maximum is a peak: events column -> :class:`RankFacts` field.
PEAK_COUNTERS = {
    "allocator_allocated_bytes": "peak_allocated_bytes",
    "allocator_reserved_bytes": "peak_reserved_bytes",
    "device_used_bytes": "peak_device_used_bytes",
}
_ABSENT_HOSTS = frozenset({"", UNKNOWN_HOST})


@dataclass(frozen=True)
class RankFacts:
    """One present rank's identity and memory peaks (bytes); ``None`` where telemetry had no value."""

    rank: int
    host: str | None
    device_id: int | None
    samples: int
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    peak_device_used_bytes: int | None
    device_total_bytes: int | None
    hidden_gap_peak_bytes: int | None


def sample_mask(event_type: pd.Series) -> np.ndarray:
    """Per-event: is it a sample, by the model's rule (evaluated once per distinct event type)."""
    return Coded.of(event_type).where(lambda kind: kind.strip().lower() == "sample")


def _optional_int(value: object) -> int | None:
    return None if value is None or value is pd.NA or pd.isna(value) else int(value)  # type: ignore[call-overload]


def _maxima(frame: pd.DataFrame, columns: Sequence[str]) -> dict[str, dict[int, int | None]]:
    """Per column, rank -> the column's maximum over ``frame``'s rows of that rank (None: all missing)."""
    if frame.empty:
        return {name: {} for name in columns}
    grouped = frame.groupby("rank", sort=False)[list(columns)].max()
    return {name: {int(rank): _optional_int(value) for rank, value in grouped[name].items()} for name in columns}


def _value_codes(values: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Codes into the distinct values in ascending order (-1: missing) and those values."""
    if isinstance(values.dtype, pd.CategoricalDtype):  # order the few categories, not the rows
        categories = values.cat.categories
        order = np.argsort(np.asarray(categories.astype(object), dtype=object), kind="stable")
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        raw = values.cat.codes.to_numpy()
        if not len(categories):  # every value missing
            return np.full(len(raw), -1, dtype=np.int64), categories
        return np.where(raw >= 0, position[np.maximum(raw, 0)], -1), categories[order]
    codes, uniques = pd.factorize(values, sort=True)
    return codes, pd.Index(uniques)


def _modes(frame: pd.DataFrame, column: str) -> dict[int, object]:
    """rank -> the most frequent non-missing value of ``column`` (ties: the smallest value).

    One count per (rank, value) pair in a ranks x values table; the first maximum of a row is
    its smallest value, since values are coded in ascending order."""
    codes, uniques = _value_codes(frame[column])
    present = codes >= 0
    if not present.any():
        return {}
    rank_codes, ranks = pd.factorize(frame["rank"].to_numpy()[present])
    pairs = rank_codes.astype(np.int64) * len(uniques) + codes[present]
    counts = np.bincount(pairs, minlength=len(ranks) * len(uniques)).reshape(len(ranks), len(uniques))
    best = counts.argmax(axis=1)
    return {int(rank): uniques[index] for rank, index in zip(ranks, best, strict=True)}


def _hosts(frame: pd.DataFrame) -> dict[int, str | None]:
    hosts = frame["host"]
    if isinstance(hosts.dtype, pd.CategoricalDtype):
        absent = [value for value in hosts.cat.categories if str(value).strip() in _ABSENT_HOSTS]
        hosts = hosts.cat.remove_categories(absent) if absent else hosts  # those become missing
    else:
        hosts = hosts.where(~hosts.astype("string").str.strip().isin(_ABSENT_HOSTS))
    modes = _modes(pd.DataFrame({"rank": frame["rank"], "host": hosts}), "host")
    return {rank: str(value) for rank, value in modes.items()}


def rank_facts(events: pd.DataFrame, model: DiagnosticsModel) -> tuple[RankFacts, ...]:
    """Facts of every rank in ``model.present_ranks`` from ``events`` (the frame the model was built from)."""
    present = tuple(int(rank) for rank in model.present_ranks)
    if not present or events.empty:
        return ()
    frame = events[["rank", "event_type", "host", "device_id", "device_total_bytes", *PEAK_COUNTERS]]
    kept = np.isin(frame["rank"].to_numpy(dtype=np.int64), np.asarray(present, dtype=np.int64))
    if not kept.all():  # a rank filter left some ranks out
        frame = frame.loc[kept]
    samples = frame.loc[sample_mask(frame["event_type"])]
    peaks = _maxima(samples, tuple(PEAK_COUNTERS))
    counts = samples.groupby("rank", sort=False).size()
    totals = _maxima(frame, ("device_total_bytes",))["device_total_bytes"]
    hosts = _hosts(frame)
    devices = _modes(frame, "device_id")
    gaps = {row.rank: row.hidden_gap_peak_abs_bytes for row in model.rows if row.availability == "present"}
    return tuple(
        RankFacts(
            rank=rank,
            host=hosts.get(rank),
            device_id=_optional_int(devices.get(rank)),
            samples=int(counts.get(rank, 0)),
            peak_allocated_bytes=peaks["allocator_allocated_bytes"].get(rank),
            peak_reserved_bytes=peaks["allocator_reserved_bytes"].get(rank),
            peak_device_used_bytes=peaks["device_used_bytes"].get(rank),
            device_total_bytes=totals.get(rank),
            hidden_gap_peak_bytes=gaps.get(rank),
        )
        for rank in sorted(present)
    )


def job_device_total_bytes(facts: Sequence[RankFacts]) -> int | None:
    """The largest device total any rank saw (bytes), ``None`` when none did."""
    totals = [fact.device_total_bytes for fact in facts if fact.device_total_bytes is not None]
    return max(totals) if totals else None
