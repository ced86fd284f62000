"""``stormwatch diagnose``: one job, locally, with no Prefect import.

Writes ``OUT/model.json`` and ``OUT/report.html`` (self-contained), prints a
short summary and returns the documented exit code: 0 clean, 3 findings at or
above ``--fail-on``, 2 usage, 5 nothing loadable, 1 a job over ``--max-events``
(or another error). An artifact over ``--max-artifact-bytes`` is skipped with a warning.
Every session of the job is diagnosed, as the audit does (at most ``--max-sessions``; ``--session ID``
diagnoses that one alone): ``OUT/sessions/<encoded id>/`` holds each one's model.json and report.html,
``OUT/model.json`` is the job document (its ``model`` the default session's, as stormlog shows it;
``attempts``; the verdict, and so the exit code, is the worst session's). A ``--ranks`` that selects
none of the job's ranks, or a ``--session`` it does not have, is a usage error listing what it has.
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
from stormwatch.analysis.rank_filter import RankFilterError
from stormwatch.diagnose import DEFAULT_MAX_SESSIONS, DiagnoseOptions, default_job_id
from stormwatch.diagnose_sessions import JobDiagnosis, diagnose_job
from stormwatch.flows.diagnose_summary import summary_lines, unknown_session_lines
from stormwatch.flows.run_options import leak_min_argument
from stormwatch.load.limits import DEFAULT_LIMITS, JobLimitError
from stormwatch.outputs.verdict import ExitCode
from stormwatch.reports.jobattempts import PageNav
from stormwatch.reports.jobdetail import detail_document
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
    parser.add_argument("--session", default=None, metavar="ID",
                        help="diagnose this session id only (default: every session, as the audit does)")
    parser.add_argument("--all-sessions", action="store_true",
                        help="diagnose every session of the job (each written under OUT/sessions/; the verdict "
                             "is the worst session's): the default, kept for scripts that say it")
    parser.add_argument("--max-sessions", type=int, default=None, metavar="N",
                        help=f"diagnose at most N sessions: the default one and the most recent (default "
                             f"{DEFAULT_MAX_SESSIONS}); the others are listed, with a warning")
    parser.add_argument("--job-id", default=None, help="job id recorded in model.json (default: folder name)")
    parser.add_argument("--endpoint-url", default=None, metavar="URL",
                        help="S3-compatible endpoint for s3:// sources (default: $AWS_ENDPOINT_URL, else AWS)")
    parser.add_argument("--fail-on", default=FailOn.NEVER.value, choices=[item.value for item in FailOn])
    parser.add_argument("--preset", default=CollectivePreset.MEDIUM.value,
                        choices=[item.value for item in CollectivePreset], help="collective attribution preset")
    limit_arguments(parser)
    leak_min_argument(parser)
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
            _write_atomically(folder / "model.json", result.diagnosis.document.to_json())
            _write_atomically(folder / "report.html", render_job(result.diagnosis.document, nav=nav).encode("utf-8"))
        except OSError as exc:
            errors[result.session_id] = f"its outputs were not written: {type(exc).__name__}: {exc}"
    if diagnosis.sessions:
        written.append(out / "sessions")
    diagnosis = diagnosis.with_output_errors(errors)
    _write_atomically(out / "model.json", diagnosis.document.to_json())
    page = render_job(diagnosis.document, detail=detail_document(diagnosis))  # details the verdict's attempt
    _write_atomically(out / "report.html", page.encode("utf-8"))
    return diagnosis, [out / "model.json", out / "report.html", *written]


def fetch_s3(uri: str, *, endpoint_url: str | None, max_artifact_bytes: int) -> tuple[Any, list[Any]]:
    """Read every object under an S3 prefix into memory (imports boto3, never Prefect),
    except objects over ``max_artifact_bytes``, which the loader then names in a warning."""
    from stormwatch.tasks.storage.protocol import StorageSettings
    from stormwatch.tasks.storage.s3 import S3Storage

    storage = S3Storage(StorageSettings(uri=uri, endpoint_url=endpoint_url))
    return storage.fetch_prefix(max_artifact_bytes=max_artifact_bytes)


def run(args: argparse.Namespace) -> int:
    every_session = args.session is None  # as the audit judges a job: every session, the worst decides
    if args.all_sessions and not every_session:
        print("error: --session ID diagnoses one session and --all-sessions every one: give one of them",
              file=sys.stderr)
        return ExitCode.USAGE
    if args.max_sessions is not None and not every_session:
        print("error: --max-sessions applies when every session is diagnosed, not with --session", file=sys.stderr)
        return ExitCode.USAGE
    try:
        options = DiagnoseOptions.parse(ranks=args.ranks, session_id=args.session, fail_on=args.fail_on,
                                        preset=args.preset, max_artifact_bytes=args.max_artifact_bytes,
                                        max_events=args.max_events, all_sessions=every_session,
                                        max_sessions=args.max_sessions, leak_min=args.leak_min)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
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
            tree, entries = fetch_s3(remote[0], endpoint_url=args.endpoint_url,
                                      max_artifact_bytes=options.limits.max_artifact_bytes)
            diagnosis = diagnose_job(tree, job_id=job_id, source_name=remote[0], options=options, entries=entries)
        else:
            diagnosis = diagnose_job(args.sources, job_id=job_id, source_name=", ".join(args.sources),
                                     options=options)
    except JobLimitError as exc:
        print(f"error: job {job_id} not diagnosed: {exc}", file=sys.stderr)
        return ExitCode.ERROR
    except SessionNotFoundError as exc:
        for line in unknown_session_lines(args.session, exc.available, job=", ".join(args.sources)):
            print(line, file=sys.stderr)
        return ExitCode.USAGE
    except (RankFilterError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    out = Path(args.out) if args.out else Path("stormwatch-out") / job_id
    diagnosis, written = write_outputs(diagnosis, out)
    for line in summary_lines(diagnosis, written):
        print(line)
    verdict = diagnosis.verdict or diagnosis.main.verdict
    return verdict.exit_code
