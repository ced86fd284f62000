"""The long mutation-fuzzing run (issue 7): thousands of damaged stormlog artifacts through the engine.

    python bench/fuzz.py --cases 10000 [--seed N] [--jobs 2] [--first 0] [--timeout 120]
                         [--out DIR] [--no-reduce]
    python bench/fuzz.py --replay CASE_ID [--seed N]

Cases are those of tests/fuzz (the CI test runs the first 300 of seed 0): case id ->
mutation (round robin), seed shape, damaged file, how the job is handed over (memory
tree, job folder, list of paths) and the damage's bytes, all reproducible from (seed,
id). Each case runs in a worker process (a C parser that dies kills a worker, not the
run) and is checked against every invariant of tests/fuzz/harness.py.

Prints the cases run per mutation, shape and mode, then each kind of failure (known
ones with the reproducer test of tests/stormwatch/test_fuzz_regressions.py that
covers them), the first case of each with its reproduction saved under --out
(crashes shrunk to the fewest files and lines that still raise), and the total time.
Exit status 1 when a failure no reproducer covers was found.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the in-tree packages, tests included

from tests.fuzz.corpus import shape_named  # noqa: E402
from tests.fuzz.harness import Failure, Outcome, damage, damaged_files  # noqa: E402
from tests.fuzz.known import known_issue  # noqa: E402
from tests.fuzz.pool import reduce_case, run_cases  # noqa: E402
from tests.fuzz.reduce import save  # noqa: E402

Signature = tuple[str, str, str]


def signature(outcome: Outcome, failure: Failure) -> Signature:
    """What makes two failures the same bug: kind, innermost engine function, and the
    exception type (crashes) or the mutation and damaged file's format (everything else)."""
    where = failure.where.rsplit(":", 1)[0]
    if failure.kind in ("crash", "model_json", "render", "session"):
        return failure.kind, where, failure.detail.split(":", 1)[0]
    fmt = shape_named(outcome.case.shape).targets[outcome.case.target].value
    return failure.kind, where, f"{outcome.case.mutation} on {fmt}"


def _table(title: str, rows: dict[str, Counter[str]]) -> None:
    columns = ("run", "n/a", "new", "known")
    width = max(len(title), *(len(name) for name in rows))
    print(f"\n{title:<{width}}  " + "  ".join(f"{c:>6}" for c in columns))
    for name in sorted(rows):
        print(f"{name:<{width}}  " + "  ".join(f"{rows[name][c]:>6}" for c in columns))
    total = Counter[str]()
    for counts in rows.values():
        total.update(counts)
    print(f"{'total':<{width}}  " + "  ".join(f"{total[c]:>6}" for c in columns))


def _save_reproduction(out: Path, number: int, outcome: Outcome, failure: Failure, *, shrink: bool) -> str:
    case = outcome.case
    folder = out / f"{number:02d}-{failure.kind}-case{case.case_id}"
    known = known_issue(outcome, failure)
    about = {"case": asdict(case), "note": outcome.note, "failure": asdict(failure),
             "known": known.test if known else None, "replay": f"python bench/fuzz.py --replay {case.case_id} "
                                                                 f"--seed {case.seed}"}
    if shrink and failure.kind in ("crash", "model_json", "render") and reduce_case(case, folder):
        save(folder, {}, {**about, "reduced": True})
        return f"{folder} (reduced)"
    shape, mutated = damage(case)
    assert mutated is not None
    save(folder, damaged_files(shape, case, mutated), {**about, "reduced": False})
    return str(folder)


def _replay(case_id: int, seed: int) -> int:
    (outcome,) = run_cases([case_id], seed=seed, jobs=1)
    print(f"{outcome.case}\n  damage: {outcome.note}\n  {outcome.seconds:.2f} s")
    for failure in outcome.failures:
        known = known_issue(outcome, failure)
        print(f"  {failure.kind} {failure.where} {failure.detail}  [{known.test if known else 'NEW'}]")
        print("    " + failure.trace.replace("\n", "\n    "))
    print("  no failure" if not outcome.failures else "")
    return 1 if outcome.failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--first", type=int, default=0, help="first case id")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a case counts as hung")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "stormwatch-fuzz",
                        help="where reproductions are saved")
    parser.add_argument("--no-reduce", action="store_true", help="save crashing cases without shrinking them")
    parser.add_argument("--replay", type=int, metavar="CASE_ID", help="run one case and print its failures")
    args = parser.parse_args(argv)
    if args.replay is not None:
        return _replay(args.replay, args.seed)

    ids = range(args.first, args.first + args.cases)
    print(f"stormwatch mutation fuzz: {args.cases} cases (ids {ids.start}-{ids.stop - 1}), seed {args.seed}, "
          f"{args.jobs} worker processes", flush=True)
    started = time.perf_counter()
    by: dict[str, dict[str, Counter[str]]] = {"mutation": defaultdict(Counter), "shape": defaultdict(Counter),
                                              "mode": defaultdict(Counter)}
    groups: dict[Signature, list[tuple[Outcome, Failure]]] = defaultdict(list)
    outcomes: list[Outcome] = []
    for done, outcome in enumerate(run_cases(ids, seed=args.seed, jobs=args.jobs, timeout_s=args.timeout), 1):
        outcomes.append(outcome)
        known = [known_issue(outcome, f) is not None for f in outcome.failures]
        column = "n/a" if outcome.skipped else "run"
        for table, name in (("mutation", outcome.case.mutation), ("shape", outcome.case.shape),
                            ("mode", outcome.case.mode)):
            counts = by[table][name]
            counts[column] += 1
            counts["new"] += not all(known)
            counts["known"] += bool(known) and all(known)
        for failure in outcome.failures:
            groups[signature(outcome, failure)].append((outcome, failure))
        if done % 1000 == 0:
            print(f"  {done}/{args.cases} cases, {time.perf_counter() - started:.0f} s", flush=True)
    elapsed = time.perf_counter() - started

    for table, rows in by.items():
        _table(f"cases by {table}", rows)

    print(f"\nfailures: {len(groups)} kinds (reproductions under {args.out})")
    args.out.mkdir(parents=True, exist_ok=True)
    new_kinds = 0
    for number, (sig, members) in enumerate(sorted(groups.items(), key=lambda kv: -len(kv[1])), 1):
        first_outcome, first_failure = min(members, key=lambda m: m[0].case.case_id)
        known = known_issue(first_outcome, first_failure)
        new_kinds += known is None
        cases = sorted({o.case.case_id for o, _ in members})
        mutations = Counter(o.case.mutation for o, _ in members)
        print(f"\n[{'known' if known else 'NEW'}] {sig[0]} {sig[1] or '-'} {sig[2]}: {len(cases)} cases "
              f"({', '.join(f'{m} {n}' for m, n in mutations.most_common())})")
        print(f"  first: {first_outcome.case} -- {first_outcome.note}")
        print(f"  {first_failure.detail}")
        if known:
            print(f"  reproducer: {known.test}")
        saved = _save_reproduction(args.out, number, first_outcome, first_failure, shrink=not args.no_reduce)
        print(f"  reproduction: {saved}")

    run = sum(not o.skipped for o in outcomes)
    failed = sum(bool(o.failures) for o in outcomes)
    print(f"\ntotal: {len(outcomes)} cases ({run} run, {len(outcomes) - run} not applicable), {failed} with failures, "
          f"{new_kinds} new kinds of failure, in {elapsed:.1f} s ({len(outcomes) / elapsed:.1f} cases/s)")
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:3]
    print("slowest: " + "; ".join(f"case {o.case.case_id} {o.case.mutation} {o.seconds:.2f} s" for o in slowest))
    return 1 if new_kinds else 0


if __name__ == "__main__":
    sys.exit(main())
