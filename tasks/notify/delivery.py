"""Sending one message on one channel with bounded retries and exponential back-off.

A sender raises :class:`SendError` (``retriable`` for 5xx/429/4xx SMTP replies and
network failures, not for a refused payload or bad credentials); anything else it
raises counts as a permanent failure (:func:`~stormwatch.tasks.retry.is_transient`).
:func:`deliver` never raises: it returns a :class:`Delivery` whose error text has every
secret redacted. Attempts and waits come from a :class:`~stormwatch.tasks.retry.RetryPolicy`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from stormwatch.tasks.notify.secrets import Redactor
from stormwatch.tasks.retry import RetriableError, RetryPolicy

log = logging.getLogger("stormwatch.tasks.notify.dispatch")
MAX_ERROR_CHARS = 500


class SendError(RetriableError):
    """A send that did not go through; ``retry_after_s``: the server's own hint (HTTP 429)."""


@dataclass(frozen=True)
class Delivery:
    """How a send ended: ``attempts`` made (0: not tried), ``error`` (redacted) when not ``ok``,
    ``transient``: the last failure was of the retriable kind (the channel looks down)."""

    ok: bool
    attempts: int
    error: str | None = None
    transient: bool = False


def deliver(
    send: Callable[[], None],
    *,
    what: str,
    policy: RetryPolicy,
    redact: Redactor,
    sleep: Callable[[float], None] = time.sleep,
) -> Delivery:
    """Call ``send`` until it returns, as often as ``policy`` allows, sleeping between retriable failures.

    ``what`` names the message in logs (``"slack message for job 'x'"``); it must hold no secret.
    """

    def describe(exc: Exception) -> str:  # a broken channel must never fail the audit: any error is text
        text = str(exc) if isinstance(exc, SendError) else f"{type(exc).__name__}: {exc}"
        return redact(text)[:MAX_ERROR_CHARS]

    def retrying(attempt: int, exc: Exception, delay: float) -> None:
        log.info("notify: %s attempt %d failed (%s); retrying in %.2f s", what, attempt, describe(exc), delay)

    attempted = policy.run(send, sleep=sleep, on_retry=retrying)
    if attempted.error is None:
        log.info("notify: sent %s (attempt %d)", what, attempted.attempts)
        return Delivery(ok=True, attempts=attempted.attempts)
    error = describe(attempted.error)
    log.warning("notify: %s failed after %d attempt(s): %s", what, attempted.attempts, error)
    return Delivery(ok=False, attempts=attempted.attempts, error=error, transient=attempted.transient)
