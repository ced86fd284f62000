"""Real Prometheus parts for the metrics tests: two parsers of the text we write, and Debian's
``prometheus-pushgateway`` and ``prometheus`` started on 127.0.0.1 (free ports), stopped by PID.

A missing part skips its tests, except under ``CI`` (set in CI), where it fails them: CI installs
``prometheus-pushgateway prometheus`` (apt) and ``prometheus_client`` (pip), so it never skips silently.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

PUSHGATEWAY = Path("/usr/bin/prometheus-pushgateway")
PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")


def require(found: bool, what: str, install: str) -> None:
    """Skip (or, under CI, fail) a test that needs ``what``."""
    if found:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {what} is missing: install it ({install})")
    pytest.skip(f"{what} is not installed ({install}); this test runs under CI=true")


def openmetrics_families(text: str) -> dict[str, Any]:
    """``text`` parsed by prometheus_client's OpenMetrics parser (raises on anything not OpenMetrics),
    families by name."""
    try:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
    except ImportError:
        require(False, "prometheus_client", "pip install prometheus_client")
        raise
    return {family.name: family for family in text_string_to_metric_families(text)}


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    """``promtool check metrics`` (Prometheus's own text parser and linter) over ``text``."""
    require(PROMTOOL.exists(), str(PROMTOOL), "apt-get install prometheus")
    return subprocess.run([str(PROMTOOL), "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=30, check=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_ready(url: str, process: subprocess.Popen[bytes], *, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout_s} s")


@contextmanager
def started(command: list[str], ready_url: str, log: Path) -> Iterator[None]:
    """Run ``command`` until the block ends (SIGTERM, then SIGKILL, by its PID), once ``ready_url`` answers 200."""
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        try:
            _wait_ready(ready_url, process)
            yield
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@dataclass(frozen=True)
class Prometheus:
    """A Pushgateway at ``pushgateway`` scraped every second (``honor_labels``) by a Prometheus at ``api``."""

    pushgateway: str
    api: str

    def query(self, promql: str) -> list[dict[str, Any]]:
        """``GET /api/v1/query``'s result vector (``[{"metric": {...}, "value": [t, "v"]}, ...]``)."""
        answer = httpx.get(f"{self.api}/api/v1/query", params={"query": promql}, timeout=5.0).json()
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])


@contextmanager
def pushgateway(folder: Path, *, port: int | None = None) -> Iterator[str]:
    """Debian's Pushgateway on ``port`` (default: a free one) of 127.0.0.1; yields its base URL."""
    require(PUSHGATEWAY.exists(), str(PUSHGATEWAY), "apt-get install prometheus-pushgateway")
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    # Debian's build persists to /var/lib/prometheus/pushgateway.data unless told not to: keep groups in memory
    with started([str(PUSHGATEWAY), f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="],
                 f"{url}/-/ready", folder / "pushgateway.log"):
        yield url


@contextmanager
def pushgateway_and_prometheus(folder: Path) -> Iterator[Prometheus]:
    """Debian's Pushgateway and Prometheus (scrape_interval 1s, honor_labels, scraping the Pushgateway)."""
    require(PROMETHEUS.exists(), str(PROMETHEUS), "apt-get install prometheus")
    with pushgateway(folder) as gateway:
        port = free_port()
        api = f"http://127.0.0.1:{port}"
        config = folder / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: pushgateway\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: ['{gateway.removeprefix('http://')}']}}]\n", encoding="utf-8")
        with started([str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={folder / 'tsdb'}",
                      f"--web.listen-address=127.0.0.1:{port}"], f"{api}/-/ready", folder / "prometheus.log"):
            yield Prometheus(pushgateway=gateway, api=api)


def poll(call: Any, *, until: Any, timeout_s: float = 15.0) -> Any:
    """``call()`` every 0.25 s until ``until(result)`` holds or ``timeout_s`` passed; the last result."""
    deadline = time.monotonic() + timeout_s
    result = call()
    while not until(result) and time.monotonic() < deadline:
        time.sleep(0.25)
        result = call()
    return result
