"""The one retry idiom: a RetryPolicy gives the Prefect tasks their options and drives in-process loops."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from stormwatch.tasks.diagnose import diagnose_batch, diagnose_job, read_previous, take_inventory
from stormwatch.tasks.notify.delivery import SendError
from stormwatch.tasks.publish import publish_view_task
from stormwatch.tasks.retry import RetryPolicy, RetryWhen, is_transient
from stormwatch.tasks.storage.protocol import InputChangedError, JobNotFoundError


@pytest.mark.parametrize(
    ("task", "retries", "delays", "conditional"),
    [
        (diagnose_job, 2, [2, 10], True),
        (diagnose_batch, 0, 0, False),  # its jobs retry their own transient failures, one by one
        (take_inventory, 3, [1, 5, 20], True),  # an unsafe or missing root fails at once
        (read_previous, 3, [1, 5, 20], True),
        (publish_view_task, 3, [1, 5, 20], False),
    ],
)
def test_prefect_tasks_keep_their_retry_counts_and_delays(
    task: Any, retries: int, delays: list[int], conditional: bool
) -> None:
    assert (task.retries, task.retry_delay_seconds) == (retries, delays)
    assert (task.retry_condition_fn is not None) is conditional


def test_task_options_round_trip_through_with_options() -> None:
    quick = diagnose_job.with_options(retry_delay_seconds=0)
    assert (quick.retries, quick.retry_delay_seconds) == (2, 0)
    assert quick.retry_condition_fn is diagnose_job.retry_condition_fn
    assert pickle.loads(pickle.dumps(diagnose_job.retry_condition_fn)) == diagnose_job.retry_condition_fn


def _client_error(status: int, code: str = "InternalError") -> ClientError:
    return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (InputChangedError("still being written"), True),
        (JobNotFoundError("gone"), False),
        (_client_error(503, "SlowDown"), True),
        (_client_error(400, "Throttling"), True),
        (_client_error(403, "AccessDenied"), False),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True),
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (SendError("HTTP 500", retriable=True), True),
        (SendError("HTTP 400 invalid_payload", retriable=False), False),
        (ValueError("bad input"), False),
        (None, False),
    ],
)
def test_one_transient_classification(error: BaseException | None, transient: bool) -> None:
    assert is_transient(error) is transient


class _FailedState:
    def __init__(self, error: BaseException, *, raises: bool) -> None:
        self.error, self.raises = error, raises

    def result(self, raise_on_failure: bool = True) -> object:
        if self.raises:
            raise self.error
        return self.error


@pytest.mark.parametrize("raises", [False, True])
def test_retry_condition_reads_the_failed_state(raises: bool) -> None:
    condition = RetryWhen(is_transient)
    assert condition(None, None, _FailedState(InputChangedError("x"), raises=raises)) is True
    assert condition(None, None, _FailedState(JobNotFoundError("x"), raises=raises)) is False


def test_run_waits_the_policy_delays_then_gives_up_with_the_last_error() -> None:
    slept: list[float] = []
    calls: list[int] = []
    retried: list[tuple[int, float]] = []

    def call() -> None:
        calls.append(len(calls) + 1)
        raise ConnectionResetError(f"attempt {len(calls)}")

    policy = RetryPolicy(attempts=4, delays_s=(1, 5, 20))
    attempted = policy.run(call, sleep=slept.append, on_retry=lambda n, _exc, delay: retried.append((n, delay)))
    assert (attempted.ok, attempted.attempts, attempted.transient) == (False, 4, True)
    assert str(attempted.error) == "attempt 4"
    assert slept == [1, 5, 20] and retried == [(1, 1), (2, 5), (3, 20)] and calls == [1, 2, 3, 4]


def test_run_stops_at_a_permanent_error_and_at_success() -> None:
    slept: list[float] = []
    attempted = RetryPolicy(3, (1, 2)).run(lambda: int("x"), sleep=slept.append)
    assert (attempted.ok, attempted.attempts, attempted.transient, slept) == (False, 1, False, [])
    assert isinstance(attempted.error, ValueError)
    assert RetryPolicy(3, (1, 2)).run(lambda: None, sleep=slept.append).ok


def test_retry_after_lengthens_a_wait_up_to_the_cap() -> None:
    policy = RetryPolicy.exponential(3, first_delay_s=0.5)
    assert policy.delays_s == (0.5, 1.0)
    assert [policy.delay_s(1, retry_after_s=hint) for hint in (None, 0.1, 7.0, 3600.0)] == [0.5, 0.5, 7.0, 30.0]


@pytest.mark.parametrize(("attempts", "delays"), [(0, ()), (3, (1,)), (2, (1, 2)), (2, (-1,))])
def test_inconsistent_policies_are_refused(attempts: int, delays: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(attempts, delays)


def test_a_single_attempt_never_retries() -> None:
    policy = RetryPolicy(1)
    assert policy.task_options() == {"retries": 0, "retry_delay_seconds": []}
    with pytest.raises(ValueError):
        policy.delay_s(1)
