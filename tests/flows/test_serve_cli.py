"""``stormwatch serve``: refuses without a lasting Prefect server, takes every option ``audit`` takes and
gives them to both deployments, with the task runner reaching served runs (issue 23)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from stormwatch.flows import serve_cmd
from stormwatch.flows.cli import build_parser, main
from stormwatch.flows.deployments import NIGHTLY_NAME, POST_JOB_NAME
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.preflight import parameters
from tests import builders as b

SECRET = "pa55-in-a-flag-QQ"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    fleet = tmp_path / "fleet"
    b.write_multi_rank_job(fleet / "jobs" / "job-a", world_size=2, samples=4)
    return fleet


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No PREFECT_API_URL anywhere: not in the environment, the working directory or a profile."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    monkeypatch.delenv("PREFECT_PROFILES_PATH", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.usefixtures("no_server")
@pytest.mark.parametrize(("extra", "words"), [
    ([], "serve needs a Prefect server that outlives it: prefect server start, then export "
         "PREFECT_API_URL=http://127.0.0.1:4200/api (or pass --temporary-server"),
    (["--as-of", "2026-11-30T02:00"], "--as-of does not apply to serve: a schedule acts at its own times"),
    (["--timezone", "Mars/Olympus"], "unknown --timezone 'Mars/Olympus'"),
    (["--cron", "every night"], "--cron 'every night' is not a cron expression"),
    (["--workers", "0"], "workers"),
], ids=["no-server", "as-of", "timezone", "cron", "workers"])
def test_serve_refuses_in_one_line(root: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                                   words: str) -> None:
    assert main(["serve", "--storage", str(root), *extra]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and words in err


SERVE_FLAGS = ["--force", "--workers", "3", "--engine", "threads", "--batch-bytes", str(2 << 20),
               "--max-artifact-bytes", "4096", "--notify-on", "warning", "--email-to", "oncall@example.com",
               "--history-days", "30", "--cron", "5 3 * * *", "--timezone", "Europe/Paris"]


def served(root: Path, *extra: str) -> list[tuple[Any, Any]]:
    args = build_parser().parse_args(["serve", "--storage", str(root), *SERVE_FLAGS, *extra])
    return serve_cmd.served_flows(parameters(args), cron=args.cron, timezone=args.timezone,
                                  dask_address=args.dask_address)


def test_serve_takes_the_audit_options_into_both_deployments(root: Path) -> None:
    (nightly_flow, nightly), (post_job_flow, on_demand) = served(root)
    assert (nightly.name, on_demand.name) == (NIGHTLY_NAME, POST_JOB_NAME)
    assert (nightly_flow.name, post_job_flow.name) == ("nightly-audit", "post-job")
    assert nightly.parameters == on_demand.parameters
    params = AuditParameters.model_validate(nightly.parameters["params"])
    assert (params.force, params.workers, params.engine.value, params.batch_bytes) == (True, 3, "threads", 2 << 20)
    assert (params.max_artifact_bytes, params.notify_on, params.history_days) == (4096, "warning", 30)
    (schedule,) = nightly.schedules
    assert (schedule.schedule.cron, schedule.schedule.timezone) == ("5 3 * * *", "Europe/Paris")
    for flow in (nightly_flow, post_job_flow):  # threads as audit sizes them: twice the engine workers
        assert type(flow.task_runner).__name__ == "ThreadPoolTaskRunner" and flow.task_runner._max_workers == 6


def test_a_dask_address_reaches_the_served_flows(root: Path) -> None:
    pairs = served(root, "--dask-address", "tcp://127.0.0.1:8786")
    for flow, deployment in pairs:
        assert type(flow.task_runner).__name__ == "DaskTaskRunner"
        assert flow.task_runner.address == "tcp://127.0.0.1:8786"
        assert deployment.parameters["params"]["engine"] == "threads"  # --engine given wins over inline


@pytest.mark.usefixtures("prefect_api")
def test_serve_with_a_server_serves_both_deployments_without_secrets(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("STORMWATCH_SMTP_URL", "STORMWATCH_SLACK_WEBHOOK"):
        monkeypatch.setenv(name, "")  # registered for restoring: the command hands secret flags to the environment
    calls: list[tuple[list[tuple[Any, Any]], str]] = []
    monkeypatch.setattr(serve_cmd, "serve_flows", lambda flows, *, api_url: calls.append((flows, api_url)))
    code = main(["serve", "--storage", str(root), "--smtp-url", f"smtp://u:{SECRET}@h", *SERVE_FLAGS])
    assert code == 0
    ((flows, api_url),) = calls
    assert api_url.startswith("http://127.0.0.1:")
    deployments = [deployment for _, deployment in flows]
    assert {deployment.flow_name for deployment in deployments} == {"nightly-audit", "post-job"}
    assert all(SECRET not in orjson.dumps(deployment.parameters).decode() for deployment in deployments)
    assert "temporary Prefect server" not in capsys.readouterr().err


_VALIDATE = """
import json, sys
import cloudpickle
flow = cloudpickle.loads(sys.stdin.buffer.read())
print(json.dumps(sorted(flow.validate_parameters(json.loads(sys.argv[1])))))
"""


def test_a_served_flow_validates_its_parameters_in_a_fresh_process(root: Path) -> None:
    """Each served run gets the flow object cloudpickled into a new interpreter (the Runner's way);
    its parameters must validate there, the flows' string annotations notwithstanding."""
    cloudpickle = pytest.importorskip("cloudpickle")
    for flow, deployment in served(root):
        parameters = {**deployment.parameters, **({"job_id": "job-a"} if flow.name == "post-job" else {})}
        done = subprocess.run([sys.executable, "-c", _VALIDATE, json.dumps(parameters)], input=cloudpickle.dumps(flow),
                              capture_output=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        assert set(parameters) <= set(json.loads(done.stdout))
