"""model.json's ``model`` member read back as the :class:`~stormwatch.analysis.model.DiagnosticsModel`
it was written from.

The member is the model's dataclass fields as JSON (``dataclasses.asdict`` with the reference's
field names; orjson writes the dataclass itself, see :meth:`JobDocument.to_json
<stormwatch.outputs.document.JobDocument.to_json>`): rank-keyed maps have string keys (``"3"``),
which read back as the ints they were written from. Timelines read back as numpy arrays: ``int64``,
or ``object`` holding ``None`` where a schema-v4 counter is missing (as the engine builds them);
numpy converts the numbers, so a ``true`` among integers reads as 1; a fraction is refused. Marker
metadata is telemetry and stays the JSON object it was (already JSON-safe when written).

Members the model gained after schema version 1 began (``warnings``, ``markers_by_rank``, an
indicator's ``confidence``, ``reason_codes`` and ``phase_path``, a row's first-anomaly fields, a
marker's identity fields and ``metadata``) read as their dataclass defaults when absent.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stormwatch.analysis.markers import TimelineMarker
from stormwatch.analysis.model import AnomalyIndicator, DiagnosticsModel, IndicatorKind, RankDiagnosticsRow
from stormwatch.outputs.json_members import MemberError, Members, child_path, integer_key, is_integer, shown

_INT64 = np.dtype(np.int64)


def rank_row_from_json(members: Members) -> RankDiagnosticsRow:
    """One of the model's ``rows`` (also the start of an attempt's rank row, see :mod:`.document_attempts`)."""
    return RankDiagnosticsRow(
        rank=members.integer("rank"),
        availability=members.text("availability"),
        samples=members.integer("samples"),
        allocated_delta_bytes=members.optional_integer("allocated_delta_bytes"),
        reserved_delta_bytes=members.optional_integer("reserved_delta_bytes"),
        hidden_gap_latest_bytes=members.optional_integer("hidden_gap_latest_bytes"),
        hidden_gap_peak_abs_bytes=members.optional_integer("hidden_gap_peak_abs_bytes"),
        has_anomaly=members.flag("has_anomaly"),
        first_anomaly_timestamp_ns=members.optional_integer("first_anomaly_timestamp_ns"),
        first_anomaly_signal=members.optional_text("first_anomaly_signal"),
        first_anomaly_phase_path=members.optional_text("first_anomaly_phase_path"),
    )


def _indicator(members: Members) -> AnomalyIndicator:
    return AnomalyIndicator(
        kind=members.enum("kind", IndicatorKind, "an indicator kind"),
        rank=members.integer("rank"),
        severity=members.text("severity"),
        timestamp_ns=members.integer("timestamp_ns"),
        signal=members.text("signal"),
        details=members.text("details"),
        confidence=members.optional_number("confidence"),
        reason_codes=members.texts("reason_codes", ()),
        phase_path=members.optional_text("phase_path"),
    )


def _series(value: Any, path: str) -> np.ndarray:
    """One timeline series: int64, or object with ``None`` where a v4 counter is missing."""
    if isinstance(value, np.ndarray):  # the engine's own array, before it is written
        if value.ndim == 1 and (value.dtype == _INT64 or value.dtype == object):
            return value
        raise MemberError(path, f"{shown(value)} is not a timeline")
    if not isinstance(value, list | tuple):
        raise MemberError(path, f"{shown(value)} is not an array")
    if not value:
        return np.zeros(0, dtype=np.int64)
    try:
        array = np.array(value)
    except (TypeError, ValueError, OverflowError):
        array = np.array(value, dtype=object)
    if array.ndim == 1 and array.dtype.kind == "i":  # integers only: one conversion for the whole list
        return array.astype(np.int64, copy=False)
    for index, item in enumerate(value):  # nulls among them (v4), or something that is no integer
        if item is not None and not (is_integer(item) and -(2**63) <= item < 2**63):
            raise MemberError(child_path(path, index), f"{shown(item)} is not a 64-bit integer or null")
    out = np.empty(len(value), dtype=object)
    out[:] = value
    return out


def _timelines(members: Members) -> dict[int, dict[str, np.ndarray]]:
    out: dict[int, dict[str, np.ndarray]] = {}
    for key, value, path in members.entries("per_rank_timelines"):
        series = Members.of(value, path)
        out[integer_key(key, path)] = {str(name): _series(item, series.where(str(name)))
                                    for name, item in series.data.items()}
    return out


def _checked_marker(members: Members) -> TimelineMarker:
    metadata = members.optional_member("metadata")
    return TimelineMarker(
        session_id=members.text("session_id"),
        start_ns=members.integer("start_ns"),
        end_ns=members.optional_integer("end_ns"),
        kind=members.text("kind"),
        source=members.text("source"),
        severity=members.text("severity"),
        label=members.text("label"),
        rank=members.optional_integer("rank"),
        local_rank=members.optional_integer("local_rank"),
        world_size=members.optional_integer("world_size"),
        event_type=members.optional_text("event_type"),
        metadata={} if metadata is None else metadata.data if isinstance(metadata.data, dict) else dict(metadata.data),
    )


def _optional_int(value: Any) -> bool:
    return value is None or type(value) is int


def _marker(value: Any, path: str) -> TimelineMarker:
    """One marker. Markers are most of a document's objects, so each is first taken in one look at its
    values' exact types; only one that fails the look is read member by member (which names the fault)."""
    if type(value) is dict:
        get = value.get
        session_id, start_ns, end_ns, kind = get("session_id"), get("start_ns"), get("end_ns"), get("kind")
        source, severity, label, event_type = get("source"), get("severity"), get("label"), get("event_type")
        rank, local_rank, world_size, metadata = get("rank"), get("local_rank"), get("world_size"), get("metadata", {})
        if (type(session_id) is str and type(start_ns) is int and _optional_int(end_ns) and type(kind) is str
                and type(source) is str and type(severity) is str and type(label) is str
                and (event_type is None or type(event_type) is str) and _optional_int(rank)
                and _optional_int(local_rank) and _optional_int(world_size) and type(metadata) is dict):
            return TimelineMarker(session_id=session_id, start_ns=start_ns, end_ns=end_ns, kind=kind, source=source,
                                  severity=severity, label=label, rank=rank, local_rank=local_rank,
                                  world_size=world_size, event_type=event_type, metadata=metadata)
    return _checked_marker(Members.of(value, path))


def _markers(members: Members) -> dict[int, tuple[TimelineMarker, ...]]:
    out: dict[int, tuple[TimelineMarker, ...]] = {}
    for key, value, path in members.entries("markers_by_rank", {}):
        if not isinstance(value, list | tuple):
            raise MemberError(path, f"{shown(value)} is not an array")
        out[integer_key(key, path)] = tuple(_marker(item, child_path(path, index)) for index, item in enumerate(value))
    return out


def model_from_json(members: Members) -> DiagnosticsModel:
    """The model a ``model`` member was written from; raises
    :class:`~stormwatch.outputs.json_members.MemberError` naming a malformed member."""
    return DiagnosticsModel(
        rows=members.each("rows", rank_row_from_json),
        indicators=members.each("indicators", _indicator),
        expected_ranks=members.integers("expected_ranks"),
        present_ranks=members.integers("present_ranks"),
        missing_ranks=members.integers("missing_ranks"),
        per_rank_timelines=_timelines(members),
        warnings=members.texts("warnings", ()),
        markers_by_rank=_markers(members),
    )
