"""The fleet as OpenMetrics text: escaping, names, bounded labels, headroom, verdict counts; every text
written is read back by prometheus_client's OpenMetrics parser and by ``promtool check metrics``."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from stormwatch.outputs.fleet_metrics import VERDICT_CODES, MetricsLimits, bounded_devices, fleet_metrics_text
from stormwatch.outputs.openmetrics import Family, MetricsFormatError, Sample, Unit, escape_label_value, gauge, render
from tests.prometheus_parts import openmetrics_families, promtool_check

GIB = 1 << 30


def latest(job_id: str, verdict: str, diagnosed_at: str) -> dict[str, str]:
    return {"job_id": job_id, "verdict": verdict, "diagnosed_at": diagnosed_at, "night": diagnosed_at[:10]}


def document(**changes: Any) -> dict[str, Any]:
    """A fleet.json: llama (critical, GPU), bert (clean, GPU), cpu-etl (warning, a CPU tracker: no total)."""
    base = {
        "generated_at": "2026-12-01T02:00:00+00:00",
        "summary": {"jobs": 5, "diagnosed": 3, "skipped": 1, "failed": 1, "refused": 0,
                    "clean": 2, "info": 0, "warning": 1, "critical": 1, "empty": 0},
        "latest": {"llama": latest("llama-0142", "critical", "2026-12-01T01:00:00+00:00"),
                   "bert": latest("bert-7", "clean", "2026-11-30T01:00:00+00:00"),
                   "cpu-etl": latest("cpu-etl-3", "warning", "2026-12-01T00:30:00+00:00")},
        "suspect_hosts": [{"host": "node-3", "device_id": 5, "jobs": 9, "anomalous_jobs": 6, "rate": 0.66,
                           "fleet_rate": 0.1, "rate_lower_bound": 0.35}],
    }
    return {**base, **changes}


def ranks(gap_column: str = "hidden_gap_peak_abs_bytes") -> pd.DataFrame:
    """fleet.parquet's rows: llama's 2 ranks (80 GiB devices), bert's 1, cpu-etl's 2 without a device total,
    and an older llama run (not the newest: never measured)."""
    return pd.DataFrame({
        "job_id": ["llama-0142", "llama-0142", "bert-7", "cpu-etl-3", "cpu-etl-3", "llama-0141"],
        "rank": [0, 1, 0, 0, 1, 0],
        "peak_reserved_bytes": [60 * GIB, 70 * GIB, 10 * GIB, 2 * GIB, 3 * GIB, 99 * GIB],
        "peak_device_used_bytes": [64 * GIB, 72 * GIB, 20 * GIB, None, None, 99 * GIB],
        "device_total_bytes": [80 * GIB, 80 * GIB, 80 * GIB, None, None, 80 * GIB],
        gap_column: [4 * GIB, 2 * GIB, 1 * GIB, None, None, 0],
    }).astype({"peak_device_used_bytes": "Int64", "device_total_bytes": "Int64", gap_column: "Int64"})


def values(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of family ``name`` as the OpenMetrics parser reads them: {sorted labels: value}."""
    families = openmetrics_families(text)
    if name not in families:
        return {}
    return {tuple(sorted(sample.labels.items())): sample.value for sample in families[name].samples}


def per_job(text: str, name: str) -> dict[str, float]:
    return {dict(labels)["job_name"]: value for labels, value in values(text, name).items()}


def test_the_fleet_reads_back_through_both_parsers_with_its_counts_and_units() -> None:
    text = fleet_metrics_text(document(), ranks())
    assert text.endswith("# EOF\n")
    checked = promtool_check(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    families = openmetrics_families(text)
    assert {name: (family.type, family.unit) for name, family in families.items()} == {
        "stormwatch_jobs": ("gauge", ""), "stormwatch_jobs_by_status": ("gauge", ""),
        "stormwatch_job_verdict": ("gauge", ""), "stormwatch_job_peak_reserved_bytes": ("gauge", "bytes"),
        "stormwatch_job_hidden_gap_peak_bytes": ("gauge", "bytes"), "stormwatch_job_headroom_ratio": ("gauge", "ratio"),
        "stormwatch_job_names_omitted": ("gauge", ""), "stormwatch_device_suspect": ("gauge", ""),
        "stormwatch_devices_omitted": ("gauge", ""), "stormwatch_audit_timestamp_seconds": ("gauge", "seconds"),
    }
    assert {dict(labels)["verdict"]: value for labels, value in values(text, "stormwatch_jobs").items()} == {
        "clean": 2, "info": 0, "warning": 1, "critical": 1, "empty": 0}
    assert {dict(labels)["status"]: value for labels, value in values(text, "stormwatch_jobs_by_status").items()} == {
        "diagnosed": 3, "skipped": 1, "failed": 1, "refused": 0}
    assert per_job(text, "stormwatch_job_verdict") == {"llama": 4, "bert": 1, "cpu-etl": 3}
    assert per_job(text, "stormwatch_job_peak_reserved_bytes") == {"llama": 70 * GIB, "bert": 10 * GIB,
                                                                   "cpu-etl": 3 * GIB}
    assert per_job(text, "stormwatch_job_hidden_gap_peak_bytes") == {"llama": 4 * GIB, "bert": 1 * GIB}
    assert values(text, "stormwatch_device_suspect") == {(("device", "5"), ("host", "node-3")): 1}
    assert values(text, "stormwatch_audit_timestamp_seconds") == {(): 1796090400}
    assert "llama-0142" not in text and "bert-7" not in text  # job ids are never label values


@pytest.mark.parametrize(("rows", "expected"), [
    # the tightest rank: llama's rank 1 uses 72 of 80 GiB; cpu-etl has no device total: no headroom at all
    pytest.param("gpu-and-cpu", {"llama": 0.1, "bert": 0.75}, id="cpu-job-has-none"),
    pytest.param("none", {}, id="no-fleet-parquet"),
    pytest.param("zero-total", {"llama": 0.1, "bert": 0.75}, id="a-zero-total-is-no-total"),
])
def test_headroom_is_the_tightest_ranks_free_share_and_absent_without_a_device_total(
        rows: str, expected: dict[str, float]) -> None:
    table = None if rows == "none" else ranks()
    if rows == "zero-total":
        table.loc[table["job_id"] == "cpu-etl-3", ["device_total_bytes", "peak_device_used_bytes"]] = [0, 0]
    text = fleet_metrics_text(document(), table)
    assert per_job(text, "stormwatch_job_headroom_ratio") == pytest.approx(expected)
    assert per_job(text, "stormwatch_job_verdict") == {"llama": 4, "bert": 1, "cpu-etl": 3}  # always there


@pytest.mark.parametrize("gap_column", ["hidden_gap_peak_abs_bytes", "hidden_gap_peak_bytes"])
def test_the_hidden_gap_is_read_under_either_schemas_name(gap_column: str) -> None:
    text = fleet_metrics_text(document(), ranks(gap_column))
    assert per_job(text, "stormwatch_job_hidden_gap_peak_bytes") == {"llama": 4 * GIB, "bert": 1 * GIB}


@pytest.mark.parametrize(("max_job_names", "shown", "omitted"), [
    (0, set(), 3),
    (1, {"llama"}, 2),  # critical first
    (2, {"llama", "cpu-etl"}, 1),  # then warning, before the clean one
    (3, {"llama", "cpu-etl", "bert"}, 0),
    (50, {"llama", "cpu-etl", "bert"}, 0),
])
def test_job_names_are_bounded_most_severe_first_and_the_rest_counted(
        max_job_names: int, shown: set[str], omitted: int) -> None:
    text = fleet_metrics_text(document(), ranks(), limits=MetricsLimits(max_job_names=max_job_names))
    for name in ("stormwatch_job_verdict", "stormwatch_job_peak_reserved_bytes"):
        assert set(per_job(text, name)) == shown
    assert values(text, "stormwatch_job_names_omitted") == {(): omitted}
    assert values(text, "stormwatch_jobs")[(("verdict", "critical"),)] == 1  # counts never bounded


def test_of_equally_severe_names_the_most_recently_diagnosed_are_kept() -> None:
    names = {f"job-{n:02d}": latest(f"job-{n:02d}-1", "clean", f"2026-11-{n:02d}T00:00:00+00:00")
             for n in range(1, 21)}
    text = fleet_metrics_text(document(latest=names), None, limits=MetricsLimits(max_job_names=3))
    assert set(per_job(text, "stormwatch_job_verdict")) == {"job-18", "job-19", "job-20"}
    assert values(text, "stormwatch_job_names_omitted") == {(): 17}


def test_suspect_devices_are_bounded_by_rate_and_a_whole_host_has_an_empty_device() -> None:
    suspects = [{"host": "a", "device_id": 0, "rate_lower_bound": 0.2},
                {"host": "b", "device_id": None, "rate_lower_bound": 0.9},
                {"host": "c", "device_id": 7, "rate_lower_bound": 0.5}]
    assert bounded_devices(suspects, 2) == ([("b", ""), ("c", "7")], 1)
    text = fleet_metrics_text(document(suspect_hosts=suspects), None, limits=MetricsLimits(max_devices=2))
    assert values(text, "stormwatch_device_suspect") == {(("device", ""), ("host", "b")): 1,
                                                         (("device", "7"), ("host", "c")): 1}
    assert values(text, "stormwatch_devices_omitted") == {(): 1}


@pytest.mark.parametrize("value", [
    "plain", 'quote"d', "back\\slash", "new\nline", "all\\\"\n\\n", "ジョブ-名前", "}{,= #", "",
])
def test_label_values_round_trip_through_both_parsers(value: str) -> None:
    text = fleet_metrics_text(document(latest={value: latest("x-1", "warning", "2026-12-01")}), None)
    assert per_job(text, "stormwatch_job_verdict") == {value: VERDICT_CODES["warning"]}
    checked = promtool_check(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(("raw", "escaped"), [
    ("a", "a"), ('a"b', 'a\\"b'), ("a\\b", "a\\\\b"), ("a\nb", "a\\nb"), ("\\n", "\\\\n"),
])
def test_escaping_is_exactly_the_three_the_spec_names(raw: str, escaped: str) -> None:
    assert escape_label_value(raw) == escaped


@pytest.mark.parametrize(("build", "problem"), [
    (lambda: gauge("1bad", "h", []), "does not match"),
    (lambda: gauge("bad-name", "h", []), "does not match"),
    (lambda: gauge("good", "h", [(("x",), 1)], label_names=("job-name",)), "label name"),
    (lambda: gauge("good", "h", [(("x",), 1)], label_names=("__name",)), "label name"),
    (lambda: gauge("size", "h", [((), 1)], unit=Unit.BYTES), "does not end"),
    (lambda: gauge("stormwatch_runs_total", "h", [((), 1)]), "suffix"),
    (lambda: gauge("good", "h", [(("a",), 1), (("a",), 2)], label_names=("k",)), "two samples"),
    (lambda: gauge("good", "h", [((), float("nan"))]), "not finite"),
    (lambda: Family(name="good", help="h", label_names=("k",), samples=(Sample(labels=(), value=1),)), "labels"),
    (lambda: render([gauge("same", "h", [((), 1)]), gauge("same", "h", [((), 2)])]), "share a name"),
])
def test_what_the_format_cannot_hold_is_refused(build: Any, problem: str) -> None:
    with pytest.raises(MetricsFormatError, match=problem):
        build()


def test_an_empty_fleet_still_says_its_zero_counts() -> None:
    text = fleet_metrics_text({"summary": {}}, None)
    assert values(text, "stormwatch_jobs")[(("verdict", "critical"),)] == 0
    assert "stormwatch_job_verdict" not in openmetrics_families(text)  # no family without a sample
    assert promtool_check(text).returncode == 0
