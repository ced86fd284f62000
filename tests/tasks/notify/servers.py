"""Notification test helpers: real local servers (the model.json documents sent about them are in
tests/stormwatch/alerting/documents.py).

The servers are a webhook receiver over HTTP and SMTP servers (aiosmtpd); both listen on 127.0.0.1 only
and record what they receive. The webhook server can answer a status (500 by
default) to the next N requests, or to all, and echoes the request path in its
error bodies, as some proxies do, so a test can check that the webhook's secret
path is redacted from stored errors.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.serving import serving

WEBHOOK_PATH = "/services/T0SECRET/B0SECRET/xoxSecretToken42"


@dataclass
class WebhookServer:
    """Records every POST (path, JSON body); ``fail_next`` requests get ``fail_status`` first."""

    port: int = 0
    fail_next: int = 0
    fail_status: int = 500
    always_fail: bool = False
    requests: list[tuple[str, int]] = field(default_factory=list)  # (path, status answered)
    posts: list[dict[str, Any]] = field(default_factory=list)  # bodies answered 200
    raw_posts: list[bytes] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{WEBHOOK_PATH}"

    def answer(self, path: str, body: bytes) -> int:
        with self._lock:
            failing = self.always_fail or self.fail_next > 0
            if self.fail_next > 0:
                self.fail_next -= 1
            status = self.fail_status if failing else 200
            self.requests.append((path, status))
            if status == 200:
                self.raw_posts.append(body)
                self.posts.append(orjson.loads(body))
            return status


@contextmanager
def webhook_server() -> Iterator[WebhookServer]:
    state = WebhookServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = state.answer(self.path, body)
            reply = b"ok" if status == 200 else f"upstream error for {self.path}".encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base class signature
            return

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as port:
        state.port = port
        yield state


def free_port() -> int:
    """A port free on 127.0.0.1 right now (aiosmtpd cannot bind port 0 itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Received:
    mail_from: str
    rcpt_tos: tuple[str, ...]
    data: bytes

    @property
    def message(self) -> EmailMessage:
        parsed = message_from_bytes(self.data, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        return parsed

    def part(self, subtype: str) -> str:
        """The decoded ``text/<subtype>`` part."""
        body = self.message.get_body((subtype,))
        assert body is not None, f"no text/{subtype} part"
        return str(body.get_content())


@dataclass
class SmtpRecorder:
    """aiosmtpd handler: records messages; answers ``451`` to the next ``tempfail_next`` DATA commands."""

    tempfail_next: int = 0
    messages: list[Received] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)
    port: int = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd hook
        if self.tempfail_next > 0:
            self.tempfail_next -= 1
            return "451 4.3.0 try again later"
        self.messages.append(Received(envelope.mail_from, tuple(envelope.rcpt_tos), bytes(envelope.content)))
        return "250 OK"

    def authenticator(self, user: str, password: str) -> Any:
        def check(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
            if not isinstance(auth_data, LoginPassword):
                return AuthResult(success=False, handled=False)
            login, secret = auth_data.login.decode(), auth_data.password.decode()
            self.logins.append((mechanism, login))
            return AuthResult(success=(login, secret) == (user, password), handled=False)  # False: send 535

        return check


@contextmanager
def smtp_server(
    *,
    auth: tuple[str, str] | None = None,
    auth_require_tls: bool = True,
    starttls_context: ssl.SSLContext | None = None,
    implicit_tls_context: ssl.SSLContext | None = None,
) -> Iterator[SmtpRecorder]:
    """An aiosmtpd server on 127.0.0.1 and a free port: plain, with STARTTLS offered
    (``starttls_context``), or TLS from the start (``implicit_tls_context``, smtps)."""
    recorder = SmtpRecorder(port=free_port())
    kwargs: dict[str, Any] = {}
    if auth is not None:
        kwargs.update(authenticator=recorder.authenticator(*auth), auth_require_tls=auth_require_tls)
    if starttls_context is not None:
        kwargs.update(tls_context=starttls_context, require_starttls=True)
    if implicit_tls_context is not None:
        kwargs.update(ssl_context=implicit_tls_context, server_hostname="localhost")
    controller = Controller(recorder, hostname="127.0.0.1", port=recorder.port, **kwargs)
    controller.start()
    try:
        yield recorder
    finally:
        controller.stop()


def self_signed_tls(directory: Path) -> tuple[Path, ssl.SSLContext]:
    """A certificate for ``localhost`` and 127.0.0.1 (PEM path, for ``SSL_CERT_FILE``) and a server context."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    return cert_path, context
