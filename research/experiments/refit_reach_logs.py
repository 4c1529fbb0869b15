"""Issue 61: `--progress reach` readings of logged measurements refitted in log space (``fit_pareto``, the
read-out since the commit after 2d2a890; before it, eq. 2.11 was fitted to 1/E in linear space), from the
examples each branch took, as the runs printed them.

    python research/experiments/refit_reach_logs.py LOG [LOG ...]

Each "measured at" line of a log (a train run's, or reach_at_forks.py's / measure_on_cartpole.py's) gives
the branches' batches (a doubling ladder from the first to the last), the ones that missed the goal, and
the examples of the others; A2C's optimizer steps are examples / batch.
"""

from __future__ import annotations

import re
import sys

import numpy as np

from rlscale.control.pareto_fit import fit_pareto

LINE = re.compile(r"branches (\d+)-(\d+).*to [\d.]+ in ([\d,/]+) examples(; not reached at ([\d, ]+))?")


def main() -> None:
    for path in sys.argv[1:]:
        for line in open(path):
            found = LINE.search(line)
            if not found or "measured at" not in line:
                continue
            examples = np.array([float(x.replace(",", "")) for x in found.group(3).split("/")])
            low, high = int(found.group(1)), int(found.group(2))
            ladder = [low * 2**i for i in range(20) if low * 2**i <= high]
            missed = {int(x.replace(",", "")) for x in (found.group(5) or "").split(", ") if x}
            batches = np.array([b for b in ladder if b not in missed], dtype=float)
            printed = re.search(r"B_crit ([\d.,]+)", line).group(1)
            if len(examples) != len(batches):  # --branch-runs > 1: printed in log space already (pooled)
                print(f"{path}: as printed {printed:>8}  (several races a batch: read in log space as printed)")
                continue
            refit = fit_pareto(examples / batches, examples).b_crit if len(batches) >= 3 else float("nan")
            print(f"{path}: as printed {printed:>8}  refitted in log space {refit:10,.0f}")


if __name__ == "__main__":
    main()
