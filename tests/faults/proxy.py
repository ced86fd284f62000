"""A fault-injecting HTTP proxy on 127.0.0.1 in front of an S3 endpoint (moto's server in the tests).

Every request is forwarded as received (bodies buffered, one upstream connection per
request) unless a :class:`Rule` of the plan matches it. A rule names a fault, which
requests it matches (operations and an ``fnmatch`` pattern on the object key, or on
the ``prefix`` of a listing), how many matching requests it lets through first
(``skip``: the Nth matching request is faulted with ``skip=N-1``) and how many it
faults (``times``; ``None``: every one from then on). The faults:

- ``ERROR_500``: an S3 ``InternalError`` XML answer, status 500;
- ``SLOW_DOWN``: an S3 ``SlowDown`` XML answer, status 503;
- ``RESET``: the client connection is reset (RST), nothing answered;
- ``TRUNCATE``: the upstream answer's status and headers with a ``Content-Length``
  larger than the bytes sent (half the body), then the connection is closed;
- ``TRUNCATE_REQUEST``: upstream receives the request's full ``Content-Length`` but
  only half its body before the proxy closes that connection; the client is reset.

With ``after=True`` the first three forward the request first, so it takes effect
upstream and only its answer is lost. Every request is logged (operation, key, fault,
status answered) so tests can count faults injected and the retries they caused.
"""

from __future__ import annotations

import fnmatch
import http.client
import socket
import struct
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.serving import serving


class Fault(StrEnum):
    ERROR_500 = "500"
    SLOW_DOWN = "503-slowdown"
    RESET = "reset"
    TRUNCATE = "truncate"
    TRUNCATE_REQUEST = "truncate-request"


class Op(StrEnum):
    """The S3 operation a request is, as far as the tests care."""

    LIST = "list"
    GET = "get"
    HEAD = "head"
    PUT = "put"
    DELETE = "delete"
    OTHER = "other"


_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                         "upgrade", "expect", "content-length"})
_ERROR_XML = ("<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>{code}</Code><Message>{message}</Message>"
              "<RequestId>fault-proxy</RequestId></Error>")


def classify(method: str, target: str) -> tuple[Op, str]:
    """``(operation, key)`` of a path-style S3 request; a listing's key is its ``prefix``."""
    parts = urlsplit(target)
    bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
    if not key:
        prefix = parse_qs(parts.query).get("prefix", [""])[0]
        return (Op.LIST, prefix) if method == "GET" and bucket else (Op.OTHER, "")
    ops = {"GET": Op.GET, "HEAD": Op.HEAD, "PUT": Op.PUT, "DELETE": Op.DELETE}
    return ops.get(method, Op.OTHER), key


@dataclass
class Rule:
    """One line of the plan; ``seen``/``injected`` count matching requests and faults given."""

    fault: Fault
    ops: frozenset[Op] | None = None
    key: str = "*"
    skip: int = 0
    times: int | None = 1
    after: bool = False
    seen: int = 0
    injected: int = 0

    def matches(self, op: Op, key: str) -> bool:
        return (self.ops is None or op in self.ops) and fnmatch.fnmatchcase(key, self.key)

    def due(self) -> bool:
        """Count one matching request; whether this rule would fault it."""
        self.seen += 1
        return self.seen > self.skip and (self.times is None or self.injected < self.times)


@dataclass(frozen=True)
class Logged:
    op: Op
    key: str
    fault: Fault | None
    status: int | None  # what the client was answered; None: reset or cut short
    upstream: int | None = None  # for TRUNCATE_REQUEST: what upstream answered the short body, if anything


@dataclass
class FaultProxy:
    """The plan, the log and the listening address of a running proxy."""

    upstream: str
    port: int = 0
    rules: list[Rule] = field(default_factory=list)
    log: list[Logged] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def inject(self, fault: Fault, *, ops: set[Op] | None = None, key: str = "*", skip: int = 0,
               times: int | None = 1, after: bool = False) -> Rule:
        rule = Rule(fault, frozenset(ops) if ops is not None else None, key, skip, times, after)
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Drop the plan (the log stays)."""
        with self._lock:
            self.rules.clear()

    def decide(self, op: Op, key: str) -> Rule | None:
        """The first rule that matches and still has a fault to give; every matching rule counts the request."""
        with self._lock:
            chosen = None
            for rule in self.rules:
                if rule.matches(op, key) and rule.due() and chosen is None:
                    chosen = rule
            if chosen is not None:
                chosen.injected += 1
            return chosen

    def record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)

    def injected(self) -> Counter[Fault]:
        with self._lock:
            return Counter(entry.fault for entry in self.log if entry.fault is not None)

    def requests(self, op: Op, key: str = "*") -> list[Logged]:
        with self._lock:
            return [entry for entry in self.log if entry.op is op and fnmatch.fnmatchcase(entry.key, key)]


class _Relay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as botocore's pool expects
    proxy: FaultProxy

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base class signature
        return

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def _upstream(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.proxy.upstream)
        return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)

    def _headers(self) -> list[tuple[str, str]]:
        return [(name, value) for name, value in self.headers.items() if name.lower() not in _HOP_BY_HOP]

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = self._upstream()
        try:
            connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self._headers():
                connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            data = response.read()
            return response.status, response.getheaders(), data
        finally:
            connection.close()

    def _forward_truncated(self, body: bytes) -> int | None:
        """Send the full Content-Length and half the body, then stop sending; upstream's status, if any."""
        connection = self._upstream()
        try:
            connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self._headers():
                connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body[: len(body) // 2])
            assert connection.sock is not None
            connection.sock.shutdown(socket.SHUT_WR)
            try:
                response = connection.getresponse()
                response.read()
                return response.status
            except (OSError, http.client.HTTPException):
                return None
        finally:
            connection.close()

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes, *, truncate: bool = False) -> None:
        self.send_response_only(status)
        length = next((value for name, value in headers if name.lower() == "content-length"), None)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        if self.command == "HEAD":
            self.send_header("Content-Length", length or "0")
            self.end_headers()
            return
        self.send_header("Content-Length", str(max(len(body), 1) if truncate else len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if truncate else body)
        self.wfile.flush()
        if truncate:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def _error(self, status: int, code: str, message: str) -> None:
        body = _ERROR_XML.format(code=code, message=message).encode()
        self._answer(status, [("Content-Type", "application/xml")], body)

    def _relay(self) -> None:
        """Decide, act upstream, log, then answer: the log is complete when the client has its answer."""
        body = self._body()
        op, key = classify(self.command, self.path)
        rule = self.proxy.decide(op, key)
        fault = rule.fault if rule is not None else None
        if fault is Fault.TRUNCATE_REQUEST:
            upstream = self._forward_truncated(body)
            self.proxy.record(Logged(op, key, fault, None, upstream))
            self._reset()
            return
        if fault in (Fault.ERROR_500, Fault.SLOW_DOWN, Fault.RESET):
            assert rule is not None
            if rule.after:
                self._forward(body)
            if fault is Fault.RESET:
                self.proxy.record(Logged(op, key, fault, None))
                self._reset()
            elif fault is Fault.ERROR_500:
                self.proxy.record(Logged(op, key, fault, 500))
                self._error(500, "InternalError", "We encountered an internal error. Please try again.")
            else:
                self.proxy.record(Logged(op, key, fault, 503))
                self._error(503, "SlowDown", "Please reduce your request rate.")
            return
        status, headers, data = self._forward(body)
        self.proxy.record(Logged(op, key, fault, None if fault is Fault.TRUNCATE else status))
        self._answer(status, headers, data, truncate=fault is Fault.TRUNCATE)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _relay  # noqa: N815 - http.server's naming


@contextmanager
def fault_proxy(upstream: str) -> Iterator[FaultProxy]:
    """A running proxy to ``upstream`` (``http://host:port``) on 127.0.0.1 and a free port."""
    state = FaultProxy(upstream)
    handler = type("Relay", (_Relay,), {"proxy": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    with serving(server) as port:
        state.port = port
        yield state
