"""The flows' shared typed parameters: validated and frozen, built once by the command line, given to
both deployments, and never holding a secret (Prefect stores flow parameters in its database)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

import stormwatch.flows.audit
import stormwatch.flows.deployments
from stormwatch.analysis.collective import CollectivePreset
from stormwatch.flows.cli import main
from stormwatch.flows.parameters import AuditParameters
from stormwatch.severity import FailOn
from tests import builders as b
from tests.tasks.notify.servers import WebhookServer

SECRET = "pa55-in-a-flag-QQ"
NOTIFY_VARIABLES = ("STORMWATCH_SLACK_WEBHOOK", "STORMWATCH_SMTP_URL", "STORMWATCH_EMAIL_TO", "STORMWATCH_EMAIL_FROM",
                    "STORMWATCH_NOTIFY_ON", "STORMWATCH_NOTIFY_DIGEST", "STORMWATCH_STORAGE")


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NOTIFY_VARIABLES:
        monkeypatch.setenv(name, "")  # registered for restoring: the CLI hands secret flags to the environment
        monkeypatch.delenv(name)


def test_parameters_are_typed_validated_and_frozen() -> None:
    params = AuditParameters(storage="s3://fleet/prod", fail_on="critical", preset="high", max_events=10,
                             email_to="", slack_webhook_block=" ")
    assert (params.fail_on, params.preset, params.notify_on) == (FailOn.CRITICAL, CollectivePreset.HIGH, "critical")
    assert params.email_to is None and params.slack_webhook_block is None and params.secret_blocks() == {}
    with pytest.raises(ValidationError):
        params.force = True  # type: ignore[misc]
    assert AuditParameters.model_validate(params.as_deployment()) == params  # a deployment's JSON comes back equal
    assert params.as_deployment()["fail_on"] == "critical"


@pytest.mark.parametrize(("values", "message"), [
    ({"storage": "x", "fail_on": "sometimes"}, "fail_on"),
    ({"storage": "x", "preset": "extreme"}, "preset"),
    ({"storage": "x", "notify_on": "info"}, "notify_on"),
    ({"storage": "x", "max_events": 0}, "max_events must be a positive integer"),
    ({"storage": "x", "max_artifact_bytes": -3}, "max_artifact_bytes must be a positive integer"),
    ({"storage": "  "}, "storage must not be blank"),
    ({"storage": "x", "slack_webhook": "https://hooks.example/T/B/tok"}, "slack_webhook: Extra inputs"),
    ({"storage": "x", "smtp_url": "smtp://u:p@h"}, "smtp_url: Extra inputs"),
    ({"storage": "x", "report_base_url": f"https://user:{SECRET}@reports.example"}, "must not hold a password"),
    ({"storage": "x", "endpoint_url": f"http://key:{SECRET}@minio:9000"}, "must not hold a password"),
])
def test_bad_or_secret_values_are_refused_without_quoting_them(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        AuditParameters.parse(values)
    assert SECRET not in str(caught.value) and "hooks.example" not in str(caught.value)


def test_no_field_can_hold_a_secret() -> None:
    assert not {"slack_webhook", "smtp_url", "password"} & set(AuditParameters.model_fields)
    assert AuditParameters.model_config.get("extra") == "forbid"


def test_the_cli_builds_the_parameters_once_and_hands_secrets_to_the_environment(
    clean_environment: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[AuditParameters, bool]] = []

    class FakeFlow:
        def with_options(self, **options: Any) -> FakeFlow:
            return self

        def __call__(self, params: AuditParameters, progress: bool = False, return_state: bool = False) -> Any:
            from prefect.states import Completed

            calls.append((params, progress))
            result = {"summary": dict.fromkeys(("jobs", "diagnosed", "skipped", "failed", "refused", "critical",
                                                "warning", "info", "clean", "empty"), 0),
                      "exit_code": 0, "critical": [], "failed": [], "refused": []}
            return Completed(data=result) if return_state else result

    monkeypatch.setattr(stormwatch.flows.audit, "nightly_audit", FakeFlow())
    monkeypatch.setenv("STORMWATCH_NOTIFY_ON", "warning")
    hook = f"https://hooks.example/services/T/B/{SECRET}"
    (tmp_path / "jobs" / "job-1").mkdir(parents=True)  # a storage root: the command checks it before the flow
    code = main(["audit", "--storage", str(tmp_path), "--slack-webhook", hook, "--smtp-url", f"smtp://u:{SECRET}@h",
                 "--email-to", "oncall@example.com", "--max-events", "7", "--fail-on", "warning", "--digest",
                 "--slack-webhook-block", "ignored-when-the-flag-is-given"])
    assert code == 0
    ((params, progress),) = calls
    assert progress is True
    assert (params.storage, params.fail_on, params.max_events) == (str(tmp_path), FailOn.WARNING, 7)
    assert params.digest is True
    assert params.notify_on == "warning"  # no --notify-on: STORMWATCH_NOTIFY_ON
    assert params.email_to == "oncall@example.com" and params.slack_webhook_block == "ignored-when-the-flag-is-given"
    assert SECRET not in params.model_dump_json() and SECRET not in repr(params)
    assert os.environ["STORMWATCH_SLACK_WEBHOOK"] == hook and SECRET in os.environ["STORMWATCH_SMTP_URL"]


def test_bad_parameters_are_a_usage_error(clean_environment: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--storage", "x", "--report-base-url", f"https://u:{SECRET}@reports.example"]) == 2
    err = capsys.readouterr().err
    assert "must not hold a password" in err and SECRET not in err


@pytest.mark.usefixtures("prefect_api")
def test_a_flow_run_stores_no_secret(clean_environment: None, tmp_path: Path, webhook: WebhookServer) -> None:
    from prefect.client.orchestration import get_client

    root = tmp_path / "fleet"
    b.write_multi_rank_job(root / "jobs" / "critical-job", world_size=2, alerts=b.DEFAULT_ALERTS)
    assert main(["audit", "--storage", str(root), "--slack-webhook", f"{webhook.url}?token={SECRET}"]) == 0
    assert len(webhook.posts) == 1  # the secret did reach the run, through its environment
    with get_client(sync_client=True) as client:
        runs = [run for run in client.read_flow_runs(limit=200) if run.parameters.get("params", {}).get("storage")
                == str(root)]
    assert len(runs) == 1
    stored = orjson.dumps(runs[0].parameters).decode()
    assert str(root) in stored and SECRET not in stored and "token" not in stored


def test_audit_parameters_from_an_argparse_namespace_ignore_unrelated_flags() -> None:
    from stormwatch.flows.audit_cmd import audit_parameters

    args = argparse.Namespace(endpoint_url=None, fail_on="never", preset="medium", max_job_bytes=None,
                              max_artifact_bytes=None, max_events=None, report_base_url=None, notify_on="critical",
                              digest=False, email_to=None, email_from=None, slack_webhook_block=None,
                              smtp_url_block=None, slack_webhook=f"https://h/{SECRET}", workers=3, cron="x")
    params = audit_parameters(args, storage="fleet")
    assert params == AuditParameters(storage="fleet", workers=3) and SECRET not in params.model_dump_json()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, {"engine": "processes", "workers": None}),
        ({"engine": "threads", "workers": 2, "batch_bytes": 1 << 20}, {"engine": "threads", "workers": 2,
                                                                       "batch_bytes": 1 << 20}),
        ({"dask_address": "tcp://scheduler:8786"}, {"engine": "inline"}),  # each Dask worker is a process
        ({"dask_address": "tcp://scheduler:8786", "engine": "threads"}, {"engine": "threads"}),
    ],
)
def test_engine_flags_become_parameters(flags: dict[str, object], expected: dict[str, object]) -> None:
    from stormwatch.flows.audit_cmd import audit_parameters

    base = {name: None for name in ("endpoint_url", "max_job_bytes", "max_artifact_bytes", "max_events",
                                    "report_base_url", "email_to", "email_from", "slack_webhook_block",
                                    "smtp_url_block")}
    args = argparse.Namespace(**base, fail_on="never", preset="medium", notify_on="critical", digest=False,
                              **flags)
    dumped = audit_parameters(args, storage="fleet").model_dump(mode="json")
    assert {name: dumped[name] for name in expected} == expected


def test_engine_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="workers"):
        AuditParameters.parse({"storage": "fleet", "workers": 0})
    with pytest.raises(ValueError, match="batch_bytes"):
        AuditParameters.parse({"storage": "fleet", "batch_bytes": 1024})


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--job-name-pattern", "train-(\\d+"], "does not compile"),
        (["--job-name-pattern", "train-\\d+"], "has no group"),
        (["--as-of", "last tuesday"], "as_of"),
        (["--baseline-runs", "0"], "baseline_runs"),
    ],
)
def test_bad_history_flags_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
                                            words: str) -> None:
    assert main(["audit", "--storage", str(tmp_path), *flags]) == 2
    assert words in capsys.readouterr().err


def test_history_flags_become_parameters() -> None:
    from stormwatch.flows.audit_cmd import audit_parameters

    base = {name: None for name in ("endpoint_url", "max_job_bytes", "max_artifact_bytes", "max_events",
                                    "report_base_url", "email_to", "email_from", "slack_webhook_block",
                                    "smtp_url_block")}
    args = argparse.Namespace(**base, fail_on="never", preset="medium", notify_on="critical", digest=False,
                              as_of="2026-11-30T02:00", job_name_pattern="(.+)-run\\d+", history_days=30,
                              baseline_runs=5, regression_pct=20.0, suspect_days=7)
    params = audit_parameters(args, storage="fleet")
    assert params.audit_time().isoformat() == "2026-11-30T02:00:00+00:00"  # naive is UTC
    assert params.job_names().name_of("llama-run12") == "llama"
    assert (params.regression_thresholds().runs, params.regression_thresholds().min_change) == (5, 0.2)
    assert params.suspect_thresholds().nights == 7 and params.history_days == 30
