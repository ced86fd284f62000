"""model.json documents from real diagnoses, for the alerting and notify tests: no server, no network.

Documents come from jobs written by stormlog's own writers (tests/builders.py) and diagnosed by
:func:`stormwatch.diagnose.diagnose`, once per test session. ``HOSTILE`` strings try every trick a
message renderer must defuse (Slack mentions and links, HTML, header injection).
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from stormwatch.diagnose import diagnose
from tests import builders as b
from tests.model_builders import build_collective_synchronized

HOSTILE = "<!channel> <http://evil.example|click> & <script>alert(1)</script> <@U0ADMIN>"
HOSTILE_JOB_ID = "evil\r\nBcc: victim@evil.example\r\nX-Injected: 1 " + HOSTILE


def _collective(root: Path) -> None:
    build_collective_synchronized(root, world_size=4)


def _collective_missing(root: Path) -> None:
    build_collective_synchronized(root, world_size=4, ranks=(0, 1, 3))


def _alerts(root: Path) -> None:
    b.write_multi_rank_job(root, world_size=4, alerts=b.DEFAULT_ALERTS)


def _clean(root: Path) -> None:
    b.write_multi_rank_job(root, world_size=2, samples=12)


def _missing(root: Path) -> None:
    b.write_multi_rank_job(root, world_size=4, missing_ranks=(2, 3))


def _warning_only(root: Path) -> None:
    b.write_multi_rank_job(root, world_size=2, alerts=(b.Alert(2.0, "warning", "Memory usage above 80%"),))


def _hostile(root: Path) -> None:
    b.write_multi_rank_job(
        root, world_size=2, alerts=(b.Alert(3.5, "critical", HOSTILE),), phases=(b.Phase(HOSTILE, 0.25, 5.0),)
    )


JOB_BUILDERS: dict[str, tuple[str, Callable[[Path], None]]] = {
    # name: (job id, writer). Verdicts: collective critical (earliest = most severe, phase
    # "train / all_reduce"); alerts: earliest warning, most severe critical; clean: no indicator;
    # missing: ranks 2-3 missing, no indicator; warning_only: one warning; hostile: critical;
    # collective_missing: critical, rank 2 of 4 missing.
    "collective": ("train-collective-1", _collective),
    "collective_missing": ("train-collective-missing-6", _collective_missing),
    "alerts": ("train-alerts-2", _alerts),
    "clean": ("train-clean-3", _clean),
    "missing": ("train-missing-4", _missing),
    "warning_only": ("train-warning-5", _warning_only),
    "hostile": (HOSTILE_JOB_ID, _hostile),
}


@functools.cache
def documents() -> dict[str, dict[str, Any]]:
    """Parsed model.json of each job in :data:`JOB_BUILDERS`, diagnosed once per test session."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="notify-docs-") as tmp:
        for name, (job_id, write) in JOB_BUILDERS.items():
            root = Path(tmp) / name
            root.mkdir()
            write(root)
            out[name] = orjson.loads(diagnose([root], job_id=job_id, source_name=name).model_json())
    return out


def document(name: str, *, job_id: str | None = None) -> dict[str, Any]:
    """A deep copy of one document, optionally under another job id (a second job, same findings)."""
    copy = orjson.loads(orjson.dumps(documents()[name]))
    if job_id is not None:
        copy["job_id"] = job_id
    return copy
