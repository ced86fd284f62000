"""How fast ``stormwatch audit``, ``serve`` and ``post-job`` refuse a command line that cannot run.

Each case runs the console script in a fresh subprocess (imports included, as a user sees it)
with no Prefect server configured and no AWS credentials, and prints its seconds, exit code and
the first line it wrote to stderr. ``python bench/cli_bench.py``; ``--moto`` adds S3 cases
against a local moto server (a bucket that exists with no jobs/, one that does not, a closed port).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stormwatch.flows.demo import write_demo_fleet


def clean_environment(home: Path) -> dict[str, str]:
    """No Prefect server, no AWS credentials, no instance metadata, a private Prefect home."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("AWS_", "PREFECT_", "STORMWATCH_"))}
    env.update(PREFECT_HOME=str(home / "prefect"), AWS_EC2_METADATA_DISABLED="true",
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
    return env


def cases(root: Path) -> list[tuple[str, list[str], dict[str, str]]]:
    flat = root / "flat"
    shutil.copytree(root / "demo" / "jobs", flat)
    (root / "empty-jobs" / "jobs").mkdir(parents=True)
    no_keys: dict[str, str] = {}
    return [
        ("folders directly under the root", ["audit", "--storage", str(flat)], no_keys),
        ("empty jobs/", ["audit", "--storage", str(root / "empty-jobs")], no_keys),
        ("ftp://x", ["audit", "--storage", "ftp://x"], no_keys),
        ("gs://x", ["audit", "--storage", "gs://x"], no_keys),
        ("s3://", ["audit", "--storage", "s3://"], no_keys),
        ("/nonexistent", ["audit", "--storage", "/nonexistent"], no_keys),
        ("s3://bucket, no credentials", ["audit", "--storage", "s3://bucket"], no_keys),
        ("serve without PREFECT_API_URL", ["serve", "--storage", str(root / "demo")], no_keys),
        ("post-job, no such job", ["post-job", "nope", "--storage", str(root / "demo")], no_keys),
        ("post-job, unsafe id", ["post-job", "..", "--storage", str(root / "demo")], no_keys),
    ]


@contextmanager
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def s3_cases(endpoint: str) -> list[tuple[str, list[str], dict[str, str]]]:
    import boto3

    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                          region_name="us-east-1")
    client.create_bucket(Bucket="bench-fleet")
    client.put_object(Bucket="bench-fleet", Key="prod/job-a/rank_0/telemetry.jsonl", Body=b"{}\n")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    return [
        ("s3 bucket, no jobs/", ["audit", "--storage", "s3://bench-fleet/prod", "--endpoint-url", endpoint], keys),
        ("s3 no such bucket", ["audit", "--storage", "s3://no-such-bucket", "--endpoint-url", endpoint], keys),
        ("s3 closed port", ["audit", "--storage", "s3://bench-fleet", "--endpoint-url", closed], keys),
    ]


def run(name: str, argv: list[str], env: dict[str, str]) -> None:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "stormwatch.flows.cli", *argv], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    seconds = time.perf_counter() - started
    line = (done.stderr.strip() or done.stdout.strip()).splitlines()[:1]
    print(f"{seconds:6.2f} s  exit {done.returncode}  {name}: {line[0] if line else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--moto", action="store_true", help="add S3 cases against a local moto server")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cli-bench-") as folder:
        root = Path(folder)
        write_demo_fleet(root / "demo", samples=20)
        env = clean_environment(root)
        for name, argv, extra in cases(root):
            run(name, argv, env | extra)
        if options.moto:
            with moto_endpoint() as endpoint:
                for name, argv, extra in s3_cases(endpoint):
                    run(name, argv, env | extra)


if __name__ == "__main__":
    main()
