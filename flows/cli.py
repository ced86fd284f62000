"""The ``stormwatch`` command. Local commands never import Prefect.

Exit codes (stable): 0 clean, 3 findings at or above ``--fail-on``, 2 usage,
5 nothing loadable, 1 other error.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stormwatch.flows import audit_cmd, compact_cmd, diagnose_cmd, silence_cmd
from stormwatch.flows.diagnose_summary import unknown_session_lines
from stormwatch.load.limits import DEFAULT_LIMITS
from stormwatch.outputs.verdict import ExitCode
from stormwatch.version import ENGINE_VERSION


def _print_load(source: str, tree_or_paths: Any, *, session_id: str | None) -> int:
    from stormwatch import SessionNotFoundError
    from stormwatch.load.loader import load_sessions

    try:
        loaded = load_sessions(tree_or_paths).result_for(session_id)
    except SessionNotFoundError as exc:
        for line in unknown_session_lines(session_id or "", exc.available, job=source):
            print(line, file=sys.stderr)
        return ExitCode.USAGE
    events = loaded.events
    ranks = sorted(set(events["rank"].tolist())) if len(events) else []
    print(
        f"{source}: {len(events):,} events, ranks {ranks or '-'}, "
        f"{len(loaded.sessions)} session(s), selected {loaded.selected_session_id or '-'}"
    )
    for warning in loaded.warnings[:5]:
        print(f"  warning: {warning}")
    if len(loaded.warnings) > 5:
        print(f"  ... {len(loaded.warnings) - 5} more warnings")
    return ExitCode.CLEAN if len(events) else ExitCode.NOTHING_LOADABLE


def _demo(args: argparse.Namespace) -> int:
    from stormwatch.flows.demo import write_demo_fleet

    root = Path(args.dir).resolve()
    jobs = write_demo_fleet(root)
    print(f"wrote an example fleet of {len(jobs)} jobs under {root / 'jobs'}; auditing it (Prefect flow)...")
    audit_args = build_parser().parse_args(["audit", "--storage", str(root), *(["--force"] if args.force else [])])
    code = audit_cmd.run_audit(audit_args)
    print(f"reports under {root / 'reports'} (fleet.json, fleet.parquet, one model.json per job)")
    return ExitCode.CLEAN if code in (ExitCode.CLEAN, ExitCode.FINDINGS) else code


def _load(args: argparse.Namespace) -> int:
    remote = [source for source in args.sources if source.startswith("s3://")]
    if remote and len(args.sources) > 1:
        print("error: an s3:// SOURCE is a job folder and must be the only SOURCE", file=sys.stderr)
        return ExitCode.USAGE
    if remote:  # as diagnose reads it: every object under the prefix, one job folder
        tree, _ = diagnose_cmd.fetch_s3(remote[0], endpoint_url=args.endpoint_url,
                                        max_artifact_bytes=DEFAULT_LIMITS.max_artifact_bytes)
        return _print_load(remote[0], tree, session_id=args.session)
    return _print_load(", ".join(args.sources), list(args.sources), session_id=args.session)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stormwatch", description="GPU-memory diagnostics over stormlog telemetry.")
    parser.add_argument("--version", action="version", version=f"stormwatch {ENGINE_VERSION}")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="write an example fleet to a folder, then audit it")
    demo.add_argument("dir", nargs="?", default="stormwatch-demo")
    demo.add_argument("--force", action="store_true", help="re-diagnose every job")
    demo.set_defaults(run=_demo)
    load = commands.add_parser("load", help="load artifacts and summarise sessions and warnings")
    load.add_argument("sources", nargs="+", help="one job folder, or several files/folders (stormlog's path list)")
    load.add_argument("--session", default=None, help="select this session id")
    load.add_argument("--endpoint-url", default=None, metavar="URL",
                      help="S3-compatible endpoint for an s3:// SOURCE (default: $AWS_ENDPOINT_URL, else AWS)")
    load.set_defaults(run=_load)
    diagnose_cmd.add_parser(commands)
    audit_cmd.add_parsers(commands)
    silence_cmd.add_parser(commands)
    compact_cmd.add_parser(commands)
    _debug_everywhere(commands)
    return parser


def _debug_everywhere(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``--debug`` after any command too (``stormwatch audit ... --debug``), nested ones included."""
    for sub in commands.choices.values():
        nested = [action for action in sub._actions if isinstance(action, argparse._SubParsersAction)]
        if nested:
            _debug_everywhere(nested[0])
        elif not any("--debug" in action.option_strings for action in sub._actions):
            sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="print the traceback of an error")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return ExitCode.USAGE if exc.code else ExitCode.CLEAN
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.ERROR
    except Exception as exc:  # the front door reports, never tracebacks at users (unless --debug)
        if args.debug:
            traceback.print_exc()
        print(f"error: {exc}" if str(exc) else f"error: {type(exc).__name__}", file=sys.stderr)
        return ExitCode.ERROR


if __name__ == "__main__":
    sys.exit(main())
