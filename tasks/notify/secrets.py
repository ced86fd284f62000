"""Secrets for notifications: named (env var, Prefect Secret block) or held privately, and redacted.

A :class:`SecretRef` names where a secret lives; a value given on the command line
is held in a private attribute that is not a dataclass field, so ``repr``,
``dataclasses.asdict`` and Prefect's parameter serialisation never see it.
:class:`Redactor` removes every resolved secret (and its URL-encoded and path
forms) from error texts, and :func:`redacting_logs` applies it to records of the
HTTP libraries, whose request logs carry the full webhook URL.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

BlockLoader = Callable[[str], "str | None"]
REDACTED = "[redacted]"
_HTTP_LOGGERS = ("httpx", "httpcore")
_MIN_FRAGMENT_CHARS = 4  # shorter fragments (a one-letter password) are not worth blanking everywhere


def load_prefect_secret(name: str) -> str | None:
    """The value of the Prefect ``Secret`` block ``name`` (imports Prefect: ~2 s, so only when asked)."""
    from prefect.blocks.system import Secret

    block: Any = Secret.load(name)  # a Secret in sync code (Prefect's sync/async dispatch)
    value: Any = block.get()
    return None if value is None else str(value)


@dataclass(frozen=True)
class SecretRef:
    """A secret named, not shown: an env var, a Prefect Secret block, or a privately held value.

    ``flag`` only records which command-line flag a held value came from, for display.
    Resolution order: the held value, then ``env`` (``os.environ``), then ``block``.
    Two refs are equal when they name the same places and hold the same value.
    """

    env: str | None = None
    block: str | None = None
    flag: str | None = None

    @classmethod
    def held(cls, value: str, *, env: str | None = None, flag: str | None = None) -> SecretRef:
        """A ref holding ``value`` in memory (read from ``env`` in a given mapping, or from ``flag``)."""
        ref = cls(env=env, flag=flag)
        object.__setattr__(ref, "_value", value)
        return ref

    @property
    def is_held(self) -> bool:
        return self.__dict__.get("_value") is not None

    def resolve(self, *, load_block: BlockLoader | None = None) -> str | None:
        """The secret's value, or ``None`` when no source has it. ``load_block`` replaces Prefect (tests)."""
        held = self.__dict__.get("_value")
        if held:
            return str(held)
        if self.env and os.environ.get(self.env):
            return os.environ[self.env]
        if self.block:
            return (load_block or load_prefect_secret)(self.block) or None
        return None

    def __repr__(self) -> str:
        named = [f"{name}={value!r}" for name, value in (("env", self.env), ("block", self.block), ("flag", self.flag))]
        shown = [item for item in named if not item.endswith("=None")]
        if self.is_held:
            shown.append("value=<hidden>")
        return f"SecretRef({', '.join(shown)})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretRef):
            return NotImplemented
        return (self.env, self.block, self.flag, self.__dict__.get("_value")) == (
            other.env,
            other.block,
            other.flag,
            other.__dict__.get("_value"),
        )

    def __hash__(self) -> int:
        return hash((self.env, self.block, self.flag))


def secret_fragments(secret: str) -> set[str]:
    """Every form of ``secret`` that may leak into a message: itself, URL-(un)quoted, and for a
    URL its password, its path+query (a Slack webhook's secret part) and its query."""
    forms = {secret, quote(secret, safe=""), unquote(secret)}
    if "://" in secret:
        parts = urlsplit(secret)
        if parts.password:
            forms |= {parts.password, unquote(parts.password)}
        if parts.path not in ("", "/"):
            forms.add(parts.path + (f"?{parts.query}" if parts.query else ""))
            forms.add(parts.path)
        if parts.query:
            forms.add(parts.query)
    return {form for form in forms if len(form) >= _MIN_FRAGMENT_CHARS}


class Redactor:
    """Replaces every known secret fragment in a text by ``[redacted]``, longest first."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._fragments: list[str] = []
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        if secret:
            merged = set(self._fragments) | secret_fragments(secret)
            self._fragments = sorted(merged, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for fragment in self._fragments:
            text = text.replace(fragment, REDACTED)
        return text

    def __repr__(self) -> str:
        return f"Redactor({len(self._fragments)} fragments)"


class _RedactingFilter(logging.Filter):
    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self._redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._redact(record.getMessage())
        record.args = None
        return True


@contextmanager
def redacting_logs(redact: Redactor, loggers: Iterable[str] = _HTTP_LOGGERS) -> Iterator[None]:
    """While active, records of ``loggers`` (httpx logs each request's full URL) are redacted."""
    filters = [(logging.getLogger(name), _RedactingFilter(redact)) for name in loggers]
    for logger, log_filter in filters:
        logger.addFilter(log_filter)
    try:
        yield
    finally:
        for logger, log_filter in filters:
            logger.removeFilter(log_filter)
