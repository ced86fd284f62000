"""``stormwatch audit --pushgateway URL`` with the Pushgateway down, then up: the first audit completes (exit 0)
and its failed push is a ledger line; the next audit, with Debian's Pushgateway listening on that address,
pushes its metrics and the ledger shows that too."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.flows.test_metrics_audit import audit, env, write_fleet  # noqa: F401 - env: a fixture
from tests.ledger_files import ledger_lines_at
from tests.prometheus_parts import free_port, pushgateway

pytestmark = pytest.mark.usefixtures("prefect_api", "env")


def test_an_unreachable_pushgateway_is_recorded_and_the_next_audit_pushes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "fleet"
    write_fleet(root)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    assert audit(root, url) == 0  # the gateway is down: the audit completes all the same
    assert "(recorded failed in notifications.jsonl)" in capsys.readouterr().out
    [failed] = [line for line in ledger_lines_at(root) if line.get("type") == "push"]
    assert (failed["gateway"], failed["status"]) == (f"127.0.0.1:{port}", "failed")
    assert str(failed["error"]).startswith("ConnectError")
    with pushgateway(tmp_path, port=port):
        assert audit(root, url) == 0
        assert "stormwatch_jobs" in httpx.get(f"{url}/metrics", timeout=5.0).text
    assert "pushed to the pushgateway (recorded pushed in notifications.jsonl)" in capsys.readouterr().out
    lines = [line for line in ledger_lines_at(root) if line.get("type") == "push"]
    assert [line["status"] for line in lines] == ["failed", "pushed"]
    carried = (root / "reports" / "notifications.jsonl").read_text()
    assert '"type":"push"' in carried  # the second audit's fold kept the failure, the newest line then
