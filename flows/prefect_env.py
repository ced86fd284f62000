"""Prefect settings for runs started from the command line, applied before Prefect is imported.

Prefect reads its settings at import. Without ``PREFECT_API_URL`` a flow run
starts a temporary local API server; these defaults make that quiet, offline
and fast (measured: the default 20 s start-up timeout has been seen to expire on
2 cores; the task-run recorder, event persister and triggers services turn a
large fleet into a backlog). Anything the user set wins.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

LOCAL_SERVER_DEFAULTS = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false",
}


def configure(environ: MutableMapping[str, str] | None = None, *, verbose: bool = False) -> None:
    """Set quiet defaults for a temporary server (only when no API server is configured)."""
    env = os.environ if environ is None else environ
    env.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if verbose else "WARNING")
    if env.get("PREFECT_API_URL"):
        return
    for name, value in LOCAL_SERVER_DEFAULTS.items():
        env.setdefault(name, value)
