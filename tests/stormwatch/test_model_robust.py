"""build_model never crashes where the reference does, and handles degenerate jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormwatch import load_artifacts
from stormwatch.analysis.model import NO_EVENTS_WARNING, build_model
from tests import builders as b
from tests.model_builders import gap_samples, write_job
from tests.reference_model import reference_model


def test_drift_with_every_sample_at_one_instant_does_not_crash(tmp_path: Path) -> None:
    """Six distinct samples at one timestamp with a 10 % gap: stormlog 0.3.5's linregress raises."""
    gaps = [8 * b.GIB + i * b.MIB for i in range(6)]
    samples = [b.Sample(0.0, s.allocated, s.reserved, s.device_used, s.device_total)
               for s in gap_samples(gaps)]
    paths = write_job(tmp_path, world_size=1, samples=lambda rank: samples)
    with pytest.raises(ValueError, match="identical"):
        reference_model(paths)
    model = build_model(load_artifacts(paths).events)
    signals = {(i.kind, i.signal) for i in model.indicators}
    assert ("earliest", "gap_ratio_breach") in signals  # the breach still shows; no drift is claimed
    assert all("drift" not in signal for _, signal in signals)


def test_empty_events_give_the_no_events_warning() -> None:
    model = build_model(load_artifacts([]).events)
    assert model.rows == () and model.indicators == () and model.warnings == (NO_EVENTS_WARNING,)


def test_rank_with_alerts_but_no_samples(tmp_path: Path) -> None:
    records = b.timeline_records(samples=3, alerts=b.DEFAULT_ALERTS, session_id="s-1")
    path = b.write_jsonl(tmp_path / "events.jsonl", [r for r in records if r["event_type"] != "sample"])
    model = build_model(load_artifacts([path]).events)
    (row,) = model.rows
    assert (row.samples, row.allocated_delta_bytes, row.hidden_gap_peak_abs_bytes) == (0, 0, 0)
    assert row.first_anomaly_signal == "alert:warning"
    assert [i.signal for i in model.indicators] == ["alert:warning", "alert:critical"]
