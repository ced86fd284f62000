"""reports/metrics.prom through the storage layer (a folder and an S3 prefix), and the push: to Debian's
real Pushgateway (the group replaced, its labels), to a closed port, to a server that never answers, and
to one answering errors (which are retried, which not). No push failure ever raises."""

from __future__ import annotations

import base64
import logging
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import orjson
import pytest

from stormwatch.outputs.fleet_metrics import MetricsLimits
from stormwatch.tasks.metrics import group_url, publish_metrics, push_metrics
from stormwatch.tasks.retry import RetryPolicy
from tests.prometheus_parts import free_port, openmetrics_families, pushgateway
from tests.serving import serving
from tests.tasks.storage.backends import Backend

NO_WAIT = RetryPolicy(attempts=3, delays_s=(0.0, 0.0))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with pushgateway(tmp_path_factory.mktemp("pushgateway")) as url:
        yield url


def fleet_json(names: dict[str, str]) -> bytes:
    """A fleet.json with a job name per (name -> verdict), each its own newest run; no fleet.parquet."""
    latest = {name: {"job_id": f"{name}-1", "verdict": verdict, "diagnosed_at": "2026-12-01T01:00:00+00:00"}
              for name, verdict in names.items()}
    summary = {"jobs": len(names), "diagnosed": len(names)}
    for verdict in names.values():
        summary[verdict] = summary.get(verdict, 0) + 1
    return orjson.dumps({"generated_at": "2026-12-01T02:00:00+00:00", "summary": summary, "latest": latest})


def gateway_samples(gateway: str, family: str) -> dict[tuple[tuple[str, str], ...], float]:
    """What the Pushgateway now exposes of ``family`` (its /metrics, Prometheus's text format)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{gateway}/metrics", timeout=5.0).text
    return {tuple(sorted(sample.labels.items())): sample.value
            for found in text_string_to_metric_families(text) if found.name == family for sample in found.samples}


def test_metrics_prom_is_written_through_the_storage_and_the_group_replaced_each_push(
        backend: Backend, gateway: str) -> None:
    backend.put("reports/fleet.json", fleet_json({"llama": "critical", "bert": "clean"}))
    first = publish_metrics(backend.storage, storage_uri=backend.settings.uri, pushgateway=gateway)
    stored = (backend.get("reports/metrics.prom") or b"").decode()
    assert first["file"] == backend.storage.report_uri("metrics.prom") and first["bytes"] == len(stored.encode())
    assert openmetrics_families(stored)["stormwatch_job_verdict"].samples  # the file is OpenMetrics
    assert first["pushgateway"] == {"url": group_url(gateway, instance=backend.settings.uri), "pushed": True,
                                    "attempts": 1, "error": None, "recorded": None}
    def labels(name: str) -> tuple[tuple[str, str], ...]:
        return (("instance", backend.settings.uri), ("job", "stormwatch"), ("job_name", name))

    assert gateway_samples(gateway, "stormwatch_job_verdict") == {labels("bert"): 1.0, labels("llama"): 4.0}
    backend.put("reports/fleet.json", fleet_json({"bert": "warning"}))  # llama left the fleet
    publish_metrics(backend.storage, storage_uri=backend.settings.uri, pushgateway=gateway)
    assert gateway_samples(gateway, "stormwatch_job_verdict") == {labels("bert"): 3.0}  # PUT: the group replaced
    httpx.delete(group_url(gateway, instance=backend.settings.uri), timeout=5.0)


def test_the_bound_on_job_names_holds_in_the_pushed_group(tmp_path: Path, gateway: str) -> None:
    from tests.tasks.storage.backends import local_backend

    backend = local_backend(tmp_path / "fleet")
    backend.put("reports/fleet.json", fleet_json({f"job-{n}": "clean" for n in range(30)}))
    publish_metrics(backend.storage, storage_uri="s3://bucket/with spaces/and \"quotes\"", pushgateway=gateway,
                    limits=MetricsLimits(max_job_names=5))
    verdicts = gateway_samples(gateway, "stormwatch_job_verdict")
    assert len(verdicts) == 5
    assert {dict(labels)["instance"] for labels in verdicts} == {"s3://bucket/with spaces/and \"quotes\""}
    assert list(gateway_samples(gateway, "stormwatch_job_names_omitted").values()) == [25.0]
    httpx.delete(group_url(gateway, instance="s3://bucket/with spaces/and \"quotes\""), timeout=5.0)


def test_an_unreachable_pushgateway_is_recorded_and_warned_never_raised(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from tests.tasks.storage.backends import local_backend

    backend = local_backend(tmp_path / "fleet")
    backend.put("reports/fleet.json", fleet_json({"llama": "critical"}))
    closed = f"http://127.0.0.1:{free_port()}"
    with caplog.at_level(logging.WARNING, logger="stormwatch.tasks.metrics"):
        result = publish_metrics(backend.storage, storage_uri=backend.settings.uri, pushgateway=closed,
                                 policy=NO_WAIT)
    assert backend.get("reports/metrics.prom")  # the file is written whatever the push does
    assert result["pushgateway"]["pushed"] is False and result["pushgateway"]["attempts"] == 3
    assert "ConnectError" in result["pushgateway"]["error"]
    assert any("not reached after 3 attempts" in record.getMessage() and "next audit" in record.getMessage()
               for record in caplog.records)


def test_a_pushgateway_that_never_answers_is_given_up_on_after_the_timeout() -> None:
    with socket.socket() as listener:  # accepts connections (the kernel's backlog), never reads or answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        silent = f"http://127.0.0.1:{listener.getsockname()[1]}"
        result = push_metrics(silent, b"# EOF\n", instance="x", timeout_s=0.5, policy=NO_WAIT)
    assert not result.pushed and result.attempts == 3 and "ReadTimeout" in (result.error or "")


class _Answering(BaseHTTPRequestHandler):
    status = 500
    seen: list[str]

    def do_PUT(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(self.headers.get("Content-Type", ""))
        self.send_response(type(self).status)
        self.end_headers()
        self.wfile.write(b"nope")

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(("status", "attempts"), [(503, 3), (429, 3), (400, 1), (404, 1)])
def test_server_errors_are_retried_and_refusals_are_not(status: int, attempts: int) -> None:
    handler = type("Handler", (_Answering,), {"status": status, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    with serving(server) as port:
        result = push_metrics(f"http://127.0.0.1:{port}", b"# EOF\n", instance="x", policy=NO_WAIT)
    assert (result.pushed, result.attempts, result.error) == (False, attempts, f"HTTP {status}: nope")
    assert handler.seen == ["application/openmetrics-text; version=1.0.0; charset=utf-8"] * attempts


@pytest.mark.parametrize("instance", ["/data/fleet", "s3://b/p", "", "ä/ö?#%"])
def test_group_urls_carry_any_instance_as_base64url(instance: str) -> None:
    url = group_url("http://gw:9091/", instance=instance)
    head, encoded = url.split("/instance@base64/")
    assert head == "http://gw:9091/metrics/job/stormwatch"
    assert base64.urlsafe_b64decode(encoded if encoded != "=" else "") == instance.encode()
