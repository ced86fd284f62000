"""Notification test helpers: model.json documents from real diagnoses, and real local servers.

Documents come from jobs written by stormlog's own writers (tests/builders.py) and
diagnosed by :func:`stormwatch.diagnose.diagnose`. The servers are a webhook
receiver over HTTP and SMTP servers (aiosmtpd); both listen on 127.0.0.1 only
and record what they receive. The webhook server can answer a status (500 by
default) to the next N requests, or to all, and echoes the request path in its
error bodies, as some proxies do, so a test can check that the webhook's secret
path is redacted from stored errors.
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
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

from stormwatch.diagnose import diagnose
from tests import builders as b
from tests.model_builders import build_collective_synchronized
from tests.serving import serving

WEBHOOK_PATH = "/services/T0SECRET/B0SECRET/xoxSecretToken42"
HOSTILE = "<!channel> <http://evil.example|click> & <script>alert(1)</script> <@U0ADMIN>"
HOSTILE_JOB_ID = "evil\r\nBcc: victim@evil.example\r\nX-Injected: 1 " + HOSTILE


def _collective(root: Path) -> None:
    build_collective_synchronized(root, world_size=4)


def _collective_missing(root: Path) -> None:
    build_collective_synchronized(root, world_size=4, ranks=(0, 1, 3))


def _alerts(root: Path) -> None:
    b.write_multi_rank_job(root, world_size=4, alerts=b.DEFAULT_ALERTS)


def _clean(root: Path) -> None:
    b.write_multi_rank_job(root, world_size=2, samples=12)


def _missing(root: Path) -> None:
    b.write_multi_rank_job(root, world_size=4, missing_ranks=(2, 3))


def _warning_only(root: Path) -> None:
    b.write_multi_rank_job(root, world_size=2, alerts=(b.Alert(2.0, "warning", "Memory usage above 80%"),))


def _hostile(root: Path) -> None:
    b.write_multi_rank_job(
        root, world_size=2, alerts=(b.Alert(3.5, "critical", HOSTILE),), phases=(b.Phase(HOSTILE, 0.25, 5.0),)
    )


JOB_BUILDERS: dict[str, tuple[str, Callable[[Path], None]]] = {
    # name: (job id, writer). Verdicts: collective critical (earliest = most severe, phase
    # "train / all_reduce"); alerts: earliest warning, most severe critical; clean: no indicator;
    # missing: ranks 2-3 missing, no indicator; warning_only: one warning; hostile: critical;
    # collective_missing: critical, rank 2 of 4 missing.
    "collective": ("train-collective-1", _collective),
    "collective_missing": ("train-collective-missing-6", _collective_missing),
    "alerts": ("train-alerts-2", _alerts),
    "clean": ("train-clean-3", _clean),
    "missing": ("train-missing-4", _missing),
    "warning_only": ("train-warning-5", _warning_only),
    "hostile": (HOSTILE_JOB_ID, _hostile),
}


@functools.cache
def documents() -> dict[str, dict[str, Any]]:
    """Parsed model.json of each job in :data:`JOB_BUILDERS`, diagnosed once per test session."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="notify-docs-") as tmp:
        for name, (job_id, write) in JOB_BUILDERS.items():
            root = Path(tmp) / name
            root.mkdir()
            write(root)
            out[name] = orjson.loads(diagnose([root], job_id=job_id, source_name=name).model_json())
    return out


def document(name: str, *, job_id: str | None = None) -> dict[str, Any]:
    """A deep copy of one document, optionally under another job id (a second job, same findings)."""
    copy = orjson.loads(orjson.dumps(documents()[name]))
    if job_id is not None:
        copy["job_id"] = job_id
    return copy


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
