"""Retries, one idiom: a typed :class:`RetryPolicy` and one transient-error classification.

A policy holds the attempts (the first try included) and the wait before each retry,
in seconds. It gives a Prefect task its options (``@task(name=..., **POLICY.task_options())``,
Prefect then does the waiting) and drives in-process loops (:meth:`RetryPolicy.run`, the
notification sends). :func:`is_transient` says, for both, which failures are worth another
attempt: a network or storage hiccup, a server asking to be called again; never bad input,
a refused job or a bug.

The pipeline's policies are the constants below; notifications build theirs from the
``max_attempts``/``backoff_s`` settings (:meth:`RetryPolicy.exponential`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

from botocore.exceptions import BotoCoreError, ClientError

from stormwatch.tasks.storage.protocol import InputChangedError, StorageError

MAX_RETRY_AFTER_S = 30.0


class RetriableError(Exception):
    """A failure that knows whether retrying may help: ``retriable``; ``retry_after_s``: the
    server's own hint (HTTP 429 ``Retry-After``), honoured up to the policy's cap."""

    def __init__(self, message: str, *, retriable: bool, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.retry_after_s = retry_after_s


def is_transient(error: BaseException | None) -> bool:
    """Worth retrying: a network or storage hiccup, not bad input or a bug."""
    if isinstance(error, RetriableError):
        return error.retriable  # the sender classified it (status code, SMTP reply, network)
    if isinstance(error, InputChangedError):
        return True  # a job still being written: read it again
    if isinstance(error, StorageError):
        return False  # missing job, too large, unsafe path: retrying changes nothing
    if isinstance(error, ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return int(status) >= 500 or error.response.get("Error", {}).get("Code") in ("SlowDown", "Throttling")
    return isinstance(error, BotoCoreError | ConnectionError | TimeoutError)


class TaskRetryOptions(TypedDict, total=False):
    """Keyword arguments of ``prefect.task`` (and ``Task.with_options``) that a policy sets."""

    retries: int
    retry_delay_seconds: list[float]
    retry_condition_fn: Callable[[Any, Any, Any], bool]


@dataclass(frozen=True)
class RetryWhen:
    """A Prefect ``retry_condition_fn``: retry a failed task run when ``predicate`` holds for its error."""

    predicate: Callable[[BaseException | None], bool]

    def __call__(self, _task: Any, _run: Any, state: Any) -> bool:
        try:
            error = state.result(raise_on_failure=False)
        except Exception as exc:  # reading the result of a failed state may itself raise the error
            error = exc
        return self.predicate(error if isinstance(error, BaseException) else None)


@dataclass(frozen=True)
class Attempted:
    """How :meth:`RetryPolicy.run` ended: ``attempts`` made; ``error``: the last failure (None:
    the call returned); ``transient``: that failure was of the retriable kind."""

    attempts: int
    error: Exception | None = None
    transient: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` calls at most (first try included); ``delays_s[n - 1]``: seconds to wait after
    failed attempt ``n``, so one delay per retry; a server's ``Retry-After`` hint can lengthen a
    wait, up to ``max_retry_after_s``."""

    attempts: int
    delays_s: tuple[float, ...] = ()
    max_retry_after_s: float = MAX_RETRY_AFTER_S

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"a retry policy needs at least one attempt, got {self.attempts}")
        if len(self.delays_s) != self.attempts - 1:
            raise ValueError(f"{self.attempts} attempts need {self.attempts - 1} delays, got {self.delays_s}")
        if any(delay < 0 for delay in self.delays_s) or self.max_retry_after_s < 0:
            raise ValueError(f"retry delays must be >= 0 s, got {self.delays_s}")

    @classmethod
    def exponential(cls, attempts: int, *, first_delay_s: float) -> RetryPolicy:
        """Waits of ``first_delay_s``, doubled after each further failure: 1, 2, 4, ... s."""
        return cls(attempts, tuple(first_delay_s * 2**n for n in range(attempts - 1)))

    @property
    def retries(self) -> int:
        return self.attempts - 1

    def delay_s(self, attempt: int, *, retry_after_s: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based, below ``attempts``), or the
        server's ``retry_after_s`` when longer (capped at ``max_retry_after_s``)."""
        if not 1 <= attempt < self.attempts:
            raise ValueError(f"no retry follows attempt {attempt} of {self.attempts}")
        delay = self.delays_s[attempt - 1]
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self.max_retry_after_s))
        return delay

    def task_options(self, *, retry_if: Callable[[BaseException | None], bool] | None = None) -> TaskRetryOptions:
        """Prefect task options: ``retries``, ``retry_delay_seconds`` and, with ``retry_if``, a
        ``retry_condition_fn`` retrying only the failures it accepts (e.g. :func:`is_transient`)."""
        options: TaskRetryOptions = {"retries": self.retries, "retry_delay_seconds": list(self.delays_s)}
        if retry_if is not None:
            options["retry_condition_fn"] = RetryWhen(retry_if)
        return options

    def run(
        self,
        call: Callable[[], object],
        *,
        retry_if: Callable[[BaseException | None], bool] = is_transient,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: Callable[[int, Exception, float], None] | None = None,
    ) -> Attempted:
        """Call ``call`` until it returns, at most ``attempts`` times, waiting between failures that
        ``retry_if`` accepts; never raises what ``call`` raises (an ``Exception``), returns it.

        ``on_retry(attempt, error, delay_s)`` runs before each wait (for logging)."""
        for attempt in range(1, self.attempts + 1):
            try:
                call()
            except Exception as exc:
                transient = retry_if(exc)
                if not transient or attempt == self.attempts:
                    return Attempted(attempt, exc, transient)
                hint = exc.retry_after_s if isinstance(exc, RetriableError) else None
                delay = self.delay_s(attempt, retry_after_s=hint)
                if on_retry is not None:
                    on_retry(attempt, exc, delay)
                sleep(delay)
            else:
                return Attempted(attempt)
        raise AssertionError("unreachable: attempts >= 1")


# The pipeline's Prefect tasks.
FLEET_IO_RETRY = RetryPolicy(attempts=4, delays_s=(1, 5, 20))
"""list-jobs, publish-fleet, update-fleet: storage listing and writes, any failure retried."""

DIAGNOSE_JOB_RETRY = RetryPolicy(attempts=3, delays_s=(2, 10))
"""diagnose-job, retried only when :func:`is_transient` (an engine error or a refused job fails at once)."""
