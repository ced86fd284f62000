"""Sending one message on one channel with bounded retries and exponential back-off.

A sender raises :class:`SendError` (``retriable`` for 5xx/429/4xx SMTP replies and
network failures, not for a refused payload or bad credentials); anything else it
raises counts as a permanent failure. :func:`deliver` never raises: it returns a
:class:`Delivery` whose error text has every secret redacted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from stormwatch.tasks.notify.secrets import Redactor

log = logging.getLogger("stormwatch.tasks.notify.dispatch")
MAX_RETRY_AFTER_S = 30.0
MAX_ERROR_CHARS = 500


class SendError(Exception):
    """A send that did not go through; ``retry_after_s``: the server's own hint (HTTP 429)."""

    def __init__(self, message: str, *, retriable: bool, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Delivery:
    """How a send ended: ``attempts`` made (0: not tried), ``error`` (redacted) when not ``ok``,
    ``transient``: the last failure was of the retriable kind (the channel looks down)."""

    ok: bool
    attempts: int
    error: str | None = None
    transient: bool = False


def backoff_delay_s(attempt: int, *, backoff_s: float, retry_after_s: float | None = None) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): ``backoff_s * 2**(attempt-1)``,
    or the server's ``Retry-After`` when longer (capped at 30 s)."""
    delay = backoff_s * 2 ** (attempt - 1)
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, MAX_RETRY_AFTER_S))
    return delay


def deliver(
    send: Callable[[], None],
    *,
    what: str,
    max_attempts: int,
    backoff_s: float,
    redact: Redactor,
    sleep: Callable[[float], None] = time.sleep,
) -> Delivery:
    """Call ``send`` until it returns, at most ``max_attempts`` times, sleeping between retriable failures.

    ``what`` names the message in logs (``"slack message for job 'x'"``); it must hold no secret.
    """
    error, transient = "", False
    for attempt in range(1, max_attempts + 1):
        try:
            send()
        except SendError as exc:
            error, transient, retry_after = redact(str(exc)), exc.retriable, exc.retry_after_s
        except Exception as exc:  # a broken channel must never fail the audit
            error, transient, retry_after = redact(f"{type(exc).__name__}: {exc}"), False, None
        else:
            log.info("notify: sent %s (attempt %d)", what, attempt)
            return Delivery(True, attempt)
        error = error[:MAX_ERROR_CHARS]
        if not transient or attempt == max_attempts:
            log.warning("notify: %s failed after %d attempt(s): %s", what, attempt, error)
            return Delivery(False, attempt, error, transient)
        delay = backoff_delay_s(attempt, backoff_s=backoff_s, retry_after_s=retry_after)
        log.info("notify: %s attempt %d failed (%s); retrying in %.2f s", what, attempt, error, delay)
        sleep(delay)
    raise AssertionError("unreachable: max_attempts >= 1")
