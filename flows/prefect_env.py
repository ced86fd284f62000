"""Prefect settings for runs started from the command line, applied before Prefect is imported.

Prefect reads its settings at import. Without ``PREFECT_API_URL`` a flow run
starts a temporary local API server, which is slow to start (see bench/README.md,
fleet_bench.py); these defaults make that quiet, offline and fast (Prefect's own
start-up timeout has been seen to expire on 2 cores; the task-run recorder, event
persister and triggers services turn a large fleet into a backlog). Anything the
user set wins.

Whether an API server is configured is read without importing Prefect
(:func:`api_url_configured`), from where Prefect looks for ``PREFECT_API_URL``, first found wins:
the environment, ``.env``, ``prefect.toml`` (``[api] url``) and ``pyproject.toml``
(``[tool.prefect.api] url``) in the working directory, then the active profile of
``profiles.toml`` (``PREFECT_PROFILES_PATH``, else ``$PREFECT_HOME`` or ``~/.prefect``;
the profile ``$PREFECT_PROFILE``, else the file's ``active``). A profiles path set only in
``.env`` or ``prefect.toml`` is not followed.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

from stormwatch.flows.run_logs import EXTRA_LOGGERS, with_project_loggers

LOCAL_SERVER_DEFAULTS = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false",
}
API_URL = "PREFECT_API_URL"
LOCAL_API_URL = "http://127.0.0.1:4200/api"
START_A_SERVER = f"prefect server start, then export {API_URL}={LOCAL_API_URL}"
MISSING_FLOW = "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW"
TEMPORARY_SERVER_NOTICE = (f"starting a temporary Prefect server (10-20 s; set {API_URL} to a running server to "
                           "skip this: prefect server start)")


def configure(environ: MutableMapping[str, str] | None = None, *, verbose: bool = False) -> None:
    """Set quiet defaults for a temporary server (only when no API server is configured); name the
    project's loggers in ``PREFECT_LOGGING_EXTRA_LOGGERS`` whatever the server (the user's names kept)."""
    env = os.environ if environ is None else environ
    env.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if verbose else "WARNING")
    env[EXTRA_LOGGERS] = with_project_loggers(env.get(EXTRA_LOGGERS))
    # the project's loggers also speak outside flow runs (diagnose, preflight): there the API handler
    # has no run to send to, and Prefect's default would add a UserWarning to each record on stderr
    env.setdefault(MISSING_FLOW, "ignore")
    if api_url_configured(env):
        return
    for name, value in LOCAL_SERVER_DEFAULTS.items():
        env.setdefault(name, value)


def announce_temporary_server(environ: Mapping[str, str] | None = None) -> bool:
    """Say on stderr, in one line, that a temporary server is about to start (when none is configured);
    whether it will."""
    if api_url_configured(environ):
        return False
    print(TEMPORARY_SERVER_NOTICE, file=sys.stderr, flush=True)
    return True


def api_url_configured(environ: Mapping[str, str] | None = None, *, cwd: Path | None = None) -> bool:
    """Whether Prefect will find a non-empty ``PREFECT_API_URL`` (see the module docstring for where)."""
    return configured_api_url(environ, cwd=cwd) is not None


def configured_api_url(environ: Mapping[str, str] | None = None, *, cwd: Path | None = None) -> str | None:
    """The ``PREFECT_API_URL`` Prefect will use, ``None`` when none (or an empty one) is set."""
    env = os.environ if environ is None else environ
    if API_URL in env:
        return env[API_URL].strip() or None
    here = Path.cwd() if cwd is None else cwd
    for found in (_dotenv(here / ".env").get(API_URL), _toml_value(here / "prefect.toml", ("api", "url")),
                  _toml_value(here / "pyproject.toml", ("tool", "prefect", "api", "url")), _profile_value(env)):
        if found is not None:
            return str(found).strip() or None
    return None


def _dotenv(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of a ``.env`` file (``export`` and quotes allowed); empty when unreadable."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    values: dict[str, str] = {}
    for line in lines:
        text = line.strip().removeprefix("export ").strip()
        if not text or text.startswith("#") or "=" not in text:
            continue
        key, _, value = text.partition("=")
        values[key.strip()] = value.strip().strip("'\"")
    return values


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as stream:
            return tomllib.load(stream)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _toml_value(path: Path, keys: tuple[str, ...]) -> object | None:
    node: object = _read_toml(path)
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _profile_value(env: Mapping[str, str]) -> object | None:
    if env.get("PREFECT_PROFILES_PATH"):
        path = Path(env["PREFECT_PROFILES_PATH"]).expanduser()
    else:
        home = Path(env["PREFECT_HOME"]).expanduser() if env.get("PREFECT_HOME") else Path.home() / ".prefect"
        path = home / "profiles.toml"
    contents = _read_toml(path)
    active = env.get("PREFECT_PROFILE") or contents.get("active")
    profiles = contents.get("profiles")
    if not isinstance(active, str) or not isinstance(profiles, dict) or not isinstance(profiles.get(active), dict):
        return None
    return profiles[active].get(API_URL)
