"""The audit's metrics: ``reports/metrics.prom`` through the storage, and a push to a Pushgateway.

After the fleet is published, :func:`publish_metrics` reads fleet.json and fleet.parquet back (by
key: the fleet's rows never travel through a task's parameters), renders the OpenMetrics text
(:mod:`stormwatch.outputs.fleet_metrics`), writes ``reports/metrics.prom`` whole, and, given a
Pushgateway URL, replaces this storage's group there::

    PUT <pushgateway>/metrics/job/stormwatch/instance@base64/<base64url of the storage URI>

so the series carry ``job="stormwatch"`` and ``instance="<storage URI>"`` (a URI holds slashes,
which a path segment cannot: the Pushgateway's ``@base64`` form carries it). A PUT replaces the
group: a job name that left the bounded set disappears at the next audit.

Never fails the audit: a Pushgateway that cannot be reached (after :data:`PUSH_RETRY`'s attempts,
:data:`PUSH_TIMEOUT_S` seconds each) is a warning line, ``pushgateway.error`` in the result and a
``"type": "push"`` line in the notify ledger naming the gateway's ``host:port``
(:mod:`stormwatch.alerting.push_notes`); the next audit pushes its whole group again, and the first
push that goes through after a failure is recorded too (a healthy gateway adds no line). The ledger
line is a segment of its own, as a post-job's lines are (:mod:`stormwatch.tasks.notify.ledger_store`):
no lease is needed, and the next audit's notify step folds it in. The URL holds no password (the
parameters refuse one), so it may be logged.
"""

from __future__ import annotations

import base64
import io
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from stormwatch.alerting.ledger import read_ledger
from stormwatch.alerting.push_notes import PushNote, gateway_name, push_line
from stormwatch.outputs.fleet_metrics import DEFAULT_LIMITS, MetricsLimits, fleet_metrics_text
from stormwatch.outputs.media_types import MediaType
from stormwatch.tasks.notify.ledger_store import read_ledger_bytes, write_ledger
from stormwatch.tasks.retry import FLEET_IO_RETRY, RetriableError, RetryPolicy
from stormwatch.tasks.storage.open import storage_for
from stormwatch.tasks.storage.protocol import FLEET_JSON_KEY, FLEET_PARQUET_KEY, METRICS_KEY, Storage, StorageSettings

log = logging.getLogger(__name__)

#: The Pushgateway ``job`` label of every push (the storage tells pushes apart, as ``instance``).
PUSH_JOB = "stormwatch"
#: Seconds one push may take (connect, send, answer), so a Pushgateway that never answers cannot hold the audit.
PUSH_TIMEOUT_S = 5.0
#: Three attempts, 1 s then 3 s apart: at most ~20 s of an audit spent on an unreachable Pushgateway.
PUSH_RETRY = RetryPolicy(attempts=3, delays_s=(1.0, 3.0))


def group_url(pushgateway: str, *, instance: str) -> str:
    """The Pushgateway URL of the group (``job`` :data:`PUSH_JOB`, ``instance``); the instance
    base64url-encoded (the ``@base64`` path form), so any text (a URI's slashes) is carried as it is."""
    encoded = base64.urlsafe_b64encode(instance.encode("utf-8")).decode("ascii") or "="  # "=": an empty value
    return f"{pushgateway.rstrip('/')}/metrics/job/{PUSH_JOB}/instance@base64/{encoded}"


@dataclass(frozen=True)
class PushResult:
    """How a push ended: ``url`` of the group, ``attempts`` made, ``error`` (None: the Pushgateway took it)."""

    url: str
    attempts: int
    error: str | None = None

    @property
    def pushed(self) -> bool:
        return self.error is None

    def as_json(self) -> dict[str, Any]:
        return {"url": self.url, "pushed": self.pushed, "attempts": self.attempts, "error": self.error}


def _put(client: httpx.Client, url: str, body: bytes) -> None:
    """One PUT; a network failure or a 5xx/429 answer is retriable, any other non-2xx is not."""
    try:
        response = client.put(url, content=body, headers={"Content-Type": MediaType.OPENMETRICS.value})
    except httpx.TransportError as exc:  # refused, reset, DNS, timed out
        raise RetriableError(f"{type(exc).__name__}: {exc}", retriable=True) from exc
    if not response.is_success:
        retriable = response.status_code >= 500 or response.status_code == 429
        raise RetriableError(f"HTTP {response.status_code}: {response.text[:200].strip()}", retriable=retriable)


def push_metrics(pushgateway: str, body: bytes, *, instance: str, timeout_s: float = PUSH_TIMEOUT_S,
                 policy: RetryPolicy = PUSH_RETRY) -> PushResult:
    """Replace the group of ``instance`` on ``pushgateway`` with ``body`` (OpenMetrics text); never raises
    for a failed push: the result says what happened."""
    url = group_url(pushgateway, instance=instance)
    with httpx.Client(timeout=timeout_s) as client:
        def retry(attempt: int, error: Exception, delay_s: float) -> None:
            log.info("pushgateway %s: attempt %d failed (%s), again in %.0f s", url, attempt, error, delay_s)

        done = policy.run(lambda: _put(client, url, body), on_retry=retry)
    return PushResult(url=url, attempts=done.attempts, error=None if done.error is None else str(done.error))


def record_push(storage: Storage, pushed: PushResult, *, gateway: str, now: datetime) -> PushNote | None:
    """The push in the ledger (:func:`~stormwatch.alerting.push_notes.push_line`: a failure, or a success
    after one) as a segment of its own; the line written, or None when there was nothing to record."""
    found = read_ledger_bytes(storage)
    previous = read_ledger(found.data).pushes.get(gateway)
    note = push_line(previous, gateway=gateway, attempts=pushed.attempts, error=pushed.error,
                     decided_at=now.astimezone(UTC).isoformat())
    if note is not None:
        write_ledger(storage, (found.data or b"") + note.to_line(), read=found, whole=False, now=now)
    return note


def read_fleet(storage: Storage) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """fleet.json (empty when there is none) and fleet.parquet's rank rows (None when there are none)."""
    document = storage.read_report(FLEET_JSON_KEY)
    table = storage.read_report(FLEET_PARQUET_KEY)
    return (orjson.loads(document) if document else {},
            pd.read_parquet(io.BytesIO(table)) if table else None)


def publish_metrics(storage: Storage, *, storage_uri: str, pushgateway: str | None,
                    limits: MetricsLimits = DEFAULT_LIMITS, policy: RetryPolicy = PUSH_RETRY,
                    timeout_s: float = PUSH_TIMEOUT_S) -> dict[str, Any]:
    """Write reports/metrics.prom from the published fleet, then push it when ``pushgateway`` is given.

    Returns ``{"file": uri, "bytes": n, "pushgateway": PushResult.as_json() | None}``, the push's with
    ``recorded``: the status of the ledger line written for it (``failed``, ``pushed`` after a failure;
    None: no line). Storage errors writing the file (after :data:`FLEET_IO_RETRY`) raise; a failed push
    does not (it is logged, recorded and returned)."""
    document, ranks = read_fleet(storage)
    body = fleet_metrics_text(document, ranks, limits=limits).encode("utf-8")
    written = FLEET_IO_RETRY.run(lambda: storage.write_report(METRICS_KEY, body,
                                                              content_type=MediaType.OPENMETRICS.value),
                                 retry_if=lambda error: True)
    if written.error is not None:
        raise written.error
    result: dict[str, Any] = {"file": storage.report_uri(METRICS_KEY), "bytes": len(body), "pushgateway": None}
    if pushgateway:
        pushed = push_metrics(pushgateway, body, instance=storage_uri, timeout_s=timeout_s, policy=policy)
        if not pushed.pushed:
            log.warning("pushgateway %s not reached after %d attempts (%s); pushed again at the next audit",
                        pushed.url, pushed.attempts, pushed.error)
        result["pushgateway"] = {**pushed.as_json(), "recorded": _recorded(storage, pushed, pushgateway)}
    return result


def _recorded(storage: Storage, pushed: PushResult, gateway: str) -> str | None:
    """The status the ledger line recorded (None: no line); a storage error here is logged, never raised."""
    try:
        note = record_push(storage, pushed, gateway=gateway_name(gateway), now=datetime.now(UTC))
    except Exception as exc:  # the ledger is a record of the push, never a reason to fail the metrics step
        log.warning("pushgateway %s: the push could not be recorded in the ledger: %s: %s", gateway_name(gateway),
                    type(exc).__name__, exc)
        return None
    return None if note is None else note.status.value


# No Prefect timeout_seconds: in a worker thread it cannot interrupt a blocking call (Prefect warns so on
# every run); the push is bounded by PUSH_TIMEOUT_S x PUSH_RETRY's attempts, the storage by its client's timeouts.
@task(name="publish-metrics", cache_policy=NO_CACHE)
def publish_metrics_task(settings: StorageSettings, pushgateway: str | None) -> dict[str, Any]:
    return publish_metrics(storage_for(settings), storage_uri=settings.uri, pushgateway=pushgateway)


def metrics_step(settings: StorageSettings, pushgateway: str | None) -> dict[str, Any]:
    """Run :func:`publish_metrics_task` from a flow; never raises: a failed run (storage down after its
    retries, the task's timeout) is logged and returned as ``{"error": <type>}``, the audit goes on."""
    result: Any = publish_metrics_task.submit(settings, pushgateway).result(raise_on_failure=False)
    if isinstance(result, BaseException) or not isinstance(result, dict):
        error = type(result).__name__ if isinstance(result, BaseException) else repr(result)
        log.error("metrics not published: %s", error)
        return {"error": error}
    return result
