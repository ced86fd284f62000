"""``stormwatch audit --pushgateway URL`` end to end: a real audit of a small fleet pushes its metrics to
Debian's Pushgateway, Debian's Prometheus scrapes it (every second, ``honor_labels``), and Prometheus's
HTTP API answers with fleet.json's counts; reports/metrics.prom holds the same text. A second audit
against a Pushgateway that is gone still succeeds, and says so."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stormwatch.flows.cli import main
from tests import builders as b
from tests.prometheus_parts import Prometheus, free_port, openmetrics_families, poll, pushgateway_and_prometheus

pytestmark = pytest.mark.usefixtures("prefect_api")
AS_OF = "2026-12-01T03:00:00+00:00"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STORMWATCH_SLACK_WEBHOOK", "STORMWATCH_SMTP_URL", "STORMWATCH_EMAIL_TO", "STORMWATCH_EMAIL_FROM",
                 "STORMWATCH_NOTIFY_ON", "STORMWATCH_STORAGE"):
        monkeypatch.setenv(name, "")  # registered for restoring: the CLI may hand flags to the environment
        monkeypatch.delenv(name)


def write_fleet(root: Path) -> None:
    """llama (critical, GPU), bert (clean, GPU), etl (a CPU tracker's export: no device total)."""
    critical = (b.Alert(2.0, "critical", "Memory usage above 95%"),)
    b.write_multi_rank_job(root / "jobs" / "llama-0001", world_size=2, job_id="llama-0001", alerts=critical)
    b.write_multi_rank_job(root / "jobs" / "bert-0001", world_size=2, job_id="bert-0001")
    b.write_multi_rank_job(root / "jobs" / "etl-0001", world_size=1, job_id="etl-0001", fmt="csv")


def audit(root: Path, pushgateway: str) -> int:
    return main(["audit", "--storage", str(root), "--as-of", AS_OF, "--pushgateway", pushgateway,
                 "--workers", "1", "--engine", "threads"])


def by_label(results: list[dict], label: str) -> dict[str, float]:
    return {item["metric"][label]: float(item["value"][1]) for item in results}


def test_an_audit_pushes_its_fleet_to_prometheus_through_the_pushgateway(
        tmp_path: Path, env: None, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "fleet"
    write_fleet(root)
    with pushgateway_and_prometheus(tmp_path) as prometheus:
        assert audit(root, prometheus.pushgateway) == 0
        fleet = orjson.loads((root / "reports" / "fleet.json").read_bytes())
        expected = {verdict: float(fleet["summary"][verdict])
                    for verdict in ("clean", "info", "warning", "critical", "empty")}
        assert expected["critical"] == 1 and expected["clean"] >= 1

        def jobs(prom: Prometheus = prometheus) -> list[dict]:
            return prom.query('stormwatch_jobs{job="stormwatch"}')

        found = poll(jobs, until=lambda result: by_label(result, "verdict") == expected)
        assert by_label(found, "verdict") == expected
        assert {item["metric"]["instance"] for item in found} == {str(root)}  # the storage URI, as pushed

        verdicts = by_label(prometheus.query("stormwatch_job_verdict"), "job_name")
        assert verdicts == {"llama": 4.0, "bert": 1.0, "etl": 1.0}
        headroom = by_label(prometheus.query("stormwatch_job_headroom_ratio"), "job_name")
        assert set(headroom) == {"llama", "bert"}  # etl's CPU tracker reports no device total
        assert all(0.0 < value < 1.0 for value in headroom.values())
        peaks = by_label(prometheus.query("stormwatch_job_peak_reserved_bytes"), "job_name")
        assert set(peaks) == {"llama", "bert", "etl"} and all(value > 0 for value in peaks.values())
        unused = prometheus.query("stormwatch_fleet_unused_gpu_memory_byte_seconds")  # issue 30: fleet headroom
        assert [float(item["value"][1]) for item in unused] == [
            pytest.approx(fleet["headroom"]["unused_gib_hours"] * 2**30 * 3600)]

        text = (root / "reports" / "metrics.prom").read_text()  # the same metrics, on disk
        families = openmetrics_families(text)
        assert {sample.labels["verdict"]: sample.value for sample in families["stormwatch_jobs"].samples} == expected
        assert "llama-0001" not in text  # job ids never become labels
    out = capsys.readouterr().out
    assert f"metrics: {(root / 'reports' / 'metrics.prom').as_uri()}; pushed to the pushgateway" in out

    gone = f"http://127.0.0.1:{free_port()}"
    assert audit(root, gone) == 0  # an unreachable Pushgateway never fails the audit
    out = capsys.readouterr().out
    assert "pushgateway not reached (ConnectError" in out and "pushed again at the next audit" in out
