"""The storage probe of an S3 root (:mod:`.probe`): a few bounded listings, answered within seconds.

Credentials come from botocore's standard chain (environment, shared credentials and config
files, container and instance metadata: each lookup with botocore's own 1 s timeout). The
client here is not the audit's: connect timeout :data:`CONNECT_TIMEOUT_S`, read timeout
:data:`READ_TIMEOUT_S`, :data:`TOTAL_ATTEMPTS` requests per call (first try included), and the
whole probe, credential lookup included, runs in a daemon thread given :data:`DEADLINE_S`
seconds: an endpoint that accepts connections and never answers cannot hold the command.

Requests: ``ListObjectsV2(Prefix=<prefix>/jobs/, Delimiter='/', MaxKeys=1000)`` (job folders;
also what tells a missing bucket, refused credentials or an unreachable endpoint), then either
``ListObjectsV2(Prefix=<prefix>/jobs/<job_id>/, MaxKeys=1)`` (one job asked about) or, with no
``jobs/``, ``ListObjectsV2(Prefix=<prefix>/, MaxKeys=1000)`` to say what the root holds instead.
Messages name the bucket, the prefix and the endpoint (its user and password removed), never a key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from stormwatch.tasks.storage.probe import (
    MAX_ROOT_ENTRIES,
    SAMPLE,
    RootSurvey,
    StoreUnreachableError,
    fleet_files,
    is_telemetry,
    without_userinfo,
)
from stormwatch.tasks.storage.protocol import StorageSettings, parse_storage_uri

CONNECT_TIMEOUT_S = 1.0
READ_TIMEOUT_S = 1.5
TOTAL_ATTEMPTS = 2
DEADLINE_S = 2.0

_MISSING_BUCKET = frozenset({"NoSuchBucket"})
_DENIED = frozenset({"AccessDenied", "403", "AllAccessDisabled", "AccountProblem"})
_BAD_CREDENTIALS = frozenset({"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
                              "TokenRefreshRequired", "InvalidClientTokenId"})

T = TypeVar("T")


def probe_config() -> Config:
    """Short timeouts and few attempts: the probe must answer, not persist."""
    return Config(retries={"mode": "standard", "total_max_attempts": TOTAL_ATTEMPTS},
                  connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S)


def within(deadline_s: float, work: Callable[[], T], *, stage: list[str]) -> T:
    """``work()`` in a daemon thread, its result or exception; after ``deadline_s`` seconds a
    :class:`StoreUnreachableError` naming the stage it was at (the thread is left to die with the process)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the caller's thread as is
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="storage-probe", daemon=True)
    thread.start()
    thread.join(deadline_s)
    if not outcome:
        raise StoreUnreachableError(f"no answer within {deadline_s:g} s while {stage[-1]}")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def survey_s3(settings: StorageSettings, *, job_id: str | None = None, deadline_s: float = DEADLINE_S) -> RootSurvey:
    """The survey of ``s3://bucket/prefix``; raises :class:`StoreUnreachableError` (exit 1 at the command line)."""
    _, bucket, prefix = parse_storage_uri(settings.uri)
    root = f"s3://{bucket}/{prefix}".rstrip("/")
    session = boto3.session.Session()
    client = session.client("s3", endpoint_url=settings.endpoint_url, config=probe_config())
    endpoint = without_userinfo(str(client.meta.endpoint_url))
    stage = ["looking for AWS credentials"]

    def survey() -> RootSurvey:
        if session.get_credentials() is None:
            raise StoreUnreachableError(
                "no AWS credentials found (environment, shared credentials and config files, instance "
                "metadata): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE")
        stage.append(f"listing {root}/ at {endpoint}")
        return _survey(client, settings, bucket=bucket, prefix=prefix, root=root, job_id=job_id)

    try:
        return within(deadline_s, survey, stage=stage)
    except StoreUnreachableError:
        raise
    except ClientError as exc:
        raise StoreUnreachableError(_client_error(exc, bucket=bucket, root=root, endpoint=endpoint)) from exc
    except NoCredentialsError as exc:
        raise StoreUnreachableError("no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                                    "or AWS_PROFILE") from exc
    except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError) as exc:
        raise StoreUnreachableError(f"cannot reach the S3 endpoint {endpoint} ({type(exc).__name__})") from exc
    except BotoCoreError as exc:  # a malformed endpoint, a profile that is not there...
        raise StoreUnreachableError(f"S3 at {endpoint}: {type(exc).__name__}") from exc


def _client_error(error: ClientError, *, bucket: str, root: str, endpoint: str) -> str:
    code = str(error.response.get("Error", {}).get("Code", "")) or "unknown"
    if code in _MISSING_BUCKET:
        return f"no such bucket {bucket!r} at {endpoint}"
    if code in _BAD_CREDENTIALS:
        return f"the AWS credentials found were refused by {endpoint} ({code})"
    if code in _DENIED:
        return f"access denied listing {root}/ at {endpoint} (s3:ListBucket on bucket {bucket!r})"
    return f"S3 error {code} listing {root}/ at {endpoint}"


def _survey(client: Any, settings: StorageSettings, *, bucket: str, prefix: str, root: str,
            job_id: str | None) -> RootSurvey:
    base = f"{prefix}/" if prefix else ""
    jobs_base = f"{base}{settings.jobs_prefix}/"
    page = client.list_objects_v2(Bucket=bucket, Prefix=jobs_base, Delimiter="/", MaxKeys=MAX_ROOT_ENTRIES)
    if page.get("KeyCount", 0):  # anything under jobs/, be it only a folder marker
        names = sorted(item["Prefix"][len(jobs_base):-1] for item in page.get("CommonPrefixes", ()))
        found = None
        if job_id is not None:
            job_page = client.list_objects_v2(Bucket=bucket, Prefix=f"{jobs_base}{job_id}/", MaxKeys=1)
            found = bool(job_page.get("KeyCount", 0))
        return RootSurvey(root=root, jobs_prefix=settings.jobs_prefix, has_jobs_folder=True,
                          job_ids=tuple(names[:SAMPLE]), job_count=len(names), more_jobs=bool(page.get("IsTruncated")),
                          job_found=found)
    page = client.list_objects_v2(Bucket=bucket, Prefix=base, MaxKeys=MAX_ROOT_ENTRIES)
    reports = settings.reports_parts[0]
    folders: dict[str, bool] = {}  # top-level folder -> holds telemetry
    files: list[str] = []
    for item in page.get("Contents", ()):
        top, slash, rest = str(item["Key"])[len(base):].partition("/")
        if not slash:
            files.append(top)
        elif top != reports and top:
            folders[top] = folders.get(top, False) or is_telemetry(rest)
    with_telemetry = sorted(name for name, telemetry in folders.items() if telemetry)
    telemetry_files = sorted(name for name in files if is_telemetry(name))
    others = sorted(f"{name}/" for name, telemetry in folders.items() if not telemetry)
    others += sorted(name for name in files if not is_telemetry(name))
    return RootSurvey(root=root, jobs_prefix=settings.jobs_prefix, has_jobs_folder=False,
                      telemetry_folders=tuple(with_telemetry[:SAMPLE]), telemetry_folder_count=len(with_telemetry),
                      count_is_lower_bound=bool(with_telemetry) and bool(page.get("IsTruncated")),
                      telemetry_files=tuple(telemetry_files[:SAMPLE]), other_names=tuple(others[:SAMPLE * 2]),
                      has_reports_folder=any(str(item["Key"])[len(base):].startswith(f"{reports}/")
                                             for item in page.get("Contents", ())), fleet_files=fleet_files(files))
