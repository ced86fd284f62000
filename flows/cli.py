"""The ``stormwatch`` command. Local commands never import Prefect.

Exit codes (stable): 0 clean, 3 findings at or above ``--fail-on``, 2 usage,
5 nothing loadable, 1 other error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from stormwatch.flows import audit_cmd, diagnose_cmd, silence_cmd
from stormwatch.outputs.verdict import ExitCode


def _print_load(source: str, paths: Sequence[str], *, session_id: str | None) -> int:
    from stormwatch import SessionNotFoundError, load_artifacts

    try:
        loaded = load_artifacts(list(paths), session_id=session_id)
    except SessionNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
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
    return _print_load(", ".join(args.sources), args.sources, session_id=args.session)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stormwatch", description="GPU-memory diagnostics over stormlog telemetry.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="write an example fleet to a folder, then audit it")
    demo.add_argument("dir", nargs="?", default="stormwatch-demo")
    demo.add_argument("--force", action="store_true", help="re-diagnose every job")
    demo.set_defaults(run=_demo)
    load = commands.add_parser("load", help="load artifacts and summarise sessions and warnings")
    load.add_argument("sources", nargs="+", help="one job folder, or several files/folders (stormlog's path list)")
    load.add_argument("--session", default=None, help="select this session id")
    load.set_defaults(run=_load)
    diagnose_cmd.add_parser(commands)
    audit_cmd.add_parsers(commands)
    silence_cmd.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return ExitCode.USAGE if exc.code else ExitCode.CLEAN
    try:
        return int(args.run(args))
    except Exception as exc:  # the front door reports, never tracebacks at users
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.ERROR


if __name__ == "__main__":
    sys.exit(main())
