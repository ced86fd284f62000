"""Run a ``ThreadingHTTPServer`` on a background thread for the length of a ``with`` block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[int]:
    """Yields the server's port; shuts it down and closes it afterwards."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
