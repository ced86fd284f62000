"""Task arguments Prefect hands over as they are, never walking them.

Before a task runs, Prefect visits every object of its arguments (``visit_collection``: looking
for futures and states to resolve) and, under a cache policy, hashes them. A row per stored job
handed to a task made that walk the largest cost of an audit with nothing to do (PREFECT.md;
``tests/flows/test_task_inputs.py`` checks it no longer grows with the fleet). Arguments that
never hold a future are wrapped in :func:`~prefect.utilities.annotations.quote`, which the task
engine unwraps without visiting what is inside.

A Dask task runner ships a quoted argument as a plain tuple (a ``quote`` is a named tuple), so
under any runner but the thread pool the argument goes as it is, walked.
"""

from __future__ import annotations

from typing import TypeVar, cast

from prefect.context import FlowRunContext
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

T = TypeVar("T")


def unwalked(value: T) -> T:
    """``value``, handed to a task without Prefect visiting it: it must hold no future or state.
    Typed as ``value`` itself, since the task receives it unwrapped."""
    context = FlowRunContext.get()
    if context is not None and not isinstance(context.task_runner, ThreadPoolTaskRunner):
        return value  # see the module docstring: Dask would hand the task a tuple
    return cast(T, quote(value))
