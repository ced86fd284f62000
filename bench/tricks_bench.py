"""Do the loader's speed tricks earn their place? Each against its plain version, on every shape.

A trick stays only where it measures a gain of 5% or more on some artifact shape
(bench/shapes_bench.py writes the shapes). For each trick this bench swaps in the
plain version a reader understands at once, times ``load_artifacts`` on every shape
with the trick and without it, in turns (round after round, so machine noise hits
both alike), and prints the gain per shape, best of N each:

  recode-merge    events/frame.py concat_strings recodes each part through a lookup table
                  vs  pandas.api.types.union_categoricals, then a take

Dropped after this bench (8 ranks x 5,000 samples, best of 15, gain on every shape < 5%
or within noise): finding newlines 8 bytes a word through log2 (-1.7% .. +2.2%), and
asking for transparent huge pages on mappings of 2 MiB and more (-5.0% .. +5.4%, the
sign changing from run to run). Both are now the plain versions.

    python bench/tricks_bench.py [--keep /tmp/shapes] [--shapes ...] [--repeat 7] [--tricks ...]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator, Sequence
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
TRICKS: dict[str, Plain] = {
    "recode-merge": lambda: swapped(frame, "concat_strings", plain_concat_strings, merge),
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
    print(f"load_artifacts, best of {args.repeat}, trick and plain in turns; gain = plain / trick - 1\n")
    print(f"{'trick':<15}" + "".join(f"{shape:>12}" for shape in shapes) + "   verdict")
    for trick in tricks:
        gains = []
        for shape in shapes:
            with_trick, without = compare(jobs[shape].folder, TRICKS[trick], args.repeat)
            gains.append(without / with_trick - 1)
        best = max(gains)
        where = shapes[gains.index(best)]
        verdict = f"keep (+{best:.0%} on {where})" if best >= GAIN_TARGET else "drop (< 5% everywhere)"
        print(f"{trick:<15}" + "".join(f"{gain:>+12.1%}" for gain in gains) + f"   {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
