"""fleet.json rows whose first causes are placed (issue 28: ``oom``, ``host``, ``device_id``,
``since_start_ns``, ``oom_dump``), and a reader of the index's "Needs attention" list."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from tests import builders as b
from tests.reports.builders import make_fleet_job

NS = 1_000_000_000


def placed(*, rank: int = 3, signal: str = "alert:error", severity: str = "critical", oom: bool = False,
           host: str | None = "gpu-node-01", device_id: int | None = 3, since_s: float | None = 20.0,
           phase_path: str | None = "train / backward", oom_dump: str | None = None,
           confidence: float | None = None) -> dict[str, Any]:
    """A cause dict as fleet.json rows now store it."""
    since = None if since_s is None else int(since_s * NS)
    return {"rank": rank, "signal": signal, "severity": severity, "timestamp_ns": b.START_NS + (since or 0),
            "phase_path": phase_path, "confidence": confidence, "oom": oom, "host": host, "device_id": device_id,
            "since_start_ns": since, "oom_dump": oom_dump}


def job(job_id: str, *, verdict: str = "critical", cause: dict[str, Any] | None = None,
        earliest: dict[str, Any] | None = None, diagnosed_at: str = "2026-11-30T02:00:00+00:00",
        **options: Any) -> dict[str, Any]:
    """A fleet.json row; ``cause`` is both its first causes, else ``earliest`` and ``most_severe`` apart."""
    most_severe = options.pop("most_severe", cause)
    extra = {name: options.pop(name) for name in ("worst_attempt", "worst_session", "coverage") if name in options}
    row = make_fleet_job(job_id=job_id, verdict=verdict, earliest=earliest or cause, most_severe=most_severe,
                         diagnosed_at=diagnosed_at, **options)
    return {**row, **extra}


class _Items(HTMLParser):
    """``li.attention`` elements: (attributes, text content with whitespace collapsed)."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[tuple[dict[str, str | None], list[str]]] = []
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "li" and ("class", "attention") in attrs:
            self.items.append((dict(attrs), []))
            self.depth = 1
        elif self.depth and tag not in ("br",):
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.items[-1][1].append(data)


def attention_items(html: str) -> list[tuple[dict[str, str | None], str]]:
    parser = _Items()
    parser.feed(html)
    return [(attrs, " ".join("".join(parts).split())) for attrs, parts in parser.items]
