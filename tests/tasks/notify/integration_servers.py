"""Real servers for the integration tests: Debian's Alertmanager, a recording JSON receiver that can
check what it gets (a documented shape, an HMAC signature), and a server that accepts and never answers.

Alertmanager is started on 127.0.0.1 and a free port, gossip off, storage in a temporary folder, and
stopped by its PID. Missing binary: the test fails under ``CI=true`` (CI installs it) and is skipped
otherwise.
"""

from __future__ import annotations

import hashlib
import hmac
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.prometheus_parts import require, started
from tests.serving import serving
from tests.tasks.notify.servers import free_port

ALERTMANAGER = "prometheus-alertmanager"
AM_CONFIG = """\
route: {receiver: hold, group_wait: 1s, group_interval: 1s, repeat_interval: 1h}
receivers: [{name: hold}]
"""
Check = Callable[[dict[str, str], bytes], list[str]]  # (headers, raw body) -> problems


@dataclass
class Alertmanager:
    url: str

    def alerts(self, **params: str) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.url}/api/v2/alerts", params=params, timeout=5)
        response.raise_for_status()
        return list(response.json())

    def silence(self, matchers: dict[str, str], *, starts: str, ends: str) -> str:
        body = {"matchers": [{"name": name, "value": value, "isRegex": False, "isEqual": True}
                             for name, value in matchers.items()],
                "startsAt": starts, "endsAt": ends, "createdBy": "stormwatch-test", "comment": "test"}
        response = httpx.post(f"{self.url}/api/v2/silences", json=body, timeout=5)
        response.raise_for_status()
        return str(response.json()["silenceID"])


@contextmanager
def alertmanager(tmp_path: Path) -> Iterator[Alertmanager]:
    binary = shutil.which(ALERTMANAGER)
    require(binary is not None, ALERTMANAGER, "apt-get install prometheus-alertmanager")
    assert binary is not None
    config = tmp_path / "am.yml"
    config.write_text(AM_CONFIG)
    storage = tmp_path / "am-data"
    storage.mkdir()
    url = f"http://127.0.0.1:{free_port()}"
    command = [binary, f"--config.file={config}", f"--storage.path={storage}",
               f"--web.listen-address={url.removeprefix('http://')}", "--cluster.listen-address=", "--log.level=warn"]
    with started(command, f"{url}/-/ready", tmp_path / "alertmanager.log"):
        yield Alertmanager(url)


@dataclass
class JsonReceiver:
    """Records each POST (headers, raw body); ``check`` finds problems in a post: a post with problems
    is answered 400 and its problems kept. ``status``: what to answer otherwise."""

    check: Check | None = None
    status: int = 202
    port: int = 0
    posts: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook/secret-path-Zq7"

    @property
    def bodies(self) -> list[Any]:
        return [orjson.loads(body) for _, body in self.posts]

    def answer(self, headers: dict[str, str], body: bytes) -> int:
        with self._lock:
            try:
                problems = self.check(headers, body) if self.check else []
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                problems = [f"unreadable: {type(exc).__name__}: {exc}"]
            self.posts.append((headers, body))
            self.problems += problems
            return 400 if problems else self.status


@contextmanager
def json_receiver(check: Check | None = None, *, status: int = 202) -> Iterator[JsonReceiver]:
    state = JsonReceiver(check=check, status=status)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = state.answer({name.lower(): value for name, value in self.headers.items()}, body)
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base class signature
            return

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as port:
        state.port = port
        yield state


@contextmanager
def silent_server() -> Iterator[tuple[str, list[int]]]:
    """A TCP server that accepts connections and never answers: (URL, connections accepted)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.05)
    accepted: list[socket.socket] = []
    counts: list[int] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            accepted.append(connection)  # held open, never read or answered
            counts.append(1)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/never", counts
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in accepted:
            connection.close()
        listener.close()


def signed_by(key: bytes) -> Check:
    """A receiver's check: the ``X-Stormwatch-Signature`` header is HMAC-SHA256 of the exact body with ``key``."""

    def check(headers: dict[str, str], body: bytes) -> list[str]:
        expected = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
        given = headers.get("x-stormwatch-signature", "")
        return [] if hmac.compare_digest(given, expected) else [f"bad signature {given[:80]!r}"]

    return check
