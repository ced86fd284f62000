"""Python's cyclic garbage collector paused while the notify step builds and drops many small objects.

Reading a fleet's alert state, deciding and writing it back make and drop hundreds of thousands of
records, keys and JSON members, none of which form reference cycles. Each batch of new survivors
triggers full collections that walk every object of the process (the Prefect worker's included),
for nothing to collect (see bench/README.md, alerts_bench.py). :func:`paused` holds the collector
off for such a stretch; it runs as usual afterwards, over what is left.

The collector is process-wide: while it is paused no thread collects. Only computations run under it,
never a send or a storage call (which can wait on the network for minutes).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """The collector off inside, and back as it was (on, unless someone else turned it off) after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
