"""The media types stormwatch writes its outputs as: one spelling each, for storage objects and HTTP bodies.

An S3-compatible store serves a report with the ``Content-Type`` it was written with (a browser
opens ``report.html`` instead of downloading it); a local folder ignores it.
"""

from __future__ import annotations

from enum import StrEnum


class MediaType(StrEnum):
    JSON = "application/json"  # model.json, fleet.json, alerts.json, silences.json, leases, webhook bodies
    NDJSON = "application/x-ndjson"  # notifications.jsonl: one JSON object a line
    HTML = "text/html; charset=utf-8"  # report.html, index.html
    PARQUET = "application/vnd.apache.parquet"  # fleet.parquet, history partitions
    OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"  # metrics.prom, Pushgateway pushes
    OCTETS = "application/octet-stream"  # damaged files kept as they were (reports/damaged/)
