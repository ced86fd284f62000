"""Where the command line finds a configured Prefect server without importing Prefect, and the one line
it prints when a temporary one must start (issue 23)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormwatch.flows.prefect_env import TEMPORARY_SERVER_NOTICE, announce_temporary_server, configured_api_url

URL = "http://prefect.internal:4200/api"
PROFILES = f"""active = "work"
[profiles.work]
PREFECT_API_URL = "{URL}"
[profiles.ephemeral]
PREFECT_SERVER_EPHEMERAL_ENABLED = "true"
"""


@pytest.mark.parametrize(("files", "environ", "expected"), [
    ({}, {}, None),
    ({}, {"PREFECT_API_URL": URL}, URL),
    ({}, {"PREFECT_API_URL": "  "}, None),
    ({".env": f"# settings\nexport PREFECT_API_URL='{URL}'\n"}, {}, URL),
    ({"prefect.toml": f'[api]\nurl = "{URL}"\n'}, {}, URL),
    ({"pyproject.toml": f'[tool.prefect.api]\nurl = "{URL}"\n'}, {}, URL),
    ({"home/profiles.toml": PROFILES}, {}, URL),
    ({"home/profiles.toml": PROFILES}, {"PREFECT_PROFILE": "ephemeral"}, None),
    ({"elsewhere.toml": PROFILES}, {"PREFECT_PROFILES_PATH": "{tmp}/elsewhere.toml"}, URL),
    ({"home/profiles.toml": PROFILES}, {"PREFECT_API_URL": ""}, None),  # the environment wins, even empty
    ({"prefect.toml": "not = [toml"}, {}, None),
], ids=["nothing", "environment", "blank", "dotenv", "prefect-toml", "pyproject", "active-profile",
        "other-profile", "profiles-path", "environment-wins", "broken-toml"])
def test_configured_api_url(tmp_path: Path, files: dict[str, str], environ: dict[str, str],
                            expected: str | None) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {"PREFECT_HOME": str(tmp_path / "home")} | {key: value.format(tmp=tmp_path) for key, value in environ.items()}
    assert configured_api_url(env, cwd=tmp_path) == expected


def test_the_temporary_server_notice_is_one_line_only_without_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert announce_temporary_server({"PREFECT_API_URL": URL}) is False
    assert capsys.readouterr().err == ""
    assert announce_temporary_server({"PREFECT_HOME": str(tmp_path)}) is True
    assert capsys.readouterr().err == TEMPORARY_SERVER_NOTICE + "\n"
    assert "PREFECT_API_URL" in TEMPORARY_SERVER_NOTICE and "prefect server start" in TEMPORARY_SERVER_NOTICE


@pytest.mark.parametrize(("given", "expected"), [
    (None, "stormwatch"),
    ("", "stormwatch"),
    ("dask,botocore", "dask,botocore,stormwatch"),
    ("stormwatch", "stormwatch"),
])
def test_the_project_loggers_are_named_for_prefect_before_it_starts(given: str | None, expected: str) -> None:
    from stormwatch.flows.prefect_env import configure

    env = {} if given is None else {"PREFECT_LOGGING_EXTRA_LOGGERS": given}
    configure(env)
    assert env["PREFECT_LOGGING_EXTRA_LOGGERS"] == expected


@pytest.mark.parametrize(("given", "expected"), [(None, "ignore"), ("warn", "warn"), ("error", "error")])
def test_project_logs_outside_a_flow_run_bring_no_warning_unless_asked(given: str | None, expected: str) -> None:
    """``stormwatch diagnose`` logs outside any flow run: Prefect's API handler would add a UserWarning
    to each record; the user's own choice is kept."""
    from stormwatch.flows.prefect_env import configure

    env = {} if given is None else {"PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": given}
    configure(env)
    assert env["PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW"] == expected
