"""Growth's cost against a whole diagnose on every shape shapes_bench.py writes (8 ranks x 5,000 samples).

`python bench/growth_shapes.py [--ranks 8] [--samples 5000] [--repeat 3]`: each shape's job is diagnosed
whole (best of ``--repeat``), and ``rank_growth`` is timed as ``fleet_facts`` calls it (with the rank
facts' device totals). Issue 30's target: growth under 5 % of the diagnose on every shape.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import shapes_bench  # noqa: E402  (bench/ on the path: the shapes the other benches write)

from stormwatch.diagnose import diagnose  # noqa: E402
from stormwatch.growth.rank_growth import rank_growth  # noqa: E402

SHAPES = ("jsonl-text", "jsonl-null", "csv", "json", "sink", "sink-restart", "bundle", "v4", "v4-csv",
          "oom-dump", "mlx")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    jobs = shapes_bench.prepare(Path(tempfile.mkdtemp()), list(SHAPES), ranks=args.ranks, samples=args.samples,
                                seed=0)
    met = True
    for shape in SHAPES:
        best_diagnose_s = best_growth_s = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            diagnosis = diagnose([jobs[shape].folder], job_id="growth-shapes", source_name="growth-shapes")
            best_diagnose_s = min(best_diagnose_s, time.perf_counter() - start)
            facts = () if diagnosis.document.fleet is None else diagnosis.document.fleet.facts.ranks
            totals = {fact.rank: None if fact.device_id is not None and fact.device_id < 0 else fact.device_total_bytes
                      for fact in facts}
            present = [int(rank) for rank in diagnosis.model.present_ranks]
            start = time.perf_counter()
            rank_growth(diagnosis.loaded.events, present, device_totals_bytes=totals,
                        clock_backwards_ranks=diagnosis.loaded.clock_backwards_ranks)
            best_growth_s = min(best_growth_s, time.perf_counter() - start)
        share = best_growth_s / best_diagnose_s * 100
        met &= share < 5.0
        print(f"{shape:13s} events {len(diagnosis.loaded.events):>7,}  diagnose {best_diagnose_s * 1000:7.1f} ms "
              f"(includes growth)  rank_growth {best_growth_s * 1000:6.1f} ms = {share:5.2f} %", flush=True)
    print(f"growth under 5 % of the diagnose on every shape: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
