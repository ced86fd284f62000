"""A varied alert state for the format tests, and the version-1 file the code before version 2 wrote of it.

:func:`golden_book` builds, from the alert builders only (no diagnosis, so the engine's wording
cannot move it), three audits' worth of state: a job with earliest, most-severe, OOM and
missing-ranks alerts on placed ranks; a job of several attempts; hostile telemetry strings; a
suspect device and a regression that later resolve; a job re-diagnosed under the same job id with
other findings (two findings of one job id); targets sent, failed, claimed, held and silenced.

``golden/alerts_v1.json`` is ``golden_book().to_bytes()`` as written by the code of commit 4a41928
(state version 1, one whole finding per alert), checked in before version 2 existed::

    python -c "from tests.tasks.notify.alert_golden import write_v1; write_v1()"   # at 4a41928 only (its path then)
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from stormwatch.alerting.alert_file import AlertBook
from stormwatch.alerting.alert_records import TargetState
from stormwatch.alerting.alert_state import advance
from stormwatch.alerting.findings import AttemptRef, JobFinding
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import ChannelStatus
from stormwatch.alerting.observations import observe
from stormwatch.history.job_names import JobNamePattern
from stormwatch.severity import Severity
from tests.stormwatch.alerting.alert_builders import (
    START_NS,
    T0,
    make_fact,
    make_finding,
    make_regression,
    make_suspect,
)

GOLDEN_V1 = Path(__file__).parent / "golden" / "alerts_v1.json"
NAMES = JobNamePattern()
DAY = timedelta(days=1)
HOSTILE = "evil|job\r\n<b>&amp; \u202e<!channel>"


def _vit(job_id: str, *, started_ns: int, most_severe: str = "alert:critical", oom: bool = True) -> JobFinding:
    finding = make_finding(job_id, make_fact("earliest", rank=1, severity=Severity.WARNING, signal="alert:warning"),
                           make_fact("most_severe", rank=2, signal=most_severe), started_ns=started_ns,
                           oom_rank=2 if oom else None, missing=(3,), hosts=("node-a", "node-b", "node-b"))
    return replace(finding, summary="2 indicators; rank 3 missing")


def _llama() -> JobFinding:
    fact = replace(make_fact("most_severe", rank=3), phase_path="train / all_reduce",
                   details="in attempt 1 of 2, interrupted, OOM on rank 3 (session s-1)")
    attempt = AttemptRef(1, 2, "interrupted", "attempt 1 of 2, interrupted, OOM on rank 3")
    return replace(make_finding("llama-8r-0142", fact, oom_rank=3), attempt=attempt, report_url=None)


def _hostile() -> JobFinding:
    fact = replace(make_fact("earliest", signal=f"alert:{HOSTILE}"), details=HOSTILE, phase_path=HOSTILE)
    return replace(make_finding(f"{HOSTILE}-7", fact, hosts=(HOSTILE,)), summary=HOSTILE, verdict="critical")


def _targets(book: AlertBook) -> AlertBook:
    """Targets of every state on the records, a silence and an inhibition."""
    records = dict(book.records)
    stamp = T0.isoformat()
    for fingerprint, record in book.records.items():
        targets: dict[str, TargetState] = {"default/slack": TargetState(ChannelStatus.SENT, stamp, attempts=1)}
        if fingerprint.kind is AlertKind.EARLIEST:
            targets["default/email"] = TargetState(ChannelStatus.FAILED, None, None, 3, "SMTPServerDisconnected: x")
        elif fingerprint.kind is AlertKind.MISSING_RANKS:
            targets["team/slack"] = TargetState(ChannelStatus.IN_FLIGHT, None, None, 0, None, "tok-1", stamp)
        elif fingerprint.kind is AlertKind.REGRESSION:
            targets["default/email"] = TargetState(ChannelStatus.SKIPPED_BELOW_THRESHOLD)
        elif fingerprint.kind is AlertKind.OOM:
            targets["default/email"] = TargetState(ChannelStatus.SENT, stamp, (T0 + DAY).isoformat(), 2)
        records[fingerprint] = replace(record, targets=targets)
    return AlertBook(records, book.runs)


def golden_book() -> AlertBook:
    """Three audits: everything new; the next runs (vit's OOM and the fleet findings resolve); vit's run
    re-diagnosed under its job id with another most-severe signal."""
    first = observe([_vit("vit-3", started_ns=START_NS), _llama(), _hostile(), make_suspect("node-<9>", 3),
                     make_regression("bert-7", job_name="bert")], names=NAMES, known_runs={}, fleet_evaluated=True)
    book = advance(AlertBook(), first, now=T0)[0]
    second = observe([_vit("vit-4", started_ns=START_NS + 10, oom=False)], names=NAMES, known_runs=book.runs,
                     fleet_evaluated=True)
    book = advance(_targets(book), second, now=T0 + DAY)[0]
    third = observe([_vit("vit-4", started_ns=START_NS + 10, oom=False, most_severe="alert:oom-risk")], names=NAMES,
                    known_runs=book.runs, fleet_evaluated=False)
    book = advance(book, third, now=T0 + 2 * DAY)[0]
    records = dict(book.records)
    for fingerprint, record in book.records.items():
        if fingerprint.kind is AlertKind.OOM and fingerprint.job_name == "llama-8r":
            records[fingerprint] = replace(record, silenced_by="s-1a2b3c4d")
        if fingerprint.kind is AlertKind.MOST_SEVERE and fingerprint.job_name == "llama-8r":
            records[fingerprint] = replace(record, inhibited_by="llama-8r|oom|oom")
    return AlertBook(records, book.runs)


def write_v1() -> None:
    """Write the golden file (only meaningful at the version-1 code, see the module's docstring)."""
    GOLDEN_V1.parent.mkdir(exist_ok=True)
    GOLDEN_V1.write_bytes(golden_book().to_bytes())
