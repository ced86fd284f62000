"""``stormwatch diagnose``: one job, locally, with no Prefect import.

Writes ``OUT/model.json`` and ``OUT/report.html`` (self-contained), prints a
short summary and returns the documented exit code: 0 clean, 3 findings at or
above ``--fail-on``, 2 usage, 5 nothing loadable, 1 a job over ``--max-events``
(or another error). An artifact over ``--max-artifact-bytes`` is skipped with a warning.
With ``--all-sessions`` every session of the job is diagnosed (at most ``--max-sessions``):
``OUT/sessions/<encoded id>/`` holds each one's model.json and report.html, ``OUT/model.json``
is the job document (``attempts``; the verdict, and so the exit code, is the worst session's).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from stormwatch import SessionNotFoundError
from stormwatch.analysis.collective import CollectivePreset
from stormwatch.analysis.model import AnomalyIndicator
from stormwatch.analysis.rank_filter import RankFilterError, format_ranks
from stormwatch.diagnose import DEFAULT_MAX_SESSIONS, DiagnoseOptions, default_job_id
from stormwatch.diagnose_sessions import JobDiagnosis, diagnose_job
from stormwatch.load.limits import DEFAULT_LIMITS, JobLimitError
from stormwatch.outputs.model_json import dumps_document
from stormwatch.outputs.verdict import ExitCode
from stormwatch.reports.jobattempts import PageNav
from stormwatch.reports.render import render_job
from stormwatch.severity import FailOn


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "diagnose",
        help="diagnose one job and write model.json",
        description="Diagnose one job. One folder SOURCE is a job folder (every rank under it is one job); "
        "several SOURCEs are stormlog's path list. Exit codes: 0 clean, 3 findings at or above --fail-on, "
        "2 usage, 5 nothing loadable, 1 a job over --max-events or another error.",
    )
    parser.add_argument("sources", nargs="+", metavar="SOURCE")
    parser.add_argument("--out", default=None, help="output folder (default: ./stormwatch-out/<job id>)")
    parser.add_argument("--ranks", default=None, metavar="EXPR", help="rank filter: all, *, or e.g. 0,2,4-7")
    parser.add_argument("--session", default=None, metavar="ID", help="diagnose this session id")
    parser.add_argument("--all-sessions", action="store_true",
                        help="diagnose every session of the job (each written under OUT/sessions/); the verdict "
                             "is the worst session's")
    parser.add_argument("--max-sessions", type=int, default=None, metavar="N",
                        help=f"with --all-sessions, diagnose at most N sessions: the default one and the most "
                             f"recent (default {DEFAULT_MAX_SESSIONS}); the others are listed, with a warning")
    parser.add_argument("--job-id", default=None, help="job id recorded in model.json (default: folder name)")
    parser.add_argument("--endpoint-url", default=None, metavar="URL",
                        help="S3-compatible endpoint for s3:// sources (default: $AWS_ENDPOINT_URL, else AWS)")
    parser.add_argument("--fail-on", default=FailOn.NEVER.value, choices=[item.value for item in FailOn])
    parser.add_argument("--preset", default=CollectivePreset.MEDIUM.value,
                        choices=[item.value for item in CollectivePreset], help="collective attribution preset")
    limit_arguments(parser)
    parser.set_defaults(run=run)


def limit_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-artifact-bytes`` and ``--max-events`` (validated by :class:`~stormwatch.load.limits.LoadLimits`)."""
    parser.add_argument("--max-artifact-bytes", type=int, default=None, metavar="N",
                        help="skip (with a warning) any artifact larger than N bytes "
                        f"(default {DEFAULT_LIMITS.max_artifact_bytes})")
    parser.add_argument("--max-events", type=int, default=None, metavar="N",
                        help=f"fail a job holding more than N events (default {DEFAULT_LIMITS.max_events})")


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _seconds(timestamp_ns: int, origin_ns: int | None) -> str:
    return f"+{(timestamp_ns - origin_ns) / 1e9:.3f} s" if origin_ns is not None else f"{timestamp_ns} ns"


def describe_indicator(indicator: AnomalyIndicator, origin_ns: int | None) -> str:
    when = _seconds(indicator.timestamp_ns, origin_ns)
    parts = [f"rank {indicator.rank}", indicator.signal, indicator.severity, when]
    if indicator.phase_path:
        parts.append(f"phase {indicator.phase_path}")
    if indicator.confidence is not None:
        parts.append(f"confidence {indicator.confidence:.2f}")
    if indicator.reason_codes:
        parts.append("reasons " + ", ".join(indicator.reason_codes))
    return " | ".join(parts)


def summary_lines(diagnosis: JobDiagnosis, written: list[Path]) -> list[str]:
    main, verdict = diagnosis.main, diagnosis.verdict or diagnosis.main.verdict
    model = main.model
    lines = [f"{diagnosis.job_id}: {verdict.status.value.upper()} (exit {verdict.exit_code}) - {verdict.summary}"]
    for attempt in diagnosis.attempts:
        marks = "".join(mark for mark, on in ((" [shown]", attempt.default),
                                              (" [verdict]", attempt.session_id == diagnosis.document.get(
                                                  "worst_session"))) if on)
        lines.append(f"  {attempt.describe()} - session {attempt.session_id}{marks}")
    if not diagnosis.attempts and diagnosis.group_count > 1:
        lines.append(f"  sessions        {diagnosis.group_count} attempts found; this is session "
                     f"{main.loaded.selected_session_id} only (--all-sessions diagnoses every one)")
    origin = main.started_at_ns
    labels = {"earliest": "earliest cause", "most_severe": "most severe"}
    for indicator in model.indicators:
        lines.append(f"  {labels.get(indicator.kind, indicator.kind):<15} {describe_indicator(indicator, origin)}")
    present, expected = len(model.present_ranks), len(model.expected_ranks)
    missing = f", missing {format_ranks(model.missing_ranks)}" if model.missing_ranks else ""
    lines.append(f"  ranks           {present}/{expected} present{missing}")
    warnings = len(diagnosis.document.get("warnings", ())) + len(model.warnings)
    if warnings:
        lines.append(f"  warnings        {warnings} (see model.json)")
    for path in written:
        lines.append(f"  wrote           {path}")
    return lines


def write_outputs(diagnosis: JobDiagnosis, out: Path) -> tuple[JobDiagnosis, list[Path]]:
    """The job's model.json and report.html in ``out``, and each session's under ``out/sessions/``;
    a session whose files cannot be written is recorded in the job's document (its error), not raised."""
    errors: dict[str, str] = {}
    written: list[Path] = []
    labels = {attempt.session_id: attempt.describe() for attempt in diagnosis.attempts}
    for result in diagnosis.sessions:
        if not result.written or result.diagnosis is None or result.folder is None:
            continue
        folder = out.joinpath(*result.folder.split("/"))
        nav = PageNav.for_session(depth=len(result.folder.split("/")), attempt=labels.get(result.session_id))
        try:
            _write_atomically(folder / "model.json", dumps_document(result.diagnosis.document))
            _write_atomically(folder / "report.html", render_job(result.diagnosis.document, nav=nav).encode("utf-8"))
        except OSError as exc:
            errors[result.session_id] = f"its outputs were not written: {type(exc).__name__}: {exc}"
    if diagnosis.sessions:
        written.append(out / "sessions")
    diagnosis = diagnosis.with_output_errors(errors)
    _write_atomically(out / "model.json", dumps_document(diagnosis.document))
    _write_atomically(out / "report.html", render_job(diagnosis.document).encode("utf-8"))
    return diagnosis, [out / "model.json", out / "report.html", *written]


def _fetch_s3(uri: str, *, endpoint_url: str | None, max_artifact_bytes: int) -> tuple[Any, list[Any]]:
    """Read every object under an S3 prefix into memory (imports boto3, never Prefect),
    except objects over ``max_artifact_bytes``, which the loader then names in a warning."""
    from stormwatch.tasks.storage.protocol import StorageSettings
    from stormwatch.tasks.storage.s3 import S3Storage

    storage = S3Storage(StorageSettings(uri=uri, endpoint_url=endpoint_url))
    return storage.fetch_prefix(max_artifact_bytes=max_artifact_bytes)


def run(args: argparse.Namespace) -> int:
    try:
        options = DiagnoseOptions.parse(ranks=args.ranks, session_id=args.session, fail_on=args.fail_on,
                                        preset=args.preset, max_artifact_bytes=args.max_artifact_bytes,
                                        max_events=args.max_events, all_sessions=args.all_sessions,
                                        max_sessions=args.max_sessions)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if args.max_sessions is not None and not args.all_sessions:
        print("error: --max-sessions applies with --all-sessions only", file=sys.stderr)
        return ExitCode.USAGE
    remote = [source for source in args.sources if source.startswith("s3://")]
    if remote and len(args.sources) > 1:
        print("error: an s3:// SOURCE is a job folder and must be the only SOURCE", file=sys.stderr)
        return ExitCode.USAGE
    missing = [source for source in args.sources if not remote and not Path(source).expanduser().exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return ExitCode.USAGE
    job_id = args.job_id or (remote[0].rstrip("/").rsplit("/", 1)[-1] if remote else default_job_id(args.sources))
    try:
        if remote:
            tree, entries = _fetch_s3(remote[0], endpoint_url=args.endpoint_url,
                                      max_artifact_bytes=options.limits.max_artifact_bytes)
            diagnosis = diagnose_job(tree, job_id=job_id, source_name=remote[0], options=options, entries=entries)
        else:
            diagnosis = diagnose_job(args.sources, job_id=job_id, source_name=", ".join(args.sources),
                                     options=options)
    except JobLimitError as exc:
        print(f"error: job {job_id} not diagnosed: {exc}", file=sys.stderr)
        return ExitCode.ERROR
    except (SessionNotFoundError, RankFilterError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    out = Path(args.out) if args.out else Path("stormwatch-out") / job_id
    diagnosis, written = write_outputs(diagnosis, out)
    for line in summary_lines(diagnosis, written):
        print(line)
    verdict = diagnosis.verdict or diagnosis.main.verdict
    return verdict.exit_code
