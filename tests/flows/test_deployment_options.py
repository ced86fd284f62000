"""Every option of ``stormwatch audit`` can be set on a deployment: it is a flow parameter (unless
run_options.COMMAND_ONLY says why not), ``serve`` and ``post-job`` deployments carry it, and
infra/prefect.yaml declares it for both its deployments."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from stormwatch.flows.cli import build_parser
from stormwatch.flows.parameters import AuditParameters
from stormwatch.flows.run_options import COMMAND_ONLY, audit_parameters

REPO = Path(__file__).resolve().parents[2]


def options_of(command: str) -> dict[str, str]:
    """``dest -> --flag`` of a command's options."""
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    sub = commands.choices[command]
    return {action.dest: action.option_strings[-1] for action in sub._actions
            if action.option_strings and action.dest != "help"}


AUDIT_OPTIONS = options_of("audit")


@pytest.mark.parametrize("dest", sorted(set(AUDIT_OPTIONS) - set(COMMAND_ONLY)))
def test_each_audit_option_is_a_parameter_of_every_deployment(dest: str) -> None:
    from stormwatch.flows.deployments import build_deployments

    flag = AUDIT_OPTIONS[dest]
    assert dest in AuditParameters.model_fields, f"{flag}: no flow parameter {dest!r} (or add it to COMMAND_ONLY)"
    nightly, on_demand = build_deployments(AuditParameters(storage="s3://fleet/prod"), cron="0 2 * * *",
                                           timezone="UTC")
    assert dest in nightly.parameters["params"] and dest in on_demand.parameters["params"]
    assert dest in options_of("serve") or dest == "as_of", f"serve does not take {flag}"
    config = yaml.safe_load((REPO / "infra" / "prefect.yaml").read_text())
    for deployment in config["deployments"]:
        assert dest in deployment["parameters"]["params"], f"infra/prefect.yaml {deployment['name']}: no {dest}"


def test_the_command_only_options_exist_and_the_yaml_parameters_are_valid() -> None:
    assert set(COMMAND_ONLY) <= set(AUDIT_OPTIONS)
    config = yaml.safe_load((REPO / "infra" / "prefect.yaml").read_text())
    for deployment in config["deployments"]:
        params = deployment["parameters"]["params"]
        assert set(params) == set(AuditParameters.model_fields)  # every parameter, nothing unknown
        AuditParameters.model_validate(params)
        assert deployment["work_pool"]["job_variables"]["env"]["PREFECT_LOGGING_EXTRA_LOGGERS"] == "stormwatch"


def test_a_dask_address_parameter_runs_jobs_inline_unless_told_otherwise() -> None:
    assert AuditParameters(storage="x", dask_address="tcp://scheduler:8786").engine.value == "inline"
    assert AuditParameters(storage="x", dask_address="tcp://s:8786", engine="threads").engine.value == "threads"
    assert AuditParameters(storage="x").engine.value == "processes"
    assert AuditParameters(storage="x", job_timeout_s=30).engine_settings().job_timeout_s == 30
    with pytest.raises(ValueError, match="password"):
        AuditParameters.parse({"storage": "x", "dask_address": "tcp://u:secret@s:8786"})


#: The audit's options a post-job does not take: one job, in a process of its own or its task's thread
#: (``--engine``), without an engine pool.
ENGINE_ONLY = {"workers", "batch_bytes"}


def test_post_job_takes_every_audit_option_but_the_engines_and_its_job_timeout_reaches_the_flow() -> None:
    post_job = options_of("post-job")
    assert set(AUDIT_OPTIONS) - set(post_job) == ENGINE_ONLY | {"break_lease"}
    assert post_job["job_timeout_s"] == AUDIT_OPTIONS["job_timeout_s"] == "--job-timeout"
    parser = build_parser()
    given = parser.parse_args(["post-job", "job-1", "--storage", "x", "--job-timeout", "30"])
    assert audit_parameters(given, storage="x").job_timeout_s == 30
    default = parser.parse_args(["post-job", "job-1", "--storage", "x"])
    audit = parser.parse_args(["audit", "--storage", "x"])
    assert audit_parameters(default, storage="x").job_timeout_s == audit_parameters(audit, storage="x").job_timeout_s
    threads = parser.parse_args(["post-job", "job-1", "--storage", "x", "--engine", "threads"])
    assert audit_parameters(threads, storage="x").engine.value == "threads"
    assert audit_parameters(default, storage="x").engine.value == "processes"
