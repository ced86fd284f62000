"""``stormwatch diagnose s3://bucket/prefix``: one job read straight from S3 (moto over HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from stormwatch import load_artifacts
from stormwatch.flows.cli import main
from tests import builders as b


def test_diagnose_an_s3_prefix_equals_the_local_folder(
    tmp_path: Path, s3_bucket: str, moto_client: Any, moto_endpoint: str
) -> None:
    job = tmp_path / "train-7"
    b.write_multi_rank_job(job, world_size=4, missing_ranks=[3], alerts=b.DEFAULT_ALERTS)
    for path in sorted(job.rglob("*")):
        if path.is_file():
            key = f"fleet/jobs/train-7/{path.relative_to(job).as_posix()}"
            moto_client.put_object(Bucket=s3_bucket, Key=key, Body=path.read_bytes())

    uri = f"s3://{s3_bucket}/fleet/jobs/train-7"
    out = tmp_path / "out"
    assert main(["diagnose", uri, "--endpoint-url", moto_endpoint, "--out", str(out), "--fail-on", "critical"]) == 3
    document = orjson.loads((out / "model.json").read_bytes())
    assert document["job_id"] == "train-7" and document["source"] == uri
    assert document["model"]["missing_ranks"] == [3]
    assert all(source.startswith(f"{uri}/") for source in document["sources_loaded"])
    local = load_artifacts([job])
    assert sum(session["events"] for session in document["sessions"]) == sum(s.event_count for s in local.sessions)
    assert (out / "report.html").is_file()

    assert main(["diagnose", uri, str(job)]) == 2  # an s3:// SOURCE must be the only one
