"""Do the loader's speed tricks earn their place? Each against its plain version, on every shape.

A trick stays only where it measures a gain of 5% or more on some artifact shape
(bench/shapes_bench.py writes the shapes). For each trick this bench swaps in the
plain version a reader understands at once, times ``load_artifacts`` on every shape
with the trick and without it, in turns (round after round, so machine noise hits
both alike), and prints the gain per shape, best of N each:

  recode-merge    events/frame.py concat_strings recodes each part through a lookup table
                  vs  pandas.api.types.union_categoricals, then a take
  arrow-threads   load/loader.py: units parsed side by side each parse on one core (Arrow's pool only
                  for a unit larger than a worker's share)  vs  every unit on Arrow's pool
  schema-order    formats/arrow_reader.py: the explicit schema in the key order of the buffer's
                  first line  vs  the schema in its own order
  shared-metadata formats/columnar.py: lines with the same metadata text share one parsed dict
                  vs  every line's metadata parsed on its own
  literal-json    formats/csv_columns.py metadata_dict reads a tracker's Python-literal cell as JSON
                  vs  parse_metadata_cell (json.loads, then ast.literal_eval)
  json-on-caller  load/loader.py: JSON documents parse on the calling thread  vs  on a worker thread
                  (this one also lowers peak memory, which this bench does not measure)

Each trick names the shapes whose load runs the code it replaces; on the others both versions
run the same code, so the gain printed there (in parentheses) is the machine's noise, and only
the touched shapes decide. Runs, and the tricks dropped after earlier runs: bench/README.md.

    python bench/tricks_bench.py [--keep /tmp/shapes] [--shapes ...] [--repeat 7] [--tricks ...]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from pandas.api.types import union_categoricals  # noqa: E402
from shapes_bench import SHAPES, prepare  # noqa: E402

from stormwatch import load_artifacts  # noqa: E402
from stormwatch.events import frame, merge  # noqa: E402
from stormwatch.formats import arrow_reader, columnar, csv_columns  # noqa: E402
from stormwatch.load import loader  # noqa: E402

GAIN_TARGET = 0.05


def plain_concat_strings(arrays: Sequence[Any], order: np.ndarray | None = None) -> pd.Categorical:
    parts = [frame.categorical(array) for array in arrays]
    joined = parts[0] if len(parts) == 1 else union_categoricals(parts)
    return joined if order is None else joined.take(order)


@contextlib.contextmanager
def swapped(module: Any, name: str, replacement: Any, *also: Any) -> Iterator[None]:
    """``module.name`` (and the same name in every module of ``also`` that imported it) replaced."""
    targets = [module, *also]
    saved = [getattr(target, name) for target in targets]
    for target in targets:
        setattr(target, name, replacement)
    try:
        yield
    finally:
        for target, value in zip(targets, saved, strict=True):
            setattr(target, name, value)


Plain = Callable[[], contextlib.AbstractContextManager[None]]
JSONL = frozenset({"jsonl-text", "jsonl-null", "sink", "v4"})  # the shapes Arrow's JSON reader parses
ON_WORKERS = JSONL | {"csv"}  # the shapes whose units parse on the loader's worker threads


@dataclass(frozen=True)
class Trick:
    """A trick's plain version and the shapes whose load runs the code it replaces (on any other
    shape both versions run the same code: the gain printed there is the machine's noise)."""

    plain: Plain
    shapes: frozenset[str]


TRICKS: dict[str, Trick] = {
    "recode-merge": Trick(lambda: swapped(frame, "concat_strings", plain_concat_strings, merge), frozenset(SHAPES)),
    "arrow-threads": Trick(lambda: swapped(loader, "_arrow_threads", lambda sizes: [True] * len(sizes)), ON_WORKERS),
    "schema-order": Trick(
        lambda: swapped(arrow_reader, "_schema_in_line_order", lambda first_line: arrow_reader.SCHEMA), JSONL),
    "shared-metadata": Trick(lambda: swapped(columnar, "_SHARE_MIN_ROWS", sys.maxsize), JSONL),
    "literal-json": Trick(lambda: swapped(csv_columns, "metadata_dict", csv_columns.parse_metadata_cell),
                          frozenset({"csv"})),
    "json-on-caller": Trick(lambda: swapped(loader, "_on_a_worker", lambda unit: not loader.needs_allocator(unit)),
                            frozenset({"json"})),
}


def timed_load(folder: Path) -> float:
    gc.collect()
    started = time.perf_counter()
    loaded = load_artifacts([folder])
    elapsed = time.perf_counter() - started
    del loaded
    return elapsed


def compare(folder: Path, plain: Plain, repeat: int) -> tuple[float, float]:
    """Best load time with the trick and with the plain version, taken in turns; first checks
    that both give the same events (a plain version must be a drop-in replacement)."""
    expected = load_artifacts([folder]).events
    with plain():
        pd.testing.assert_frame_equal(load_artifacts([folder]).events, expected)
    del expected
    with_trick, without = float("inf"), float("inf")
    for _ in range(repeat):
        with_trick = min(with_trick, timed_load(folder))
        with plain():
            without = min(without, timed_load(folder))
    return with_trick, without


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=Path("/tmp/stormwatch-shapes"), help="shape job root (reused)")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--tricks", default=",".join(TRICKS))
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    shapes = [s for s in args.shapes.split(",") if s]
    tricks = [t for t in args.tricks.split(",") if t]
    jobs = prepare(args.keep, shapes, ranks=args.ranks, samples=args.samples, seed=args.seed)
    print(f"load_artifacts, best of {args.repeat}, trick and plain in turns; gain = plain / trick - 1;")
    print("(in parentheses: a shape the trick does not touch, where the gain is the machine's noise)\n")
    print(f"{'trick':<16}" + "".join(f"{shape:>12}" for shape in shapes) + "   verdict")
    for name in tricks:
        trick = TRICKS[name]
        gains = {}
        for shape in shapes:
            with_trick, without = compare(jobs[shape].folder, trick.plain, args.repeat)
            gains[shape] = without / with_trick - 1
        touched = {shape: gain for shape, gain in gains.items() if shape in trick.shapes}
        noise = max((abs(gain) for shape, gain in gains.items() if shape not in trick.shapes), default=None)
        cells = "".join(f"{gain:>+12.1%}" if shape in trick.shapes else f"({gain:+.1%})".rjust(12)
                        for shape, gain in gains.items())
        if touched:
            where = max(touched, key=lambda shape: touched[shape])
            best = touched[where]
            verdict = f"keep (+{best:.0%} on {where})" if best >= GAIN_TARGET else "drop (< 5% everywhere)"
        else:
            verdict = "not measured (no shape it touches)"
        if noise is not None:
            verdict += f"; noise up to {noise:.0%}"
        print(f"{name:<16}{cells}   {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
