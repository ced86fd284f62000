"""The project's loggers in the Prefect UI, without user settings.

Prefect ships a run's log records to its API only from its own loggers and from those named in
``PREFECT_LOGGING_EXTRA_LOGGERS``. The ``stormwatch.*`` loggers say what a run's page must show
(a lease taken over, a send that failed, a key skipped), so the command line names them there
before Prefect is imported (:func:`with_project_loggers`, :mod:`stormwatch.flows.prefect_env`),
and each flow run gives them Prefect's handlers itself (:func:`attach_project_loggers`) for runs
started elsewhere (a worker of ``infra/prefect.yaml``, ``flow.from_source``). Records of level
WARNING and above reach the UI (the logger's level is left to the root's, WARNING under Prefect).
"""

from __future__ import annotations

import logging

PROJECT_LOGGER = "stormwatch"
EXTRA_LOGGERS = "PREFECT_LOGGING_EXTRA_LOGGERS"


def with_project_loggers(value: str | None) -> str:
    """``PREFECT_LOGGING_EXTRA_LOGGERS`` with the project's logger added (the user's names kept)."""
    names = [name.strip() for name in (value or "").split(",") if name.strip()]
    return ",".join(names if PROJECT_LOGGER in names else [*names, PROJECT_LOGGER])


def attach_project_loggers() -> None:
    """Give the ``stormwatch`` logger the handlers of Prefect's ``prefect.extra`` logger (console and
    API), once: Prefect attaches the same objects to the loggers its setting names, so none twice."""
    extra = logging.getLogger("prefect.extra")
    project = logging.getLogger(PROJECT_LOGGER)
    for handler in extra.handlers:
        if handler not in project.handlers:
            project.addHandler(handler)
