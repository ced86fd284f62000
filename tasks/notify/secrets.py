"""Secrets for notifications: named (env var, Prefect Secret block) or held privately, resolved, redacted.

A :class:`SecretRef` names where a secret lives; a value given on the command line
or read from the environment is held as a pydantic ``SecretStr``, so ``repr``, ``str``,
``dataclasses.asdict`` and any JSON dump (Prefect's serialisation) show a mask, never it.
A routes file's receivers name theirs as :class:`~stormwatch.alerting.secret_names.SecretName`
(pure, held nowhere); :meth:`SecretRef.of` turns either into a ref to resolve when sending.
:class:`Redactor` removes every resolved secret (and its URL-encoded and path
forms) from error texts, and :func:`redacting_logs` applies it to records of the
HTTP libraries, whose request logs carry the full webhook URL.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from stormwatch.alerting.secret_names import SecretSource

BlockLoader = Callable[[str], "str | None"]
REDACTED = "[redacted]"
_HTTP_LOGGERS = ("httpx", "httpcore")
_MIN_FRAGMENT_CHARS = 4  # shorter fragments (a one-letter password) are not worth blanking everywhere


def load_prefect_secret(name: str) -> str | None:
    """The value of the Prefect ``Secret`` block ``name`` (imports Prefect, which is slow: only when asked)."""
    from prefect.blocks.system import Secret

    block: Any = Secret.load(name)  # a Secret in sync code (Prefect's sync/async dispatch)
    value: Any = block.get()
    return None if value is None else str(value)


class SecretRef(BaseModel):
    """A secret named, not shown: an env var, a Prefect Secret block, or a value held as a ``SecretStr``.

    ``flag`` only records which command-line flag a held value came from, for display.
    Resolution order: the held value, then ``env`` (``os.environ``, read when resolving), then
    ``block`` (loaded when resolving, i.e. when sending). Two refs are equal when they name the
    same places and hold the same value. Frozen; ``repr``/``str`` show ``value=<hidden>``, and a
    JSON dump shows ``**********`` in its place.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    env: str | None = None
    block: str | None = None
    flag: str | None = None
    value: SecretStr | None = Field(default=None, repr=False)

    @classmethod
    def held(cls, value: str, *, env: str | None = None, flag: str | None = None) -> SecretRef:
        """A ref holding ``value`` in memory (read from ``env`` in a given mapping, or from ``flag``)."""
        return cls(env=env, flag=flag, value=SecretStr(value))

    @classmethod
    def of(cls, source: SecretSource) -> SecretRef:
        """``source`` as a ref: itself when it is one (it may hold a value), else the places it names."""
        return source if isinstance(source, SecretRef) else cls(env=source.env, block=source.block)

    @property
    def is_held(self) -> bool:
        return self.value is not None

    def resolve(self, *, load_block: BlockLoader | None = None) -> str | None:
        """The secret's value, or ``None`` when no source has it. ``load_block`` replaces Prefect (tests)."""
        held = None if self.value is None else self.value.get_secret_value()
        if held:
            return held
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

    def __str__(self) -> str:
        return repr(self)


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
